package dashboard

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardLimitsAndShared: the Limits page, reached from the navigation, shows each limit's
// use against its capacity, its holders and how many wait; a resource held by two shared
// holders lists both, each marked shared, and a shared request waiting behind an exclusive one
// is marked shared in the line.
func TestDashboardLimitsAndShared(t *testing.T) {
	d := startServer(t, false)
	if info := d.must(200, "", "GET", "/v1/info", nil); info["limits"] != true {
		t.Fatalf("SQLite keeps limits, but info says %v", info["limits"])
	}
	d.must(200, "", "PUT", "/v1/limits/gpu/pool", map[string]any{"capacity": 2})
	d.must(200, "", "PUT", "/v1/limits/idle", map[string]any{"capacity": 3})
	d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "train/a", "holder": "train-a", "ttl_ms": 3600000,
		"limits": []string{"gpu/pool"}})
	ctx := browser(t, 1280, 900)

	const rows = `[...document.querySelectorAll('main tbody tr')].map((tr) => [...tr.cells].map((c) => c.innerText))`
	do(t, ctx, chromedp.Navigate(d.url+"/"), chromedp.WaitVisible(chromedp.CSS("#nav")),
		click(`#nav a[href="#/limits"]`), hasText("main h1", "Limits"),
		until(`((r) => r.length === 2 && r[0][0] === 'gpu/pool' && r[0][1] === '1 / 2' && r[0][2].includes('train-a') && r[0][2].includes('slot 0,') && r[0][3] === '0'`+
			` && r[1][0] === 'idle' && r[1][1] === '0 / 3' && r[1][2] === 'nobody' && r[1][3] === '0')(`+rows+`)`),
		until(`document.querySelector('main tbody tr:first-child a[href="#/locks/train%2Fa"]').innerText === 'train-a'`),
		until(`document.querySelector('#nav a[href="#/limits"]').getAttribute('aria-current') === 'page'`))
	shot(t, ctx, "limits")

	// Two shared holders of one key, an exclusive request waiting for them, and a shared one
	// waiting behind it (it may not overtake the exclusive one).
	for _, who := range []string{"reader-1", "reader-2"} {
		d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "data/shared", "holder": who, "shared": true, "ttl_ms": 3600000})
	}
	do(t, ctx, page("#/resources/data%2Fshared", "Resource data/shared"),
		until(`((li) => li.length === 2 && li[0].innerText.includes('reader-1') && li[1].innerText.includes('reader-2')`+
			` && li.every((x) => x.querySelector('.badge.shared') && x.innerText.endsWith('shared')))([...document.querySelectorAll('main dl .holders li')])`),
		until(`![...document.querySelectorAll('main dl dt')].some((dt) => dt.innerText === 'Holder')`))
	waitingAcquire(t, d, map[string]any{"key": "data/shared", "holder": "writer-1", "ttl_ms": 3600000, "wait_ms": 30000})
	do(t, ctx, rowsAre([][]string{{"1", "lock", "writer-1"}}))
	waitingAcquire(t, d, map[string]any{"key": "data/shared", "holder": "reader-3", "shared": true, "ttl_ms": 3600000, "wait_ms": 30000})
	do(t, ctx, rowsAre([][]string{{"1", "lock", "writer-1"}, {"2", "lock", "reader-3"}}),
		until(`((rows) => rows[0][6] === '' && rows[1][6] === 'shared')(`+lineRows+`)`),
		until(`document.querySelector('main .line tbody tr:nth-child(2) .badge.shared') && !document.querySelector('main .line tbody tr:first-child .badge.shared')`))
	shot(t, ctx, "resource-shared")

	// A job beyond one key: its page shows its mode, the resources it holds too and its limits
	// (the kind's template filled from its args), and the jobs list marks them after its resource.
	d.must(200, "", "PUT", "/v1/limits/zone/eu", map[string]any{"capacity": 1})
	d.must(200, "", "PUT", "/v1/kinds/drain", map[string]any{"mode": "shared", "limits": []string{"zone/{args.zone}"}})
	job := d.must(201, "", "POST", "/v1/jobs", map[string]any{"kind": "drain", "resource": "node/7", "args": map[string]any{"zone": "eu"},
		"resources": []string{"rack/3"}, "limits": []string{"gpu/pool"}})
	id := fmt.Sprint(int64(job["id"].(float64)))
	const fields = `Object.fromEntries([...document.querySelectorAll('main dl dt')].map((dt) => [dt.innerText, dt.nextElementSibling]))`
	do(t, ctx, page("#/jobs/"+id, "Job "+id),
		until(`((f) => f['Mode'] && f['Mode'].querySelector('.badge.shared') && f['Also holds'].querySelector('a[href="#/resources/rack%2F3"]')`+
			` && f['Limits'].innerText === 'gpu/pool, zone/eu')(`+fields+`)`))
	shot(t, ctx, "job-limits")
	do(t, ctx, page("#/jobs?kind=drain", "Jobs"),
		until(`((tr) => tr && tr.querySelector('.badge.shared') && tr.cells[2].innerText.includes('(+1 more; limits gpu/pool, zone/eu)'))`+
			`(document.querySelector('main tbody tr a[href="#/jobs/`+id+`"]')?.closest('tr'))`),
		page("#/kinds", "Kinds"), hasText("main", "limits zone/{args.zone}"))
}
