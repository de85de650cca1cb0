package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

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
	return chromedp.Steps(append(steps, chromedp.Click(chromedp.CSS("dialog[open] .confirm")),
		chromedp.WaitNotPresent(chromedp.CSS("dialog")))...)
}

// TestDashboardAdmin walks every page as an admin and clicks every action, checking the store
// through the API after each.
func TestDashboardAdmin(t *testing.T) {
	d := startServer(t, true)
	s := seed(d, adminToken)
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
	do(t, ctx, chromedp.SetValue(chromedp.CSS("input[name=prefix]"), "locks/"), chromedp.Click(chromedp.CSS("form.filters button[type=submit]")),
		lacks("locks/beta", "other/gamma"),
		page("#/locks?holder=ci-7", "Locks"), lacks("other/gamma", "locks/beta"))

	// A lock's page: its lease and audit history; force-release asks for a reason and
	// confirmation (Escape backs out), then ends the lease with the reason in the audit log.
	do(t, ctx, page("#/locks/locks%2Falpha", "Lock locks/alpha"), hasText("main", "Audit history", "acquire", "ci-7"))
	shot(t, ctx, "lock")
	do(t, ctx, chromedp.Focus(chromedp.CSS("main .actions button.act")), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS("dialog[open] textarea")), chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(chromedp.CSS("dialog")))
	d.must(200, adminToken, "GET", "/v1/locks/locks/alpha", nil)
	do(t, ctx, chromedp.Click(chromedp.CSS("main .actions button.act")), confirm("stuck after deploy"),
		hasText("#toast", "Released locks/alpha"), hasText("main", "No live lease on this key", "force_release", "stuck after deploy"))
	d.must(404, adminToken, "GET", "/v1/locks/locks/alpha", nil)
	evs := d.must(200, adminToken, "GET", "/v1/events?key=locks/alpha", nil)["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["kind"] != "force_release" || last["reason"] != "stuck after deploy" || last["actor"] != "admin" {
		t.Fatalf("last event of locks/alpha: %v", last)
	}

	// Jobs: counts per kind and state, the list, cancel (confirmed) and retry.
	do(t, ctx, page("#/jobs", "Jobs"),
		until(`(document.querySelector('a[href="#/jobs?kind=build&state=available"]') || {}).textContent === '2'`),
		until(`(document.querySelector('a[href="#/jobs?kind=build&state=running"]') || {}).textContent === '1'`),
		hasText("main", "repo/api", "env/prod", "discarded", "runner-2"))
	shot(t, ctx, "jobs")
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-fk="lc%d"]`, s.waiting))), confirm(""),
		hasText("#toast", fmt.Sprintf("Job %d: cancel sent", s.waiting)))
	if st := jobState(d, adminToken, s.waiting); st != "cancelled" {
		t.Fatalf("job %d after cancel: %s", s.waiting, st)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-fk="lr%d"]`, s.waiting))),
		hasText("#toast", fmt.Sprintf("Job %d retried", s.waiting)))
	if st := jobState(d, adminToken, s.waiting); st != "available" {
		t.Fatalf("job %d after retry: %s", s.waiting, st)
	}
	do(t, ctx, page("#/jobs?state=discarded", "Jobs"), lacks("env/prod", "repo/api"))

	// A job's page: args, attempts, errors, worker, fencing token; retry from there.
	do(t, ctx, page(fmt.Sprintf("#/jobs/%d", s.dead), fmt.Sprintf("Job %d", s.dead)),
		hasText("main", "cluster unreachable", "runner-1", `"env": "env/prod"`, "1 of 1", "Fencing token", "handler_error"))
	shot(t, ctx, "job")
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-fk="dr%d"]`, s.dead))),
		hasText("#toast", fmt.Sprintf("Job %d retried", s.dead)))
	if st := jobState(d, adminToken, s.dead); st != "available" {
		t.Fatalf("job %d after retry: %s", s.dead, st)
	}

	// Dead letters: the one left, purged after confirmation.
	do(t, ctx, page("#/dlq", "Dead letters"), hasText("main", "env/stage", "cluster unreachable"), lacks("env/stage", "env/prod"))
	shot(t, ctx, "dlq")
	do(t, ctx, chromedp.Click(chromedp.CSS("button.purge-all")), confirm(""), hasText("#toast", "Purged every dead letter"),
		hasText("main", "No jobs."))
	if dl := d.must(200, adminToken, "GET", "/v1/jobs?state=discarded", nil)["jobs"].([]any); len(dl) != 0 {
		t.Fatalf("dead letters after purge: %v", dl)
	}
	d.must(404, adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", s.deadStage), nil)

	// Resources: state, version, the running job and the queue waiting on it.
	do(t, ctx, page("#/resources", "Resources"), hasText("main", "repo/api", "env/prod", "FAILED"))
	shot(t, ctx, "resources")
	do(t, ctx, page("#/resources/repo%2Fapi", "Resource repo/api"),
		until(fmt.Sprintf(`document.querySelector('dl a[href="#/jobs/%d"]')`, s.running)),
		until(fmt.Sprintf(`document.querySelector('table a[href="#/jobs/%d"]')`, s.waiting)),
		hasText("main", "Waiting jobs"))
	shot(t, ctx, "resource")

	// Kinds: policy and guard. Events: the audit log with the force-release.
	do(t, ctx, page("#/kinds", "Kinds"), hasText("main", "deploy", "reject", "from (unset) | READY; running → DEPLOYING; success → READY; failure → FAILED"))
	shot(t, ctx, "kinds")
	do(t, ctx, page("#/events", "Events"), hasText("main", "force_release", "stuck after deploy", "other/gamma"))
	shot(t, ctx, "events")
	do(t, ctx, page("#/events?key=locks/beta", "Events"), lacks("locks/beta", "other/gamma", "stuck after deploy"))

	// The skip link moves the focus to the content and leaves the route alone.
	if !eval[bool](t, ctx, `(() => { const h = location.hash; document.querySelector('.skip').click();
		return location.hash === h && document.activeElement.id === 'main'; })()`) {
		t.Fatal("the skip link did not focus the content, or changed the route")
	}
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
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-fk="dc%d"]`, s.waiting))), confirm(""), hasText("#toast", "cancel sent"))
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
