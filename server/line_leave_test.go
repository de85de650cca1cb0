package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// A long-poll acquire whose client goes away (the request is cancelled) leaves the key's line:
// the server's wait (Locker.AcquireRecord over the request's context) ends cancelled, not run
// out, and so removes its ticket through the store's LeaveLine, which the server's gate passes
// on. By the time the handler has returned, GET /v1/resources/{key} shows the line empty.
func TestLongPollAcquireThatIsCancelledLeavesTheLine(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(*testing.T) store.Store
	}{{"sqlite", openSQLiteStore}, {"postgres", openPostgres}} {
		t.Run(b.name, func(t *testing.T) {
			st := storetest.NewRefusals(b.open(t).(storetest.LineStore))
			srv, err := server.New(server.Config{Store: st, MaxWait: server.HangGuard, Version: "test",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			// gone receives when an acquire's handler returns after its client went away.
			gone := make(chan struct{}, 1)
			h := validating(t, srv.Handler())
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				if r.URL.Path == "/v1/locks/acquire" && r.Context().Err() != nil {
					select {
					case gone <- struct{}{}:
					default:
					}
				}
			}))
			t.Cleanup(func() {
				srv.Close()
				ts.Close()
			})
			f := &fixture{t: t, url: ts.URL}
			const key = "line/gone"
			if r := f.post("/v1/locks/acquire", "", `{"key":"`+key+`","holder":"holder","ttl_ms":3600000}`); r.status != 200 {
				t.Fatalf("holder: %d %s", r.status, r.raw)
			}

			// The client waits (a ticket that would last an hour), then goes away.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/locks/acquire", strings.NewReader(
				`{"key":"`+key+`","holder":"quitter","lease_id":"quitter-lease","ttl_ms":3600000,"wait_ms":180000}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = errors.New("answered " + resp.Status)
				}
				done <- err
			}()
			st.WaitRefused(t, "quitter", server.HangGuard)
			if l := lineOf(t, f.do(http.MethodGet, "/v1/resources/"+key, "", "", "")); len(l) != 1 || l[0]["holder"] != "quitter" {
				t.Fatalf("line while the client waits: %v; want the quitter's ticket", l)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled request: %v", err)
			}
			select {
			case <-gone:
			case <-ctxTimeout(t):
				t.Fatalf("the acquire's handler did not return in %s after its client went away (hung)", server.HangGuard)
			}
			r := f.do(http.MethodGet, "/v1/resources/"+key, "", "", "")
			if l := lineOf(t, r); len(l) != 0 {
				t.Fatalf("line after the client went away: %s; want it empty (the ticket left with its client)", r.raw)
			}
		})
	}
}

// ctxTimeout is closed server.HangGuard from now, or when t ends.
func ctxTimeout(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), server.HangGuard)
	t.Cleanup(cancel)
	return ctx.Done()
}
