package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// following runs a following command in-process against f with an interrupt the test
// controls; stop interrupts it and returns its result.
func (f *fixture) following(t *testing.T, args ...string) (out *syncBuffer, stop func() result) {
	t.Helper()
	t.Setenv("BATON_SERVER", f.url)
	t.Setenv("BATON_TOKEN", "")
	ctx, cancel := context.WithCancel(context.Background())
	orig := interruptContext
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, func() {} }
	out = &syncBuffer{}
	var errOut syncBuffer
	done := make(chan result, 1)
	go func() {
		code := run(args, nil, out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	var once bool
	var res result
	stop = func() result {
		if !once {
			once = true
			cancel()
			select {
			case res = <-done:
			case <-time.After(hangGuard):
				t.Fatalf("baton %q still running %s after the interrupt (hung):\n%s", args, hangGuard, out.String())
			}
			interruptContext = orig
		}
		return res
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

// waitFor waits for marker in out; hangGuard turns a hang into a failure.
func waitFor(t *testing.T, out *syncBuffer, marker string) {
	t.Helper()
	select {
	case <-out.seen(marker):
	case <-time.After(hangGuard):
		t.Fatalf("no %q in the output after %s (hung):\n%s", marker, hangGuard, out.String())
	}
}

func TestEventsNewestFirstAndFollow(t *testing.T) {
	f := newFixture(t, nil)
	for _, k := range []string{"a", "b", "c"} {
		if r := f.cli(t, "locks", "acquire", k, "--holder", "h-"+k); r.code != 0 {
			t.Fatalf("acquire: %s", r)
		}
	}
	r := f.cli(t, "events")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 4 || !strings.Contains(lines[1], "h-c") || !strings.Contains(lines[3], "h-a") {
		t.Fatalf("events, newest first: %s", r)
	}
	r = f.cli(t, "events", "--limit", "1")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "h-c") {
		t.Errorf("events --limit 1 (the newest): %s", r)
	}
	r = f.cli(t, "events", "--oldest-first", "--limit", "1")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "h-a") {
		t.Errorf("events --oldest-first --limit 1: %s", r)
	}

	out, stop := f.following(t, "events", "--follow", "--limit", "2", "--interval", "100ms")
	waitFor(t, out, "h-c")
	if r := f.cli(t, "locks", "acquire", "d", "--holder", "h-d"); r.code != 0 {
		t.Fatalf("acquire: %s", r)
	}
	waitFor(t, out, "h-d")
	res := stop()
	lines = strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "h-b") ||
		!strings.Contains(lines[2], "h-c") || !strings.Contains(lines[3], "h-d") {
		t.Errorf("events --follow: %s\nwant the header, the newest two oldest first, then the new one", res)
	}

	out, stop = f.following(t, "events", "--follow", "--limit", "1", "--interval", "100ms", "-o", "json")
	waitFor(t, out, `"holder":"h-d"`)
	if res := stop(); res.code != 0 || strings.Count(res.stdout, "\n") != 1 {
		t.Errorf("events --follow -o json: %s\nwant one JSON line", res)
	}
	if r := f.cli(t, "events", "--follow", "--interval", "1ms"); r.code != exitUsage || !strings.Contains(r.stderr, "--interval must be between 100ms and 1h") {
		t.Errorf("events --interval 1ms: %s", r)
	}
}

func TestLocksListWatch(t *testing.T) {
	f := newFixture(t, nil)
	out, stop := f.following(t, "locks", "list", "--watch", "--interval", "100ms")
	waitFor(t, out, "no live leases")
	r := f.cli(t, "locks", "acquire", "w/1", "--holder", "watcher-test", "-o", "json")
	if r.code != 0 {
		t.Fatalf("acquire: %s", r)
	}
	waitFor(t, out, "watcher-test")
	l := decodeLease(t, r)
	// A renewal changes no lease: nothing is printed for it.
	if r := f.cli(t, "locks", "renew", "w/1", "--lease", l.LeaseID); r.code != 0 {
		t.Fatalf("renew: %s", r)
	}
	if r := f.cli(t, "locks", "release", "w/1", "--lease", l.LeaseID); r.code != 0 {
		t.Fatalf("release: %s", r)
	}
	// The empty list again, after the second time line.
	deadline := time.Now().Add(hangGuard)
	for strings.Count(out.String(), "no live leases") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	res := stop()
	if res.code != 0 || strings.Count(res.stdout, "no live leases") != 2 || strings.Count(res.stdout, "--- ") != 2 ||
		strings.Count(res.stdout, "watcher-test") != 1 {
		t.Errorf("locks list --watch: %s\nwant the empty list, the lease, the empty list again", res)
	}
}

// events --limit N asks the server for the newest N (order=desc, one request); a server older
// than order=desc ignores it and answers oldest first, which the command notices and then reads
// the whole log, so it prints the newest N either way.
func TestEventsLimitAsksForTheNewest(t *testing.T) {
	f := newFixture(t, nil)
	for _, k := range []string{"a", "b", "c"} {
		if r := f.cli(t, "locks", "acquire", k, "--holder", "h-"+k); r.code != 0 {
			t.Fatalf("acquire: %s", r)
		}
	}
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	old := false // answer as a server without order=desc
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			mu.Lock()
			asked = append(asked, r.URL.RawQuery)
			if old {
				q := r.URL.Query()
				q.Del("order")
				r.URL.RawQuery = q.Encode()
			}
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer ts.Close()
	f.url = ts.URL
	for _, o := range []bool{false, true} {
		mu.Lock()
		old, asked = o, nil
		mu.Unlock()
		for _, c := range []struct {
			limit string
			want  []string
		}{{"1", []string{"h-c"}}, {"2", []string{"h-c", "h-b"}}} {
			r := f.cli(t, "events", "--limit", c.limit)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || len(lines) != len(c.want)+1 {
				t.Fatalf("old server %v: events --limit %s: %s", o, c.limit, r)
			}
			for i, w := range c.want {
				if !strings.Contains(lines[i+1], w) {
					t.Errorf("old server %v: events --limit %s: line %d is %q, want %s", o, c.limit, i+1, lines[i+1], w)
				}
			}
		}
		mu.Lock()
		if !o && (len(asked) != 2 || !strings.Contains(asked[0], "order=desc")) {
			t.Errorf("events --limit asked %q; want one request each, with order=desc", asked)
		}
		if o && len(asked) != 4 {
			t.Errorf("against an old server events --limit asked %q; want the newest first, then the whole log", asked)
		}
		mu.Unlock()
	}
}
