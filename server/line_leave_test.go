package server_test

import (
	"context"
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

// lineServer serves st (whose refusals a test follows) without auth, and reports on gone each
// acquire whose handler returned after its client went away.
func lineServer(t *testing.T, st store.Store) (f *fixture, gone <-chan struct{}) {
	t.Helper()
	srv, err := server.New(server.Config{Store: st, MaxWait: server.HangGuard, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g := make(chan struct{}, 1)
	h := validating(t, srv.Handler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/v1/locks/acquire" && r.Context().Err() != nil {
			select {
			case g <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &fixture{t: t, url: ts.URL}, g
}

// poll sends an acquire request with ctx in the background; its answer (or the error of a
// request whose ctx ended) comes on the returned channel.
func (f *fixture) poll(ctx context.Context, body string) <-chan response {
	return f.pollAs(ctx, "", body)
}

// pollAs is poll with a bearer token.
func (f *fixture) pollAs(ctx context.Context, token, body string) <-chan response {
	out := make(chan response, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/locks/acquire", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- response{raw: err.Error()}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		out <- response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	}()
	return out
}

// waitHandlerGone waits for gone (lineServer's signal that an acquire's handler has returned)
// after the test hung up that acquire's poll.
func waitHandlerGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-ctxTimeout(t):
		t.Fatalf("the acquire's handler did not return in %s after its client went away (hung)", server.HangGuard)
	}
}

// holdForAnHour acquires key as "holder" with an hour's TTL and returns the answer's body.
func (f *fixture) holdForAnHour(key string) string {
	f.t.Helper()
	r := f.post("/v1/locks/acquire", "", `{"key":"`+key+`","holder":"holder","ttl_ms":3600000}`)
	if r.status != 200 {
		f.t.Fatalf("holder: %d %s", r.status, r.raw)
	}
	return r.raw
}

// lineHolders is the holders of key's tickets, in line order.
func (f *fixture) lineHolders(key string) []any {
	f.t.Helper()
	return f.lineHoldersAs("", key)
}

// lineHoldersAs is lineHolders read with a bearer token.
func (f *fixture) lineHoldersAs(token, key string) []any {
	f.t.Helper()
	var out []any
	for _, tk := range lineOf(f.t, f.do(http.MethodGet, "/v1/resources/"+key, token, "", "")) {
		out = append(out, tk["holder"])
	}
	return out
}

// lineBackends are the stores with a line, as a server test opens them.
var lineBackends = []struct {
	name string
	open func(*testing.T) store.Store
}{{"sqlite", openSQLiteStore}, {"postgres", openPostgres}}

// A waiter keeps its place in the line across the long-polls of one acquire: its client hangs up
// one poll (a client-side timeout, a dropped connection) and asks again under the same lease ID;
// meanwhile a later waiter queued behind it. The hang-up leaves the ticket where it was, so when
// the holder lets go the first waiter is granted, not the later one.
func TestLongPollThatEndsKeepsItsPlace(t *testing.T) {
	for _, b := range lineBackends {
		t.Run(b.name, func(t *testing.T) {
			st := storetest.NewRefusals(b.open(t).(storetest.LineStore))
			f, gone := lineServer(t, st)
			const key = "line/kept"
			holderLease := f.holdForAnHour(key)

			// A waits (a ticket that lasts an hour), then its client hangs up that poll.
			const a = `{"key":"` + key + `","holder":"a","lease_id":"a-lease","ttl_ms":3600000,"wait_ms":180000}`
			ctx, cancel := context.WithCancel(context.Background())
			first := f.poll(ctx, a)
			st.WaitRefused(t, "a", server.HangGuard)
			cancel()
			if r := <-first; r.status != 0 || !strings.Contains(r.raw, context.Canceled.Error()) {
				t.Fatalf("the hung-up poll: %d %s", r.status, r.raw)
			}
			waitHandlerGone(t, gone)
			if got := f.lineHolders(key); len(got) != 1 || got[0] != "a" {
				t.Fatalf("line after a's client hung up its poll: %v; want a's ticket kept", got)
			}

			// B comes later, then A asks again under its lease ID.
			bDone := f.poll(context.Background(), `{"key":"`+key+`","holder":"b","lease_id":"b-lease","ttl_ms":3600000,"wait_ms":180000}`)
			st.WaitRefused(t, "b", server.HangGuard)
			aDone := f.poll(context.Background(), a)
			st.WaitRefused(t, "a", server.HangGuard)
			if got := f.lineHolders(key); len(got) != 2 || got[0] != "a" || got[1] != "b" {
				t.Fatalf("line: %v; want [a b]", got)
			}

			release(t, f, key, holderLease)
			select {
			case r := <-aDone:
				if r.status != 200 || !strings.Contains(r.raw, `"holder":"a"`) {
					t.Fatalf("a after the release: %d %s", r.status, r.raw)
				}
				release(t, f, key, r.raw)
			case r := <-bDone:
				t.Fatalf("b, which queued after a, was answered first: %d %s", r.status, r.raw)
			case <-ctxTimeout(t):
				t.Fatalf("nobody was granted in %s after the release (hung)", server.HangGuard)
			}
			if r := <-bDone; r.status != 200 || !strings.Contains(r.raw, `"holder":"b"`) {
				t.Fatalf("b after a released: %d %s", r.status, r.raw)
			}
		})
	}
}

// POST /v1/locks/leave gives up a waiting acquire: its long-poll, still waiting on the server,
// ends (answered as a wait that ran out, naming the holder), its ticket leaves the line at once,
// and the next in line is granted at the release. A leave that finds no poll waiting still
// removes the ticket (the client hung up its poll first), and makes a poll of that lease ID that
// arrives after it (overtaken on another connection) end without joining the line.
func TestLeaveEndsTheWaitAndTheTicket(t *testing.T) {
	for _, b := range lineBackends {
		t.Run(b.name, func(t *testing.T) {
			st := storetest.NewRefusals(b.open(t).(storetest.LineStore))
			f, gone := lineServer(t, st)
			const key = "line/left"
			holderLease := f.holdForAnHour(key)
			aDone := f.poll(context.Background(), `{"key":"`+key+`","holder":"a","lease_id":"a-lease","ttl_ms":3600000,"wait_ms":180000}`)
			st.WaitRefused(t, "a", server.HangGuard)
			bDone := f.poll(context.Background(), `{"key":"`+key+`","holder":"b","lease_id":"b-lease","ttl_ms":3600000,"wait_ms":180000}`)
			st.WaitRefused(t, "b", server.HangGuard)

			if r := f.post("/v1/locks/leave", "", `{"key":"`+key+`","lease_id":"a-lease"}`); r.status != 200 || r.body["stopped"] != true {
				t.Fatalf("leave of a waiting acquire: %d %s", r.status, r.raw)
			}
			if r := <-aDone; r.status != 409 || !strings.Contains(r.raw, `"code":"lock_held"`) || !strings.Contains(r.raw, `"holder":"holder"`) {
				t.Fatalf("a's poll after its leave: %d %s; want 409 lock_held naming the holder", r.status, r.raw)
			}
			if got := f.lineHolders(key); len(got) != 1 || got[0] != "b" {
				t.Fatalf("line after a left: %v; want [b]", got)
			}
			release(t, f, key, holderLease)
			r := <-bDone
			if r.status != 200 || !strings.Contains(r.raw, `"holder":"b"`) {
				t.Fatalf("b after the release: %d %s", r.status, r.raw)
			}
			bLease := r.raw

			// C hangs up its poll (its ticket stays), then leaves: nothing waits, the ticket goes.
			ctx, cancel := context.WithCancel(context.Background())
			const c = `{"key":"` + key + `","holder":"c","lease_id":"c-lease","ttl_ms":3600000,"wait_ms":180000}`
			cDone := f.poll(ctx, c)
			st.WaitRefused(t, "c", server.HangGuard)
			cancel()
			<-cDone
			waitHandlerGone(t, gone)
			if got := f.lineHolders(key); len(got) != 1 || got[0] != "c" {
				t.Fatalf("line after c hung up: %v; want [c]", got)
			}
			if r := f.post("/v1/locks/leave", "", `{"key":"`+key+`","lease_id":"c-lease"}`); r.status != 200 || r.body["stopped"] != false {
				t.Fatalf("leave with no poll waiting: %d %s", r.status, r.raw)
			}
			if got := f.lineHolders(key); len(got) != 0 {
				t.Fatalf("line after c left: %v; want it empty", got)
			}
			// The leave came before this poll (it overtook it): the poll does not wait.
			if r := <-f.poll(context.Background(), c); r.status != 503 || !strings.Contains(r.raw, "left the key's line") {
				t.Fatalf("a poll after its leave: %d %s", r.status, r.raw)
			}
			if got := f.lineHolders(key); len(got) != 0 {
				t.Fatalf("line after the late poll: %v; want it empty", got)
			}
			release(t, f, key, bLease)

			for _, body := range []string{`{"key":"` + key + `"}`, `{"lease_id":"x"}`, `{"key":"baton/x","lease_id":"x"}`} {
				if r := f.post("/v1/locks/leave", "", body); r.status/100 != 4 {
					t.Fatalf("leave %s: %d %s; want refused", body, r.status, r.raw)
				}
			}
		})
	}
}

// With --auth-file a waiting acquire belongs to its principal: another principal's leave, an
// admin's included, neither ends its long-poll nor removes its ticket; a reader may not leave.
func TestLeaveIsTheOwnersOnly(t *testing.T) {
	f := newFixture(t, true)
	const key = "line/owned"
	if r := f.post("/v1/locks/acquire", adminToken, `{"key":"`+key+`","holder":"holder","ttl_ms":3600000}`); r.status != 200 {
		t.Fatalf("holder: %d %s", r.status, r.raw)
	}
	done := f.pollAs(context.Background(), writeToken, `{"key":"`+key+`","holder":"a","lease_id":"a-lease","ttl_ms":3600000,"wait_ms":180000}`)
	select {
	case <-f.refused:
	case r := <-done:
		t.Fatalf("the waiter was answered before it waited: %d %s", r.status, r.raw)
	}
	const leave = `{"key":"` + key + `","lease_id":"a-lease"}`
	if r := f.post("/v1/locks/leave", readToken, leave); r.status != 403 {
		t.Fatalf("a reader's leave: %d %s; want 403", r.status, r.raw)
	}
	if r := f.post("/v1/locks/leave", adminToken, leave); r.status != 200 || r.body["stopped"] != false {
		t.Fatalf("another principal's leave: %d %s; want nothing stopped", r.status, r.raw)
	}
	if got := f.lineHoldersAs(readToken, key); len(got) != 1 || got[0] != "a" {
		t.Fatalf("line after another principal's leave: %v; want [a]", got)
	}
	if r := f.post("/v1/locks/leave", writeToken, leave); r.status != 200 || r.body["stopped"] != true {
		t.Fatalf("the owner's leave: %d %s", r.status, r.raw)
	}
	if r := <-done; r.status != 409 {
		t.Fatalf("the poll after its owner's leave: %d %s", r.status, r.raw)
	}
	if got := f.lineHoldersAs(readToken, key); len(got) != 0 {
		t.Fatalf("line after the owner's leave: %v; want it empty", got)
	}
}

// release ends the lease of an acquire's answer.
func release(t *testing.T, f *fixture, key, answer string) {
	t.Helper()
	i := strings.Index(answer, `"lease_id":"`)
	if i < 0 {
		t.Fatalf("no lease in %s", answer)
	}
	id := answer[i+len(`"lease_id":"`):]
	id = id[:strings.IndexByte(id, '"')]
	if r := f.post("/v1/locks/release", "", `{"key":"`+key+`","lease_id":"`+id+`"}`); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
}

// ctxTimeout is closed server.HangGuard from now, or when t ends.
func ctxTimeout(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), server.HangGuard)
	t.Cleanup(cancel)
	return ctx.Done()
}
