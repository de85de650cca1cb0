package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// waitingAcquire sends a waiting acquire (body, with wait_ms) from a goroutine: while the key is
// held, its refused attempt puts a ticket in the key's line, kept (for its TTL) after a wait that
// runs out. The returned stop (also run at cleanup) ends the request, which takes the ticket out
// of the line, and waits for it.
func waitingAcquire(t *testing.T, d *daemon, body map[string]any) func() {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	status := 0
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url+"/v1/locks/acquire", bytes.NewReader(b))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			status = res.StatusCode
			res.Body.Close()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			if status == http.StatusOK {
				t.Logf("the waiting acquire of %s was granted", b)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// lineRows is the line table's rows, each as its cells' text.
const lineRows = `[...document.querySelectorAll('main .line tbody tr')].map((tr) => [...tr.cells].map((c) => c.innerText))`

// rowsAre waits until the line table's rows start with the cells of want, row by row, in order.
func rowsAre(want [][]string) chromedp.Action[chromedp.Void] {
	return until(`((rows, want) => rows.length === want.length && want.every((w, i) => w.every((c, j) => rows[i][j] === c)))(` +
		lineRows + `, ` + js(want) + `)`)
}

// reason is the text of the reason of code in main's explanation, empty if there is none.
func reason(code string) string {
	return `(document.querySelector('main .why li[data-code="` + code + `"]') || {innerText: ''}).innerText`
}

// TestDashboardExplainAndLine: a waiting job's page says why it does not run (the running job
// that holds its resource; a later schedule) and stops saying so once it runs; a resource's page
// shows its holder, rest, why a new request would wait, and its line in order: jobs and waiting
// lock requests by arrival, a break-glass request first. A key only locks use is reached from
// its lock's page.
func TestDashboardExplainAndLine(t *testing.T) {
	d := startServer(t, false)
	if info := d.must(200, "", "GET", "/v1/info", nil); info["line"] != true {
		t.Fatalf("SQLite keeps a line per key, but info says %v", info["line"])
	}
	d.must(200, "", "PUT", "/v1/kinds/build", map[string]any{"max_attempts": 3})
	submit := func(body map[string]any) int64 {
		return num(d.must(201, "", "POST", "/v1/jobs", body)["id"])
	}
	running := submit(map[string]any{"kind": "build", "resource": "repo/web"})
	// An hour's lease, so that the attempt still holds repo/web when it completes on a slow machine.
	c := d.must(200, "", "POST", "/v1/jobs/claim", map[string]any{"worker": "runner-1", "kinds": []string{"build"}, "ttl_ms": 3600000})["jobs"].([]any)[0].(map[string]any)
	if num(c["id"]) != running {
		t.Fatalf("claimed job %v, want %d", c["id"], running)
	}
	queued := submit(map[string]any{"kind": "build", "resource": "repo/web"})
	later := submit(map[string]any{"kind": "build", "resource": "repo/later", "delay_ms": 3600000})
	ctx := browser(t, 1280, 900)

	// The queued job waits for the running one, which holds repo/web; the link goes to it.
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/#/jobs/%d", d.url, later)), hasText("main h1", fmt.Sprintf("Job %d", later)),
		hasText("main .why", "Why isn't this running?"), until(reason("scheduled")+`.includes('scheduled for ')`))
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", running), fmt.Sprintf("Job %d", running)), hasText("main", "runner-1", "running"))
	if eval[bool](t, ctx, `!!document.querySelector('main .why')`) {
		t.Errorf("the running job %d's page explains why it does not run: %s", running, eval[string](t, ctx, `document.querySelector('main .why').innerText`))
	}
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", queued), fmt.Sprintf("Job %d", queued)),
		until(reason("held")+`.includes(`+js(fmt.Sprintf("job:%d", running))+`)`),
		until(fmt.Sprintf(`document.querySelector('main .why li[data-code="held"] a[href="#/jobs/%d"]')`, running)))
	shot(t, ctx, "job-explain")

	// A lock request waits behind the queued job (it arrived after it), and a job submitted
	// after the lock request waits behind both.
	waitingAcquire(t, d, map[string]any{"key": "repo/web", "holder": "ops-bob", "ttl_ms": 3600000, "wait_ms": 30000})
	do(t, ctx, page("#/resources/repo%2Fweb", "Resource repo/web"),
		rowsAre([][]string{{"1", "job", fmt.Sprintf("job %d build", queued)}, {"2", "lock", "ops-bob"}}))
	last := submit(map[string]any{"kind": "build", "resource": "repo/web"})
	do(t, ctx, rowsAre([][]string{{"1", "job", fmt.Sprintf("job %d build", queued)}, {"2", "lock", "ops-bob"},
		{"3", "job", fmt.Sprintf("job %d build", last)}}),
		hasText("main .line h2", "Line (3 waiting"),
		// A lock ticket expires unless its waiter keeps waiting; ready jobs have no not-before.
		until(`((rows) => rows[1][4].startsWith('expires ') && rows[0][4] === '' && rows[2][4] === '' && rows.every((r) => r[5] === ''))(`+lineRows+`)`),
		until(fmt.Sprintf(`document.querySelector('main .line tbody tr:first-child a[href="#/jobs/%d"]')`, queued)),
		// The holder is the running job's attempt; a new request waits for it and behind three.
		until(fmt.Sprintf(`document.querySelector('main dl .holder a[href="#/jobs/%d"]')`, running)),
		until(reason("held")+`.includes(`+js(fmt.Sprintf("job:%d", running))+`)`),
		until(reason("ahead")+`.startsWith('ahead 3 ahead in the line')`),
		hasText("main dl", "Rest", "none"))
	shot(t, ctx, "resource-line")

	// The running job ends and the queued one is claimed: its page stops explaining (the page
	// refreshes by itself).
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", queued), fmt.Sprintf("Job %d", queued)), until(reason("held")+` !== ''`))
	d.must(200, "", "POST", fmt.Sprintf("/v1/jobs/%d/complete", running), map[string]any{"token": c["token"]})
	claim(d, "", "runner-2", "build", queued)
	do(t, ctx, until(`!document.querySelector('main .why') && document.querySelector('main .badge.s-running')`), hasText("main", "runner-2"))

	// A key only locks use: its lock's page links its line, where a break-glass request is
	// first, before a request that arrived earlier.
	lease := d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "locks/db", "holder": "ci-1", "ttl_ms": 3600000})["lease"].(map[string]any)
	waitingAcquire(t, d, map[string]any{"key": "locks/db", "holder": "ops-bob", "ttl_ms": 3600000, "wait_ms": 30000})
	do(t, ctx, page("#/locks/locks%2Fdb", "Lock locks/db"), hasText("main", "ci-1"),
		click(`main a[href="#/resources/locks%2Fdb"]`), hasText("main h1", "Resource locks/db"),
		rowsAre([][]string{{"1", "lock", "ops-bob"}}))
	waitingAcquire(t, d, map[string]any{"key": "locks/db", "holder": "oncall", "ttl_ms": 3600000, "wait_ms": 30000,
		"first": true, "first_reason": "incident 42"})
	do(t, ctx, rowsAre([][]string{{"1", "lock", "oncall"}, {"2", "lock", "ops-bob"}}),
		until(`((rows) => rows[0][5] === 'first incident 42' && rows[1][5] === '')(`+lineRows+`)`),
		until(`document.querySelector('main .line tbody tr:first-child .badge.first')`),
		until(`!document.querySelector('main .line tbody tr:nth-child(2) .badge.first')`),
		until(`document.querySelector('main dl .holder a[href="#/locks/locks%2Fdb"]').innerText === 'ci-1'`),
		hasText("main dl .holder", fmt.Sprintf("(token %d)", num(lease["token"]))),
		until(reason("held")+`.includes('ci-1')`), until(reason("ahead")+`.includes('2 ahead')`))
	shot(t, ctx, "resource-line-lock")

	// A key that rests after a clean release with a cooldown: nobody holds it, nobody waits,
	// and a new request would wait until the rest ends.
	rested := d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "locks/rested", "holder": "ci-2", "cooldown_ms": 3600000})["lease"].(map[string]any)
	d.must(200, "", "POST", "/v1/locks/release", map[string]any{"key": "locks/rested", "lease_id": rested["lease_id"]})
	do(t, ctx, page("#/resources/locks%2Frested", "Resource locks/rested"), hasText("main dl", "Holder", "nobody"),
		hasText("main dl .rest", "resting until ", "(cooldown)", "in 59 min"),
		until(reason("resting")+`.includes('(cooldown)')`),
		until(`!document.querySelector('main .why li[data-code="held"]') && !document.querySelector('main .why li[data-code="ahead"]')`),
		hasText("main .line", "Line (0 waiting", "Nobody waits for locks/rested."))
}
