package dashboard

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton/internal/testredis"
)

// TestDashboardNoAuditLog: on a store without an audit log (Redis: leases only) the dashboard
// offers no Events page and no lock history, rather than pages that fail with a 501; and no job
// pages, since the store has no job queue.
func TestDashboardNoAuditLog(t *testing.T) {
	needChromium(t)
	d := startServerOn(t, "redis://"+testredis.Start(t)+"/0?baton_allow_volatile=true")
	d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "locks/alpha", "holder": "ci-7", "ttl_ms": 3600000})
	if info := d.must(200, "", "GET", "/v1/info", nil); info["audit"] != false || info["jobs"] != false {
		t.Fatalf("GET /v1/info on Redis: %v", info)
	}
	ctx := browser(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(d.url+"/"), hasText("main", "locks/alpha"), hasText("#who", "anonymous (admin)"),
		until(`document.querySelector('#nav a[data-page=events]').hidden`),
		until(`document.querySelector('#nav a[data-page=jobs]').hidden`),
		until(`document.querySelector('#nav a[data-page=periodic]').hidden`),
		until(`!document.querySelector('#nav a[data-page=locks]').hidden`))
	do(t, ctx, page("#/locks/locks%2Falpha", "Lock locks/alpha"), hasText("main", "ci-7", "Force-release"))
	if n := eval[int](t, ctx, `document.querySelectorAll('main h2, main table').length`); n != 0 {
		t.Errorf("the lock page on a store without an audit log shows %d history headings or tables", n)
	}
	// Redis keeps no line per key: no link to a resource page with one.
	if n := eval[int](t, ctx, `document.querySelectorAll('main a[href^="#/resources/"]').length`); n != 0 {
		t.Errorf("the lock page on a store without a line links %d resource pages", n)
	}
	shot(t, ctx, "no-audit-lock")
	do(t, ctx, page("#/events", "Events"), hasText("main", "keeps no audit log"))
	if n := eval[int](t, ctx, `document.querySelectorAll('main table').length`); n != 0 {
		t.Errorf("the events page on a store without an audit log shows %d tables", n)
	}
}
