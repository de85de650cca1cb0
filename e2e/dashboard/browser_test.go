package dashboard

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts chromium with a fresh profile and returns the context of its first tab. The
// context's deadline is only a safety net against a hung browser: every wait is for a condition.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	needChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel(); cancel() })
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// tab opens another tab of the same browser (its own session storage: signed out), in a new
// browser context (its own cache and cookies) with fresh.
func tab(t *testing.T, ctx context.Context, fresh bool) (context.Context, context.CancelFunc) {
	t.Helper()
	var opts []chromedp.ContextOption
	if fresh {
		opts = append(opts, chromedp.WithNewBrowserContext())
	}
	tctx, cancel := chromedp.NewContext(ctx, opts...)
	t.Cleanup(cancel)
	// The first action creates the tab, which lives as long as the context of that action:
	// run it on tctx itself, not on a context of do's with a bound.
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return tctx, cancel
}

// stepBound bounds one do call. It is a safety net that leaves time to report what the page
// shows, not a timing assertion: every step waits for a condition, normally for milliseconds.
const stepBound = 90 * time.Second

// do runs steps, and on failure saves a screenshot and fails with the page's text.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		shot(t, ctx, "failure")
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%v\npage text:\n%s", err, text)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise).
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// until waits for a JavaScript condition to hold (no time limit but the test's).
func until(cond string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool]("!!("+cond+")", chromedp.WithPollingTimeout(0), chromedp.WithPollingInterval(25*time.Millisecond))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, tg)
		return chromedp.Void{}, err
	}
}

// click clicks the element of sel with the mouse, as chromedp.Click does, and finds it again if
// the page replaced it between being found and being clicked: the dashboard re-renders a page
// after an action's toast and on its refresh timer, and a loaded machine widens that window
// (chromedp then fails with "Could not find node with given id", before any mouse event).
func click(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			_, err := chromedp.Click(chromedp.CSS(sel))(ctx, tg)
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "Could not find node with given id") {
				return chromedp.Void{}, err
			}
		}
	}
}

// hasText waits until the element of sel shows every one of texts.
func hasText(sel string, texts ...string) chromedp.Action[chromedp.Void] {
	cond := "(document.querySelector(" + js(sel) + ") || {innerText: ''}).innerText"
	var parts []string
	for _, s := range texts {
		parts = append(parts, "t.includes("+js(s)+")")
	}
	return until("((t) => " + strings.Join(parts, " && ") + ")(" + cond + ")")
}

// lacks waits until main shows want and none of absent.
func lacks(want string, absent ...string) chromedp.Action[chromedp.Void] {
	c := "document.querySelector('main').innerText.includes(" + js(want) + ")"
	for _, a := range absent {
		c += " && !document.querySelector('main').innerText.includes(" + js(a) + ")"
	}
	return until(c)
}

// page moves the dashboard to a hash route (no reload) and waits for its heading.
func page(route, heading string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void]("location.hash = "+js(route)),
		hasText("main h1", heading))
}

// signIn opens the dashboard and enters token.
func signIn(url, token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		click("form.login button[type=submit]"),
		chromedp.WaitVisible(chromedp.CSS("#nav")))
}

// shot saves a full-page screenshot in the test's artifact directory (go test -artifacts
// keeps them under -outputdir). The notices of earlier actions are dismissed first, so that
// they do not cover the page (a failure's screenshot keeps them).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if name != "failure" {
		_, _ = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('toast').replaceChildren()`))
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
