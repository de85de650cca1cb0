package dashboard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardPeriodic: the Periodic page lists the server's --periodic-file with each job's
// next run and a countdown to it, and links the kind's jobs and the resource.
func TestDashboardPeriodic(t *testing.T) {
	needChromium(t)
	file := filepath.Join(t.TempDir(), "periodic.json")
	if err := os.WriteFile(file, []byte(`{"periodic": [{"name": "reconcile-web", "schedule": "@every 1h",
		"kind": "status.reconcile", "resource": "app/web", "policy": "skip", "priority": 3}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startServing(t, "", false, "--periodic-file", file)
	if next := d.must(200, "", "GET", "/v1/periodic", nil)["periodic"].([]any)[0].(map[string]any)["next_run"].(string); next[14:19] != "00:00" {
		t.Fatalf("next_run %s: an @every 1h job runs on the hour", next)
	}
	ctx := browser(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(d.url+"/#/periodic"), hasText("main h1", "Periodic"),
		until(`!document.querySelector('#nav a[data-page=periodic]').hidden`))
	row := `document.querySelector('main tbody tr')`
	do(t, ctx, until(row+` && `+row+`.cells.length === 7`))
	cells := eval[[]string](t, ctx, `[...`+row+`.cells].map((c) => c.innerText)`)
	want := []string{"reconcile-web", "@every 1h", "status.reconcile", "app/web", "skip", "3"}
	for i, w := range want {
		if cells[i] != w {
			t.Errorf("periodic row cell %d: %q, want %q (row %q)", i, cells[i], w, cells)
		}
	}
	// The next run is on the hour, as the API gives it (not compared with an earlier read: an
	// hour may have turned in between), with a countdown of under an hour.
	do(t, ctx, until(`/^\d{4}-\d\d-\d\d \d\d:00:00/.test(`+row+`.cells[6].innerText)`),
		until(`/^in \d+ (min|s)/.test(`+row+`.cells[6].querySelector('.ttl').textContent)`),
		until(row+`.cells[2].querySelector('a[href="#/jobs?kind=status.reconcile"]')`),
		until(row+`.cells[3].querySelector('a[href="#/resources/app%2Fweb"]')`))
	shot(t, ctx, "periodic")
}
