package dashboard

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// relatedItems is the text of the resource page's related holders, one per item.
const relatedItems = `[...document.querySelectorAll('main ul.related li')].map((li) => li.innerText)`

// TestDashboardTree: the page of a key of a tree shows the key's place in the tree (its ancestors
// linking their pages) and who holds keys above and below it, indented by depth; and a node's
// remediation, waiting behind the upgrade of its cluster, says so on its page and on the node's.
func TestDashboardTree(t *testing.T) {
	d := startServer(t, false)
	d.must(200, "", "PUT", "/v1/trees/cluster/", nil)
	d.must(200, "", "PUT", "/v1/kinds/upgrade", map[string]any{})
	d.must(200, "", "PUT", "/v1/kinds/remediate", map[string]any{})
	up := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "upgrade", "resource": "cluster/eu-1"})["id"])
	claim(d, "", "runner-1", "upgrade", up)
	rem := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "remediate", "resource": "cluster/eu-1/node/a"})["id"])
	d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "cluster/eu-2/node/b", "holder": "reader", "ttl_ms": 3600000, "shared": true})
	ctx := browser(t, 1280, 900)

	do(t, ctx, chromedp.Navigate(d.url+"/#/resources/cluster%2Feu-1%2Fnode%2Fa"), hasText("main h1", "Resource cluster/eu-1/node/a"),
		hasText("main dl", "Tree", "cluster / cluster/eu-1 / cluster/eu-1/node / cluster/eu-1/node/a"),
		until(`document.querySelector('main dl .tree-path a[href="#/resources/cluster%2Feu-1"]')`),
		until(`((items) => items.length === 1 && items[0].startsWith('cluster/eu-1 (above: holds the whole subtree) runner-1'))(`+relatedItems+`)`),
		until(reason("held")+`.includes('"cluster/eu-1" (an ancestor) held exclusive by runner-1')`),
		until(`document.querySelector('main .line tbody tr:first-child a[href="#/jobs/`+fmt.Sprint(rem)+`"]')`))
	shot(t, ctx, "tree-node")

	// The root sees every holder below it, each indented by its depth.
	do(t, ctx, page("#/resources/cluster", "Resource cluster"),
		until(`((items) => items.length === 2 && items[0].startsWith('cluster/eu-1 (below) runner-1') && items[1].startsWith('cluster/eu-2/node/b (below) reader'))(`+relatedItems+`)`),
		until(`((lis) => lis[0].dataset.depth === '1' && lis[1].dataset.depth === '3')([...document.querySelectorAll('main ul.related li')])`),
		until(`document.querySelector('main ul.related li .badge.shared')`))
	shot(t, ctx, "tree-root")

	// The waiting remediation's own page names the upgrade of its cluster.
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", rem), fmt.Sprintf("Job %d", rem)),
		until(reason("held")+`.includes('"cluster/eu-1" (an ancestor)')`),
		click(`main .why li[data-code="held"] a`), hasText("main h1", fmt.Sprintf("Job %d", up)))
}
