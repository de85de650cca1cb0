package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

func jobState(d *daemon, token string, id int64) string {
	return d.must(200, token, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil)["state"].(string)
}

// confirm fills the open dialog (a reason if it asks for one) and confirms it.
func confirm(reason string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS("dialog[open] .confirm"))}
	if reason != "" {
		steps = append(steps, chromedp.SendKeys(chromedp.CSS("dialog[open] textarea"), reason))
	}
	return chromedp.Steps(append(steps, click("dialog[open] .confirm"),
		chromedp.WaitNotPresent(chromedp.CSS("dialog")))...)
}

// TestDashboardAdmin walks every page as an admin and clicks every action, checking the store
// through the API after each.
func TestDashboardAdmin(t *testing.T) {
	d := startServer(t, true)
	s := seed(d, adminToken)
	// Two more dead letters, for the dead-letter page's buttons of one job.
	deadQA, deadDev := deadLetter(d, adminToken, "env/qa"), deadLetter(d, adminToken, "env/dev")
	ctx := browser(t, 1280, 900)

	// Signed out: the sign-in form, and a request from the page without a token is refused.
	do(t, ctx, chromedp.Navigate(d.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shot(t, ctx, "signin")
	forged := eval[int](t, ctx, `fetch('v1/locks/force-release', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({key: 'locks/alpha', reason: 'forged'})}).then((r) => r.status)`)
	if forged != http.StatusUnauthorized {
		t.Fatalf("force-release without a token from the page: status %d, want 401", forged)
	}
	d.must(200, adminToken, "GET", "/v1/locks/locks/alpha", nil)

	// Locks: every live lease with its holder, token, metadata and a live countdown.
	do(t, ctx, signIn(d.url, adminToken),
		hasText("main", "locks/alpha", "locks/beta", "other/gamma", "ci-7", fmt.Sprint(s.alphaToken), `{"pipeline":"1234"}`, "in 59 min"),
		hasText("#who", "admin (admin)"))
	first := eval[string](t, ctx, `document.querySelector('.ttl').textContent`)
	do(t, ctx, until(`document.querySelector('.ttl').textContent !== `+js(first)))
	shot(t, ctx, "locks")

	// Filters by prefix (through the form) and by holder.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("input[name=prefix]"), "locks/"), click("form.filters button[type=submit]"),
		lacks("locks/beta", "other/gamma"),
		page("#/locks?holder=ci-7", "Locks"), lacks("other/gamma", "locks/beta"))

	// A lock's page: its lease and audit history; force-release asks for a reason and
	// confirmation (Escape backs out), then ends the lease with the reason in the audit log.
	do(t, ctx, page("#/locks/locks%2Falpha", "Lock locks/alpha"), hasText("main", "Audit history", "acquire", "ci-7", "Newest first"))
	shot(t, ctx, "lock")
	do(t, ctx, chromedp.Focus(chromedp.CSS("main .actions button.act")), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS("dialog[open] textarea")), chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(chromedp.CSS("dialog")))
	d.must(200, adminToken, "GET", "/v1/locks/locks/alpha", nil)
	do(t, ctx, click("main .actions button.act"), confirm("stuck after deploy"),
		hasText("#toast", "Released locks/alpha"), hasText("main", "No live lease on this key", "force_release", "stuck after deploy"))
	d.must(404, adminToken, "GET", "/v1/locks/locks/alpha", nil)
	evs := d.must(200, adminToken, "GET", "/v1/events?key=locks/alpha", nil)["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["kind"] != "force_release" || last["reason"] != "stuck after deploy" || last["actor"] != "admin" {
		t.Fatalf("last event of locks/alpha: %v", last)
	}
	// The history is newest first, with a link to show it oldest first.
	checkOrder(t, ctx, d, "key=locks/alpha", true)
	do(t, ctx, click("a.order-toggle"), hasText("p.order", "Oldest first"),
		until(`location.hash === '#/locks/locks%2Falpha?order=asc'`))
	checkOrder(t, ctx, d, "key=locks/alpha", false)
	shot(t, ctx, "lock-released")

	// Jobs: counts per kind and state, the list, cancel (confirmed) and retry.
	do(t, ctx, page("#/jobs", "Jobs"),
		until(`(document.querySelector('a[href="#/jobs?kind=build&state=available"]') || {}).textContent === '2'`),
		until(`(document.querySelector('a[href="#/jobs?kind=build&state=running"]') || {}).textContent === '1'`),
		hasText("main", "repo/api", "env/prod", "discarded", "runner-2"))
	shot(t, ctx, "jobs")
	do(t, ctx, click(fmt.Sprintf(`button[data-fk="lc%d"]`, s.waiting)), confirm(""),
		hasText("#toast", fmt.Sprintf("Job %d: cancel sent", s.waiting)))
	if st := jobState(d, adminToken, s.waiting); st != "cancelled" {
		t.Fatalf("job %d after cancel: %s", s.waiting, st)
	}
	do(t, ctx, click(fmt.Sprintf(`button[data-fk="lr%d"]`, s.waiting)),
		hasText("#toast", fmt.Sprintf("Job %d retried", s.waiting)))
	if st := jobState(d, adminToken, s.waiting); st != "available" {
		t.Fatalf("job %d after retry: %s", s.waiting, st)
	}
	do(t, ctx, page("#/jobs?state=discarded", "Jobs"), lacks("env/prod", "repo/api"))

	// A job's page: args, attempts, errors, worker, fencing token; retry from there.
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", s.dead), fmt.Sprintf("Job %d", s.dead)),
		hasText("main", "cluster unreachable", "runner-1", `"env": "env/prod"`, "1 of 1", "Fencing token", "handler_error"))
	shot(t, ctx, "job")
	do(t, ctx, click(fmt.Sprintf(`button[data-fk="dr%d"]`, s.dead)),
		hasText("#toast", fmt.Sprintf("Job %d retried", s.dead)))
	if st := jobState(d, adminToken, s.dead); st != "available" {
		t.Fatalf("job %d after retry: %s", s.dead, st)
	}

	// Dead letters: one retried, one purged after confirmation, then the one left by the
	// purge of them all.
	do(t, ctx, page("#/dlq", "Dead letters"), hasText("main", "env/stage", "env/qa", "env/dev", "cluster unreachable"), lacks("env/stage", "env/prod"))
	shot(t, ctx, "dlq")
	do(t, ctx, click(fmt.Sprintf(`button[data-fk="lr%d"]`, deadQA)),
		hasText("#toast", fmt.Sprintf("Job %d retried", deadQA)), lacks("env/stage", "env/qa"))
	if st := jobState(d, adminToken, deadQA); st != "available" {
		t.Fatalf("dead letter %d after its retry: %s", deadQA, st)
	}
	do(t, ctx, click(fmt.Sprintf(`button[data-fk="p%d"]`, deadDev)), confirm(""),
		hasText("#toast", fmt.Sprintf("Purged job %d", deadDev)), lacks("env/stage", "env/dev"))
	d.must(404, adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", deadDev), nil)
	d.must(200, adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", s.deadStage), nil)
	do(t, ctx, click("button.purge-all"), confirm(""), hasText("#toast", "Purged every dead letter"),
		hasText("main", "No jobs."))
	if dl := d.must(200, adminToken, "GET", "/v1/jobs?state=discarded", nil)["jobs"].([]any); len(dl) != 0 {
		t.Fatalf("dead letters after purge: %v", dl)
	}
	d.must(404, adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", s.deadStage), nil)

	// Resources: state, version, the running job and the queue waiting on it; a resource that
	// cools down says until when and after which job, and an admin may clear that.
	cool := d.must(200, adminToken, "GET", "/v1/resources/node/7", nil)["cooldown"].(map[string]any)
	until7, err := time.Parse(time.RFC3339Nano, cool["until"].(string))
	if err != nil {
		t.Fatal(err)
	}
	coolText := fmt.Sprintf("cooling down until %s (job %d)", until7.UTC().Format("2006-01-02 15:04:05Z"), s.cooled)
	do(t, ctx, page("#/resources", "Resources"), hasText("main", "repo/api", "env/prod", "FAILED", coolText),
		until(`document.querySelectorAll('main button.clear-cooldown').length === 1`),
		until(`document.querySelector('button.clear-cooldown').dataset.fk === 'cc:node/7'`))
	shot(t, ctx, "resources")
	do(t, ctx, page("#/resources/repo%2Fapi", "Resource repo/api"),
		until(fmt.Sprintf(`document.querySelector('dl a[href="#/jobs/%d"]')`, s.running)),
		until(fmt.Sprintf(`document.querySelector('table a[href="#/jobs/%d"]')`, s.waiting)),
		hasText("main", "Waiting jobs"))
	if n := eval[int](t, ctx, `document.querySelectorAll('button.clear-cooldown').length`); n != 0 {
		t.Errorf("a clear-cooldown button on a resource that does not cool down: %d", n)
	}
	shot(t, ctx, "resource")
	do(t, ctx, page("#/resources/node%2F7", "Resource node/7"), hasText("main", coolText, "skipped"),
		until(fmt.Sprintf(`document.querySelector('dl a[href="#/jobs/%d"]')`, s.cooled)))
	shot(t, ctx, "resource-cooldown")
	do(t, ctx, click("button.clear-cooldown"), chromedp.WaitVisible(chromedp.CSS("dialog[open] textarea")),
		chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS("dialog")))
	if _, ok := d.must(200, adminToken, "GET", "/v1/resources/node/7", nil)["cooldown"]; !ok {
		t.Fatal("node/7's cooldown ended when the dialog was backed out of")
	}
	do(t, ctx, click("button.clear-cooldown"), confirm("node checked by hand"),
		hasText("#toast", "Cleared the cooldown of node/7"), lacks("Unfinished jobs", "cooling down"))
	if c, ok := d.must(200, adminToken, "GET", "/v1/resources/node/7", nil)["cooldown"]; ok {
		t.Fatalf("node/7 after clear-cooldown still cools down: %v", c)
	}
	evs = d.must(200, adminToken, "GET", "/v1/events?key=node/7&order=desc&limit=1", nil)["events"].([]any)
	if e := evs[0].(map[string]any); e["kind"] != "resource_cooldown_cleared" || e["reason"] != "node checked by hand" || e["actor"] != "admin" {
		t.Fatalf("last event of node/7: %v", e)
	}

	// Kinds: policy, cooldowns and guard (the resource cooldown is the seventh column, after the rate).
	do(t, ctx, page("#/kinds", "Kinds"), hasText("main", "deploy", "reject", "from (unset) | READY; running → DEPLOYING; success → READY; failure → FAILED",
		"Resource cooldown", "remediate"),
		until(`[...document.querySelectorAll('main tbody tr')].some((tr) => tr.cells[0].innerText === 'remediate' && tr.cells[6].innerText === '60 min')`),
		until(`[...document.querySelectorAll('main tbody tr')].some((tr) => tr.cells[0].innerText === 'deploy' && tr.cells[6].innerText === 'none')`))
	shot(t, ctx, "kinds")

	// Periodic: this server has no --periodic-file.
	do(t, ctx, page("#/periodic", "Periodic"), hasText("main", "No periodic jobs."))

	// Events: the audit log, newest first, with the lease events, the force-release, the job
	// attempts (their job and outcome) and the cleared cooldown.
	do(t, ctx, page("#/events", "Events"), hasText("main", "force_release", "stuck after deploy", "other/gamma",
		"job_claim", "job_complete", "node checked by hand", "with its outcome"))
	checkOrder(t, ctx, d, "", true)
	shot(t, ctx, "events")
	rows := `[...document.querySelectorAll('main tbody tr')]`
	for what, cond := range map[string]string{
		"the dead letter's last attempt, with its job and outcome": fmt.Sprintf(`%s.some((tr) => tr.cells[2].innerText === 'job_complete'
			&& tr.cells[6].querySelector('a[href="#/jobs/%d"]') && tr.cells[6].innerText === '%d#1 deploy' && tr.cells[7].innerText === 'discarded')`, rows, s.dead, s.dead),
		"the remediation's success": fmt.Sprintf(`%s.some((tr) => tr.cells[2].innerText === 'job_complete'
			&& tr.cells[6].querySelector('a[href="#/jobs/%d"]') && tr.cells[7].innerText === 'succeeded')`, rows, s.cooled),
		"job events' keys link their resource, never a lock": rows + `.filter((tr) => tr.cells[2].innerText.startsWith('job_')).every((tr) =>
			tr.cells[3].querySelector('a[href^="#/resources/"]') && !tr.cells[3].querySelector('a[href^="#/locks/"]'))`,
		"the cleared cooldown's key links its resource, and its job is the one that started it": fmt.Sprintf(`%s.some((tr) =>
			tr.cells[2].innerText === 'resource_cooldown_cleared' && tr.cells[3].querySelector('a[href="#/resources/node%%2F7"]')
			&& tr.cells[6].querySelector('a[href="#/jobs/%d"]') && tr.cells[5].innerText === '')`, rows, s.cooled),
		"lease events' keys link their lock": rows + `.filter((tr) => ['acquire', 'force_release'].includes(tr.cells[2].innerText)).every((tr) =>
			tr.cells[3].querySelector('a[href^="#/locks/"]') && tr.cells[6].innerText === '' && tr.cells[7].innerText === '')`,
	} {
		if !eval[bool](t, ctx, cond) {
			t.Errorf("events page: not so: %s", what)
		}
	}
	do(t, ctx, click("a.order-toggle"), until(`location.hash === '#/events?order=asc'`), hasText("p.order", "Oldest first"))
	checkOrder(t, ctx, d, "", false)
	// The key filter keeps the order.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("input[name=key]"), "locks/beta"), click("form.filters button[type=submit]"),
		until(`location.hash === '#/events?order=asc&key=locks%2Fbeta'`), lacks("locks/beta", "other/gamma", "stuck after deploy"))
	do(t, ctx, page("#/events?key=locks/beta", "Events"), lacks("locks/beta", "other/gamma", "stuck after deploy"))

	// The skip link moves the focus to the content and leaves the route alone.
	if !eval[bool](t, ctx, `(() => { const h = location.hash; document.querySelector('.skip').click();
		return location.hash === h && document.activeElement.id === 'main'; })()`) {
		t.Fatal("the skip link did not focus the content, or changed the route")
	}
}

// eventIDs is the IDs of the events shown in main's table, top to bottom.
const eventIDs = `[...document.querySelectorAll('main tbody tr')].map((tr) => Number(tr.cells[0].innerText))`

// checkOrder waits until the events table shows the first page of the audit log (filtered by
// query) in the API's order, newest first if newest, and checks that it does.
func checkOrder(t *testing.T, ctx context.Context, d *daemon, query string, newest bool) {
	t.Helper()
	order := "asc"
	if newest {
		order = "desc"
	}
	evs := d.must(200, adminToken, "GET", "/v1/events?limit=50&order="+order+"&"+query, nil)["events"].([]any)
	var want []int64
	for _, e := range evs {
		want = append(want, num(e.(map[string]any)["id"]))
	}
	if len(want) < 2 || (want[0] > want[1]) != newest {
		t.Fatalf("the API's events in order %s: %v", order, want)
	}
	do(t, ctx, until(`JSON.stringify(`+eventIDs+`) === `+js(js(want))))
}

// buttons counts the action buttons shown in main.
const buttons = `document.querySelectorAll('main button.act').length`

// TestDashboardRoles: a read-only token sees no buttons and its writes are refused; a write
// token gets cancel and retry but not force-release or purge.
func TestDashboardRoles(t *testing.T) {
	d := startServer(t, true)
	s := seed(d, adminToken)
	ctx := browser(t, 1280, 900)

	do(t, ctx, signIn(d.url, readerToken), hasText("main", "locks/alpha"), hasText("#who", "reader (read)"),
		until(`document.querySelector('#nav a[data-page=events]').hidden`))
	pages := []struct{ route, heading, text string }{
		{"#/locks", "Locks", "locks/alpha"},
		{"#/locks/locks%2Falpha", "Lock locks/alpha", "The audit log needs a token with the admin role."},
		{"#/jobs", "Jobs", "repo/api"},
		{fmt.Sprintf("#/jobs/%d", s.dead), "Job", "cluster unreachable"},
		{fmt.Sprintf("#/jobs/%d", s.waiting), "Job", "repo/api"},
		{"#/dlq", "Dead letters", "env/stage"},
		{"#/resources/repo%2Fapi", "Resource repo/api", "Waiting jobs"},
		{"#/resources", "Resources", "cooling down until"},
		{"#/resources/node%2F7", "Resource node/7", "cooling down until"},
		{"#/events", "Events", "The audit log needs a token with the admin role."},
	}
	for _, p := range pages {
		do(t, ctx, page(p.route, p.heading), hasText("main", p.text))
		if n := eval[int](t, ctx, buttons); n != 0 {
			t.Errorf("read-only token: %d action buttons on %s", n, p.route)
		}
	}
	// The page's own token is refused for a write.
	status := eval[int](t, ctx, fmt.Sprintf(`fetch('v1/jobs/%d/cancel', {method: 'POST',
		headers: {Authorization: 'Bearer ' + sessionStorage.getItem('baton.token')}}).then((r) => r.status)`, s.waiting))
	if status != http.StatusForbidden {
		t.Fatalf("cancel with the read-only token: status %d, want 403", status)
	}
	if st := jobState(d, adminToken, s.waiting); st != "available" {
		t.Fatalf("job %d after a refused cancel: %s", s.waiting, st)
	}

	// A write token, in a new tab (signed out: session storage is per tab).
	w, _ := tab(t, ctx, false)
	do(t, w, signIn(d.url, writeToken), hasText("main", "locks/alpha"))
	if n := eval[int](t, w, buttons); n != 0 {
		t.Errorf("write token: %d force-release buttons", n)
	}
	do(t, w, page("#/dlq", "Dead letters"), hasText("main", "env/stage"),
		until(fmt.Sprintf(`document.querySelector('button[data-fk="lr%d"]')`, s.deadStage)))
	if n := eval[int](t, w, `document.querySelectorAll('button.purge, button.purge-all').length`); n != 0 {
		t.Errorf("write token: %d purge buttons", n)
	}
	// Clearing a cooldown is admin-only in the API (POST /v1/resources/{key}/clear-cooldown).
	do(t, w, page("#/resources/node%2F7", "Resource node/7"), hasText("main", "cooling down until"))
	if n := eval[int](t, w, `document.querySelectorAll('button.clear-cooldown').length`); n != 0 {
		t.Errorf("write token: %d clear-cooldown buttons", n)
	}
	status = eval[int](t, w, `fetch('v1/resources/node/7/clear-cooldown', {method: 'POST', headers: {'Content-Type': 'application/json',
		Authorization: 'Bearer ' + sessionStorage.getItem('baton.token')}, body: JSON.stringify({reason: 'forged'})}).then((r) => r.status)`)
	if status != http.StatusForbidden {
		t.Fatalf("clear-cooldown with the write token: status %d, want 403", status)
	}
	if _, ok := d.must(200, adminToken, "GET", "/v1/resources/node/7", nil)["cooldown"]; !ok {
		t.Fatal("node/7 stopped cooling down after a refused clear-cooldown")
	}
}

// TestDashboardRestart: without an auth file on loopback no sign-in is needed; when the server
// goes away the page says so, and it recovers by itself when the server is back.
func TestDashboardRestart(t *testing.T) {
	d := startServer(t, false)
	seed(d, "")
	ctx := browser(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(d.url+"/"), hasText("main", "locks/alpha"), hasText("#who", "anonymous (admin)"))

	d.stop()
	do(t, ctx, until(`!document.getElementById('banner').hidden`), hasText("#banner", "Server unreachable since"),
		until(`document.querySelector('main').classList.contains('stale')`), hasText("main", "locks/alpha"))
	shot(t, ctx, "unreachable")

	d.start()
	do(t, ctx, until(`document.getElementById('banner').hidden`),
		until(`!document.querySelector('main').classList.contains('stale')`), hasText("main", "locks/alpha"))
	d.must(200, "", "POST", "/v1/locks/acquire", map[string]any{"key": "locks/after-restart", "ttl_ms": 60000})
	do(t, ctx, hasText("main", "locks/after-restart"))
}

// TestDashboardCrossOrigin: on a server without auth every caller is admin, so a page of
// another origin must not be able to change anything through the visitor's browser.
func TestDashboardCrossOrigin(t *testing.T) {
	d := startServer(t, false)
	s := seed(d, "")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><script>
fetch(%q, {method: 'POST', mode: 'no-cors'}).finally(() => { document.title = 'sent'; });
</script>`, fmt.Sprintf("%s/v1/jobs/%d/cancel", d.url, s.waiting))
	}))
	defer evil.Close()
	ctx := browser(t, 1280, 900)
	do(t, ctx, chromedp.Navigate(evil.URL), until(`document.title === 'sent'`))
	if st := jobState(d, "", s.waiting); st != "available" {
		t.Fatalf("job %d after a cross-origin cancel: %s, want available", s.waiting, st)
	}
	// The dashboard itself (same origin) may.
	do(t, ctx, chromedp.Navigate(d.url+fmt.Sprintf("/#/jobs/%d", s.waiting)), hasText("main", "repo/api"),
		click(fmt.Sprintf(`button[data-fk="dc%d"]`, s.waiting)), confirm(""), hasText("#toast", "cancel sent"))
	if st := jobState(d, "", s.waiting); st != "cancelled" {
		t.Fatalf("job %d after the dashboard's cancel: %s", s.waiting, st)
	}
}

// TestDashboardNarrow: at 390 px wide every page fits (tables scroll inside their box) and the
// navigation stays on screen.
func TestDashboardNarrow(t *testing.T) {
	d := startServer(t, false)
	s := seed(d, "")
	ctx := browser(t, 390, 844)
	do(t, ctx, chromedp.Navigate(d.url+"/"), hasText("main", "locks/alpha"))
	for _, p := range []struct{ route, heading, text, name string }{
		{"#/locks", "Locks", "locks/alpha", "narrow-locks"},
		{"#/locks/locks%2Falpha", "Lock", "Audit history", "narrow-lock"},
		{"#/jobs", "Jobs", "repo/api", "narrow-jobs"},
		{fmt.Sprintf("#/jobs/%d", s.dead), "Job", "cluster unreachable", "narrow-job"},
		{"#/dlq", "Dead letters", "env/stage", "narrow-dlq"},
		{"#/resources", "Resources", "repo/api", "narrow-resources"},
		{"#/resources/node%2F7", "Resource", "cooling down until", "narrow-resource"},
		{"#/kinds", "Kinds", "deploy", "narrow-kinds"},
		{"#/events", "Events", "acquire", "narrow-events"},
	} {
		do(t, ctx, page(p.route, p.heading), hasText("main", p.text))
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at 390 px: the page is %d px wide", p.route, w)
		}
		if off := eval[int](t, ctx, `[...document.querySelectorAll('#nav a:not([hidden])')].filter((a) => a.getBoundingClientRect().right > 390).length`); off != 0 {
			t.Errorf("%s at 390 px: %d navigation links off screen", p.route, off)
		}
		shot(t, ctx, p.name)
	}

	// Dark: the page follows the system's colour scheme.
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, page("#/jobs", "Jobs"), hasText("main", "repo/api"),
		until(`getComputedStyle(document.body).backgroundColor === 'rgb(20, 23, 27)'`))
	shot(t, ctx, "narrow-jobs-dark")
}
