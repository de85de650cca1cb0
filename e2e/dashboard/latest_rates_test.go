package dashboard

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardLatestWinsAndRates: a superseded job's page links the job that replaced it; the
// kinds page shows a kind's policy replace with its debounce and a kind's rate; a resource whose
// kind's rate is reached says so, with when the window frees, and its waiting job explains it.
func TestDashboardLatestWinsAndRates(t *testing.T) {
	d := startServer(t, false)
	d.must(200, "", "PUT", "/v1/kinds/publish", map[string]any{"policy": "replace", "debounce_ms": 3600000})
	d.must(200, "", "PUT", "/v1/kinds/remediate", map[string]any{"rate": "1/1h"})
	old := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "publish", "resource": "page/web"})["id"])
	latest := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "publish", "resource": "page/web"})["id"])
	first := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "remediate", "resource": "workload/web"})["id"])
	claimed := claim(d, "", "runner-1", "remediate", first)
	d.must(200, "", "POST", fmt.Sprintf("/v1/jobs/%d/complete", first), map[string]any{"token": claimed["token"]})
	second := num(d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "remediate", "resource": "workload/web"})["id"])
	ctx := browser(t, 1280, 900)

	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/#/jobs/%d", d.url, old)), hasText("main h1", fmt.Sprintf("Job %d", old)),
		hasText("main dl", "superseded", "Superseded by", fmt.Sprintf("job %d", latest)),
		click(fmt.Sprintf(`main dl a[href="#/jobs/%d"]`, latest)), hasText("main h1", fmt.Sprintf("Job %d", latest)))
	do(t, ctx, page("#/kinds", "Kinds"),
		until(`((rows) => rows.some((r) => r.startsWith('publish\treplace, debounce 60 min')) && rows.some((r) => r.startsWith('remediate\tqueue') && r.includes('1/1h per resource')))(`+
			`[...document.querySelectorAll('main tbody tr')].map((tr) => tr.innerText))`))
	do(t, ctx, page("#/resources/workload%2Fweb", "Resource workload/web"),
		hasText("main dl", "Rates reached", "kind remediate: 1/1h reached, next at"))
	shot(t, ctx, "resource-rate")
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", second), fmt.Sprintf("Job %d", second)),
		until(reason("rate")+`.includes('rate 1/1h of kind "remediate" reached, next at')`))
}
