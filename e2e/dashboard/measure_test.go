package dashboard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestMeasureFirstPage measures (and does not assert) what the dashboard's budget limits: bytes
// transferred for a first page and the time to its first render, on loopback, with 10,000
// leases and 100,000 jobs in a SQLite store, each load in a fresh browser context (empty
// cache). It runs only with BATON_DASHBOARD_MEASURE=1 (see docs/benchmarks.md), against a
// baton binary built without -race.
func TestMeasureFirstPage(t *testing.T) {
	if os.Getenv("BATON_DASHBOARD_MEASURE") == "" {
		t.Skip("set BATON_DASHBOARD_MEASURE=1 to measure the dashboard's first page")
	}
	needChromium(t)
	bin := filepath.Join(t.TempDir(), "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building baton: %v\n%s", err, out)
	}
	raced := binary
	binary = bin
	defer func() { binary = raced }()
	d := startServer(t, false)

	const leases, jobs, batch = 10000, 100000, 10000
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < leases; i += 8 {
				d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": fmt.Sprintf("fleet/node-%05d", i),
					"holder": fmt.Sprintf("agent-%d", i%97), "ttl_ms": 3600000, "metadata": map[string]any{"rack": i % 40}})
			}
		})
	}
	wg.Wait()
	d.must(200, "", "PUT", "/v1/kinds/provision", map[string]any{"max_attempts": 3})
	for b := range jobs / batch {
		list := make([]map[string]any, batch)
		for i := range list {
			n := b*batch + i
			list[i] = map[string]any{"kind": "provision", "resource": fmt.Sprintf("cluster/%04d", n%5000), "args": map[string]any{"n": n}}
		}
		d.must(201, "", "POST", "/v1/jobs/batch", map[string]any{"jobs": list})
	}

	t.Logf("seeded %d leases and %d jobs in %v", leases, jobs, time.Since(start).Round(time.Second))

	ctx := browser(t, 1280, 900)
	// The same run's floor: a fresh context loading a plain-text page of the same server.
	var floor []float64
	for range 5 {
		tctx, cancel := tab(t, ctx, true)
		do(t, tctx, chromedp.Navigate(d.url+"/healthz"))
		floor = append(floor, eval[float64](t, tctx, `performance.getEntriesByType('navigation')[0].loadEventEnd`))
		cancel()
	}
	slices.Sort(floor)
	t.Logf("%-12s load median %.0f ms (min %.0f, max %.0f, 5 loads)", "/healthz", floor[2], floor[0], floor[4])
	for _, route := range []string{"#/locks", "#/jobs", "#/resources", "#/dlq"} {
		var ms, assetsReady, dataReady, counts []float64
		var assets, data int
		for range 5 {
			tctx, cancel := tab(t, ctx, true)
			wait := `document.documentElement.dataset.rendered === '1'`
			if route == "#/jobs" {
				wait += ` && document.documentElement.dataset.marked === '1'`
			}
			do(t, tctx, chromedp.Navigate(d.url+"/"+route), until(wait))
			m := eval[map[string]float64](t, tctx, `(() => {
				const nav = performance.getEntriesByType('navigation')[0];
				let assets = nav.transferSize, data = 0, assetsEnd = nav.responseEnd, dataEnd = 0;
				for (const r of performance.getEntriesByType('resource')) {
					if (r.name.includes('/v1/')) { data += r.transferSize; dataEnd = Math.max(dataEnd, r.responseEnd); }
					else { assets += r.transferSize; assetsEnd = Math.max(assetsEnd, r.responseEnd); }
				}
				const counts = performance.getEntriesByName('baton-counts')[0];
				return {render: performance.getEntriesByName('baton-first-render')[0].startTime, assets, data, assetsEnd, dataEnd,
					counts: counts ? counts.startTime : 0};
			})()`)
			cancel()
			ms = append(ms, m["render"])
			assetsReady = append(assetsReady, m["assetsEnd"])
			dataReady = append(dataReady, m["dataEnd"])
			counts = append(counts, m["counts"])
			assets, data = int(m["assets"]), int(m["data"])
		}
		for _, s := range [][]float64{ms, assetsReady, dataReady, counts} {
			slices.Sort(s)
		}
		t.Logf("%-12s first render median %.0f ms (min %.0f, max %.0f, 5 loads; %.1fx the floor); assets in by %.0f ms, API answers by %.0f ms (medians); transferred %d B assets + %d B API = %.1f KB",
			route, ms[2], ms[0], ms[4], ms[2]/floor[2], assetsReady[2], dataReady[2], assets, data, float64(assets+data)/1000)
		if counts[2] > 0 {
			t.Logf("%-12s job counts drawn by %.0f ms (median)", route, counts[2])
		}
	}
}
