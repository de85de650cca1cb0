package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// clientSrc is the TypeScript client's ESM source, served to the browser as is.
var clientSrc = filepath.Join("..", "..", "clients", "typescript", "src")

const clientPage = `<!doctype html><meta charset="utf-8"><title>Baton TypeScript client</title><p>TypeScript client test page</p>`

// clientSite serves a tiny page at / and the TypeScript client's .js files under /client/;
// with api set, it passes every other request to it (the documented reverse proxy that puts
// the page and the API on one origin), else it answers 404.
func clientSite(t *testing.T, api string) *httptest.Server {
	t.Helper()
	files := http.StripPrefix("/client/", http.FileServerFS(os.DirFS(clientSrc)))
	var proxy http.Handler = http.NotFoundHandler()
	if api != "" {
		target, err := url.Parse(api)
		if err != nil {
			t.Fatal(err)
		}
		proxy = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(clientPage))
		case strings.HasPrefix(r.URL.Path, "/client/"):
			if !strings.HasSuffix(r.URL.Path, ".js") {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			files.ServeHTTP(w, r)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// jsError is what the browser script reports of a failed call (or "granted", "read", "opaque").
type jsError struct {
	Name       string `json:"name"`
	BatonError bool   `json:"batonError"`
	LockHeld   bool   `json:"lockHeld"`
	Status     int    `json:"status"`
	Code       string `json:"code"`
	Holder     string `json:"holder"`
	Token      uint64 `json:"token"`
	ExpiresAt  string `json:"expiresAt"`
	Message    string `json:"message"`
}

type jsLease struct {
	Key       string    `json:"key"`
	LeaseID   string    `json:"lease_id"`
	Holder    string    `json:"holder"`
	Token     uint64    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"` // the first one, by the server's clock
}

// startClientScript runs testdata/tsclient.js with params in the page of ctx; the script's
// promise is window.batonRun.
func startClientScript(t *testing.T, ctx context.Context, params map[string]any) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "tsclient.js"))
	if err != nil {
		t.Fatal(err)
	}
	// The promise is kept, not awaited: the test looks at the server at the script's checkpoints.
	eval[bool](t, ctx, "(window.batonRun = ("+string(script)+")("+js(params)+"), true)")
}

// reached waits until the script reaches the checkpoint name and returns what it reported
// there; the script failing first fails the test with its error.
func reached[T any](t *testing.T, ctx context.Context, name string) T {
	t.Helper()
	return awaitJS[T](t, ctx, "Promise.race([window.batonTest.reached("+js(name)+"), "+
		"window.batonRun.then(() => { throw new Error("+js("the script ended before checkpoint "+name)+"); })])")
}

// awaitJS evaluates expr and awaits its promise, bounded by stepBound.
func awaitJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// TestTypeScriptClientInBrowser runs the TypeScript client (clients/typescript/src, loaded as
// ES modules) in chromium against a real server, from a page behind one reverse proxy with the
// API (docs/clients.md's rule): a lease with keepalive, another holder refused, withLock, and a
// job submitted and read back, each checked on the server through its API. From a page of
// another origin, its writes are refused and its reads are unreadable.
func TestTypeScriptClientInBrowser(t *testing.T) {
	needChromium(t)
	d := startServer(t, false)
	site := clientSite(t, d.url) // the page, the client and the API on one origin
	other := clientSite(t, "")   // a page of another origin, with the client only
	ctx := browser(t, 1024, 768)

	const ttlMs = 3000
	do(t, ctx, chromedp.Navigate(site.URL+"/"), hasText("body", "TypeScript client test page"))
	startClientScript(t, ctx, map[string]any{
		"baseUrl": site.URL, "ttlMs": ttlMs, "heldKey": "browser/held", "holder": "browser-a",
		"withKey": "browser/with", "kind": "browser-kind", "resource": "browser/resource",
		"idempotencyKey": "browser-submit-1",
	})

	// Held past its first local deadline by keepalive: the server has this very lease, renewed.
	held := reached[jsLease](t, ctx, "held")
	got := d.must(200, "", "GET", "/v1/locks/browser/held", nil)["lease"].(map[string]any)
	expires, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got["expires_at"]))
	if got["lease_id"] != held.LeaseID || got["holder"] != "browser-a" || got["token"] != float64(held.Token) || held.Token == 0 ||
		!expires.After(held.ExpiresAt) {
		t.Fatalf("server's lease on browser/held %v, the browser's %+v (want it renewed past its first expiry)", got, held)
	}
	eval[bool](t, ctx, `(window.batonTest.resume('held'), true)`)

	// Inside withLock: held on the server by the client's default holder.
	in := reached[jsLease](t, ctx, "withLock")
	got = d.must(200, "", "GET", "/v1/locks/browser/with", nil)["lease"].(map[string]any)
	if got["lease_id"] != in.LeaseID || got["holder"] != in.Holder || got["token"] != float64(in.Token) || in.Token <= held.Token {
		t.Fatalf("server's lease on browser/with %v, the browser's %+v", got, in)
	}
	if !strings.HasPrefix(in.Holder, "js:browser:") {
		t.Errorf("default holder in a browser %q, want js:browser:<random>", in.Holder)
	}
	eval[bool](t, ctx, `(window.batonTest.resume('withLock'), true)`)

	res := awaitJS[sameOriginResult](t, ctx, "window.batonRun")
	if res.Lease != held {
		t.Errorf("lease %+v at the end, %+v at the checkpoint", res.Lease, held)
	}
	if res.KeptAlive.Aborted || !res.KeptAlive.DeadlineMoved || !res.KeptAlive.ExpiryMoved {
		t.Errorf("lease held past its first local deadline: %+v, want not aborted, deadline and expiry moved by keepalive", res.KeptAlive)
	}
	if s := res.Second; !s.LockHeld || !s.BatonError || s.Name != "LockHeldError" || s.Status != 409 || s.Code != "lock_held" ||
		s.Holder != "browser-a" || s.Token != held.Token || s.ExpiresAt == "" {
		t.Errorf("a second holder's tryAcquire: %+v, want a LockHeldError naming browser-a and token %d", s, held.Token)
	}
	if !res.Released.Aborted || !res.Released.ReasonReleased {
		t.Errorf("signal after release: %+v, want aborted with a LeaseReleasedError", res.Released)
	}
	if w := res.WithLock; w.AbortedAtStart || w.AbortedAtEnd || !w.AbortedAfter || w.LeaseID != in.LeaseID || w.Key != "browser/with" {
		t.Errorf("withLock: %+v, want its signal live while fn ran and aborted after", w)
	}
	d.must(404, "", "GET", "/v1/locks/browser/held", nil)
	d.must(404, "", "GET", "/v1/locks/browser/with", nil)

	j := res.Job
	if j.ID <= 0 || j.Existing || j.AgainID != j.ID || !j.AgainExisting || j.Got.ID != j.ID || j.Got.Kind != "browser-kind" ||
		j.Got.Resource != "browser/resource" || j.Got.State != "available" || j.Got.Args["from"] != "browser" {
		t.Errorf("job submitted and read back: %+v", j)
	}
	if job := d.must(200, "", "GET", fmt.Sprintf("/v1/jobs/%d", j.ID), nil); job["kind"] != "browser-kind" || job["state"] != "available" {
		t.Errorf("the server's job %d: %v", j.ID, job)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("client warnings: %q", res.Warnings)
	}

	// A page of another origin, its client pointed at the server itself: the write is refused
	// (the browser's preflight finds no CORS headers), the read's answer cannot be read, and a
	// blind POST that needs no preflight is refused by the server.
	do(t, ctx, chromedp.Navigate(other.URL+"/"), hasText("body", "TypeScript client test page"))
	startClientScript(t, ctx, map[string]any{"crossOrigin": true, "baseUrl": d.url, "heldKey": "browser/cross", "jobId": j.ID})
	cross := awaitJS[crossOriginResult](t, ctx, "window.batonRun")
	t.Logf("from another origin: tryAcquire: %s; getJob: %s", cross.Write.Message, cross.Read.Message)
	if w := cross.Write; !w.BatonError || w.Status != 0 {
		t.Errorf("tryAcquire from another origin: %+v, want a BatonError of status 0 (blocked by the browser)", w)
	}
	if r := cross.Read; !r.BatonError || r.Status != 0 {
		t.Errorf("getJob from another origin: %+v, want a BatonError of status 0 (answer unreadable)", r)
	}
	if cross.Blind.Name != "opaque" {
		t.Errorf("no-cors cancel from another origin: %+v, want an opaque response", cross.Blind)
	}
	d.must(404, "", "GET", "/v1/locks/browser/cross", nil)
	if state := jobState(d, "", j.ID); state != "available" {
		t.Errorf("job %d after another origin's cancel: %s, want available (refused by the server)", j.ID, state)
	}
}

// sameOriginResult is what testdata/tsclient.js resolves with on the proxy's origin.
type sameOriginResult struct {
	Lease     jsLease `json:"lease"`
	KeptAlive struct {
		Aborted       bool `json:"aborted"`
		DeadlineMoved bool `json:"deadlineMoved"`
		ExpiryMoved   bool `json:"expiryMoved"`
	} `json:"keptAlive"`
	Second   jsError `json:"second"`
	Released struct {
		Aborted        bool `json:"aborted"`
		ReasonReleased bool `json:"reasonReleased"`
	} `json:"released"`
	WithLock struct {
		jsLease
		AbortedAtStart bool `json:"abortedAtStart"`
		AbortedAtEnd   bool `json:"abortedAtEnd"`
		AbortedAfter   bool `json:"abortedAfter"`
	} `json:"withLock"`
	Job struct {
		ID            int64 `json:"id"`
		Existing      bool  `json:"existing"`
		AgainID       int64 `json:"againId"`
		AgainExisting bool  `json:"againExisting"`
		Got           struct {
			ID       int64          `json:"id"`
			Kind     string         `json:"kind"`
			Resource string         `json:"resource"`
			State    string         `json:"state"`
			Args     map[string]any `json:"args"`
		} `json:"got"`
	} `json:"job"`
	Warnings []string `json:"warnings"`
}

// crossOriginResult is what testdata/tsclient.js resolves with on another origin.
type crossOriginResult struct {
	Write jsError `json:"write"`
	Read  jsError `json:"read"`
	Blind jsError `json:"blind"`
}
