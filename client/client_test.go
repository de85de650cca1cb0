package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	readToken  = "read-secret"
	writeToken = "write-secret"
	adminToken = "admin-secret"
)

// backend is one test's server: a SQLite file behind a real HTTP server.
type backend struct {
	url     string
	path    string
	sqlite  *sqlite.Store
	refused <-chan struct{} // closed at the server store's first refusal of a held key
}

type backendOptions struct {
	auth    bool
	maxWait time.Duration // the server's
}

func newBackend(t testing.TB, o backendOptions) *backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	signalled, refused := storetest.SignalRefusal(st)
	// The signalling wrapper hides the SQLite store's fences, limits and trees; the server finds
	// them here, and the line's waiters, so that the server's waiting acquires are woken by name as
	// over the bare store (a waiter on several keys or a limit is woken only so), and its line
	// reader, so that GET /v1/resources/{key} shows who waits, as over the bare store.
	fenced := struct {
		storetest.LineStore
		store.Fencer
		store.Limiter
		store.Treer
	}{signalled.(storetest.LineStore), st, st, st}
	cfg := server.Config{Store: fenced, MaxWait: o.maxWait, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if o.auth {
		a, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken(readToken) +
			"\nwriter write " + server.HashToken(writeToken) + "\nops admin " + server.HashToken(adminToken) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = a
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &backend{url: ts.URL, path: path, sqlite: st, refused: refused}
}

// open returns a client store on b, closed when the test ends.
func (b *backend) open(t testing.TB, cfg client.Config) *client.Store {
	t.Helper()
	cfg.BaseURL = b.url
	s, err := client.NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// harness runs the conformance suite through the HTTP API. Every Open of one backend is a new
// client store on the same server (and SQLite file); closing a client store leaves the server
// up. The client's long-poll is kept short so that the suite's waiters, which must see a
// refusal before the holder lets go, see one within a second.
func harness() storetest.Harness {
	return storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		b := newBackend(t, backendOptions{})
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return b.open(t, client.Config{MaxWait: time.Second}) },
			DeleteRow: func(t testing.TB, key string) {
				s, err := sqlite.Open(context.Background(), b.path, sqlite.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.DB().Exec(`DELETE FROM leases WHERE key = ?`, key); err != nil {
					t.Fatal(err)
				}
			},
		}
	}}
}

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func TestNewStoreChecksConfig(t *testing.T) {
	for _, c := range []struct {
		cfg   client.Config
		field string
	}{
		{client.Config{}, "base_url"},
		{client.Config{BaseURL: "127.0.0.1:7725"}, "base_url"},
		{client.Config{BaseURL: "ftp://host"}, "base_url"},
		{client.Config{BaseURL: "http://"}, "base_url"},
		{client.Config{BaseURL: "http://u:p@host"}, "base_url"},
		{client.Config{BaseURL: "http://host?x=1"}, "base_url"},
		{client.Config{BaseURL: "http://host", Token: "a b"}, "token"},
		{client.Config{BaseURL: "http://host", Token: "a\nb"}, "token"},
		{client.Config{BaseURL: "http://host", MaxWait: -time.Second}, "max_wait"},
	} {
		_, err := client.NewStore(c.cfg)
		var inv *store.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("NewStore(%+v) = %v, want invalid %s", c.cfg, err, c.field)
		}
	}
	s, err := client.NewStore(client.Config{BaseURL: "https://baton.example/prefix/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.BaseURL() != "https://baton.example/prefix" {
		t.Errorf("BaseURL = %q", s.BaseURL())
	}
}

func TestLockHeldAndCooldownCarryTheServersFields(t *testing.T) {
	b := newBackend(t, backendOptions{})
	s := b.open(t, client.Config{})
	ctx := testContext(t)
	held, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: 30 * time.Second, Cooldown: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "y", Holder: "job-8", TTL: 30 * time.Second})
	var he *store.LockHeldError
	if !errors.As(err, &he) || !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("acquire of a held key: %v, want *LockHeldError", err)
	}
	if he.Key != "k" || he.Holder != "job-7" || he.Token != held.Token || !he.ExpiresAt.Equal(held.ExpiresAt) ||
		he.RetryAfter <= 25*time.Second || he.RetryAfter > 30*time.Second {
		t.Fatalf("LockHeldError = %+v; want key k, holder job-7, token %d, expiry %s, retry after ~30s", he, held.Token, held.ExpiresAt)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "y", Holder: "job-8", TTL: 30 * time.Second})
	var ce *store.RestingError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrResting) || ce.Key != "k" || ce.Reason != store.ReasonCooldown ||
		ce.Remaining <= 0 || ce.Remaining > 2*time.Second {
		t.Fatalf("acquire during cooldown: %v (%+v), want *RestingError with up to 2s left", err, ce)
	}
}

func TestLeaseFieldsRoundTrip(t *testing.T) {
	b := newBackend(t, backendOptions{})
	s := b.open(t, client.Config{})
	ctx := testContext(t)
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: "team/db", LeaseID: "lease-of-job-1", Holder: "job-1", TTL: 20 * time.Second,
		Metadata: []byte(`{"job": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "lease-of-job-1" || l.Key != "team/db" || l.Holder != "job-1" || l.Token == 0 ||
		l.TTLLeft <= 15*time.Second || l.TTLLeft > 20*time.Second || l.ExpiresAt.Sub(l.AcquiredAt) != 20*time.Second ||
		string(l.Metadata) != `{"job":1}` {
		t.Fatalf("lease = %+v (metadata %s); want the lease ID and the fields sent", l, l.Metadata)
	}
	direct, err := b.sqlite.Get(ctx, "team/db") // the API carries times to the millisecond
	if err != nil || direct.ID != l.ID || direct.Token != l.Token || !direct.ExpiresAt.Truncate(time.Millisecond).Equal(l.ExpiresAt) {
		t.Fatalf("the store holds %+v, %v; the client reported %+v", direct, err, l)
	}
	r, err := s.Renew(ctx, &store.RenewParams{Key: "team/db", LeaseID: l.ID, TTL: time.Minute})
	if err != nil || r.ID != l.ID || r.Token != l.Token || r.TTLLeft <= 55*time.Second {
		t.Fatalf("renew = %+v, %v", r, err)
	}
	res, err := s.Release(ctx, &store.ReleaseParams{Key: "team/db", LeaseID: l.ID})
	if err != nil || res.AlreadyReleased {
		t.Fatalf("release = %+v, %v", res, err)
	}
	res, err = s.Release(ctx, &store.ReleaseParams{Key: "team/db", LeaseID: l.ID})
	if err != nil || !res.AlreadyReleased {
		t.Fatalf("second release = %+v, %v; want AlreadyReleased", res, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "team/db", LeaseID: l.ID, TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew of a released lease: %v, want ErrNotHeld", err)
	}
}

// Keys with slashes, dots, empty segments, spaces and percent signs reach the server intact.
func TestGetEscapesKeys(t *testing.T) {
	b := newBackend(t, backendOptions{})
	s := b.open(t, client.Config{})
	ctx := testContext(t)
	keys := []string{"plain", "a/b/c", "a//b", "/lead", "trail/", "//", "/", "a/./b", "a/../b", ".", "..", "./x", "x/..",
		"sp ace/%41?#&", "ünï/cödé", "acquire", "renew", "a/acquire", "%2F", "a%2Fb", "+plus+"}
	for _, k := range keys {
		l, err := s.Acquire(ctx, &store.AcquireParams{Key: k, LeaseID: "x", Holder: "h", TTL: time.Minute})
		if err != nil {
			t.Fatalf("acquire %q: %v", k, err)
		}
		got, err := s.Get(ctx, k)
		if err != nil || got.Key != k || got.ID != l.ID {
			t.Errorf("Get(%q) = %+v, %v; want lease %s", k, got, err, l.ID)
		}
	}
	leases, err := s.List(ctx, &store.ListParams{Limit: 100})
	if err != nil || len(leases) != len(keys) {
		t.Fatalf("List = %d leases, %v; want %d", len(leases), err, len(keys))
	}
	if _, err := s.Get(ctx, "free/key"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a free key: %v, want ErrNotFound", err)
	}
}

func TestInvalidArgumentFromTheServer(t *testing.T) {
	b := newBackend(t, backendOptions{})
	ctx := testContext(t)
	// Over the raw API, as another client might send it; the store's field names come back.
	s := b.open(t, client.Config{})
	req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/locks/renew", strings.NewReader(`{"key":"k","lease_id":"x","ttl_ms":5}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("raw renew with ttl_ms 5: %d", resp.StatusCode)
	}
	// The client validates before sending: the same rule, the same field.
	_, err = s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "x", TTL: 5 * time.Millisecond})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "ttl" {
		t.Fatalf("renew with a 5ms TTL: %v, want invalid ttl", err)
	}
	// A server that finds fault the client did not: a proxy in front of a server with stricter
	// limits, say. A fake answer stands in for it.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"https://baton.dev/problems/invalid_argument","title":"Invalid argument","status":400,`+
			`"code":"invalid_argument","detail":"ttl_ms must be between 1000 and 60000","field":"ttl_ms","rule":"must be between 1000 and 60000"}`)
	}))
	defer fake.Close()
	fs, err := client.NewStore(client.Config{BaseURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	_, err = fs.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "h", TTL: time.Hour})
	if !errors.As(err, &inv) || !errors.Is(err, store.ErrInvalidArgument) || inv.Field != "ttl" || inv.Rule != "must be between 1000 and 60000" {
		t.Fatalf("server's invalid_argument: %v (%+v), want field ttl and the server's rule", err, inv)
	}
}

func TestAuthErrors(t *testing.T) {
	b := newBackend(t, backendOptions{auth: true})
	ctx := testContext(t)
	acquire := func(s *client.Store) error {
		_, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "h", TTL: time.Minute})
		return err
	}
	var pe *client.ProblemError
	err := acquire(b.open(t, client.Config{}))
	if !errors.Is(err, client.ErrUnauthorized) || !errors.As(err, &pe) || pe.Status != 401 || pe.Code != "unauthorized" {
		t.Fatalf("no token: %v, want ErrUnauthorized (401)", err)
	}
	if err := acquire(b.open(t, client.Config{Token: "guess"})); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("unknown token: %v, want ErrUnauthorized", err)
	}
	err = acquire(b.open(t, client.Config{Token: readToken}))
	if !errors.Is(err, client.ErrForbidden) || errors.Is(err, client.ErrUnauthorized) || !errors.As(err, &pe) || pe.Status != 403 {
		t.Fatalf("read token acquires: %v, want ErrForbidden (403)", err)
	}
	w := b.open(t, client.Config{Token: writeToken})
	if err := acquire(w); err != nil {
		t.Fatalf("write token: %v", err)
	}
	if _, err := w.ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "test"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("write token force-releases: %v, want ErrForbidden", err)
	}
	if _, err := b.open(t, client.Config{Token: adminToken}).ForceRelease(ctx, &store.ForceReleaseParams{Key: "k", Reason: "test"}); err != nil {
		t.Fatalf("admin token force-releases: %v", err)
	}
	if !w.Capabilities().FencingTokens {
		t.Fatal("Capabilities over an authenticated server: no fencing tokens")
	}
}

func TestServerErrorsAreTransient(t *testing.T) {
	ctx := testContext(t)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/locks/renew":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"type":"https://baton.dev/problems/unavailable","title":"Store unavailable","status":503,"code":"unavailable","detail":"the store did not answer; retry"}`)
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		}
	}))
	defer fake.Close()
	s, err := client.NewStore(client.Config{BaseURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "x", TTL: time.Second})
	var pe *client.ProblemError
	if !errors.As(err, &pe) || pe.Status != 503 || pe.Code != "unavailable" || errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("503: %v, want a *ProblemError that is not ErrNotHeld", err)
	}
	_, err = s.Get(ctx, "k")
	// The page is not dumped into the error.
	if !errors.As(err, &pe) || pe.Status != 502 || pe.Code != "" || !strings.Contains(err.Error(), "HTML page") || strings.Contains(err.Error(), "<html>") {
		t.Fatalf("502 from a proxy: %v", err)
	}
	if caps := s.Capabilities(); !caps.FencingTokens || !caps.PushWakeup {
		t.Fatalf("Capabilities without /v1/info = %+v, want the defaults", caps)
	}
	// Unreachable: a transport error, not a store error.
	fake.Close()
	_, err = s.Get(ctx, "k")
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.As(err, &pe) {
		t.Fatalf("unreachable server: %v", err)
	}
}

// A waiting Acquire is one long-poll, ended by the server as soon as another client releases the
// key: the waiter's own poll (a minute) plays no part.
func TestLongPollWokenByOtherClient(t *testing.T) {
	b := newBackend(t, backendOptions{})
	ctx := testContext(t)
	holderLocker, err := baton.NewLocker(b.open(t, client.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	waiter := &countingStore{Store: b.open(t, client.Config{})}
	waiterLocker, err := baton.NewLocker(waiter, &baton.Config{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a, err := holderLocker.TryAcquire(ctx, "push", baton.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *baton.Lease
		err   error
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiterLocker.Acquire(ctx, "push")
		got <- result{l, err, time.Now()}
	}()
	select {
	case <-b.refused: // the server's wait found the key held: the long-poll is under way
	case r := <-got:
		t.Fatalf("waiter returned before the release: %v", r.err)
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lease.Release(ctx)
	// The one long-poll was answered with the key: a refused one would have been followed by a
	// second request (the holder's lease had a minute left, the waiter's poll is an hour).
	if n := waiter.n.Load(); n != 1 {
		t.Fatalf("%d acquire requests; want the one long-poll, answered at the release", n)
	}
	t.Logf("waiter got the key %s after the release", r.at.Sub(released).Round(time.Millisecond))
	if r.lease.Token <= a.Token {
		t.Fatalf("token %d after %d", r.lease.Token, a.Token)
	}
}

// A refused long-poll wakes the Locker at once, so that it asks again (and waits on the server
// again) instead of sleeping its poll interval; and a wait with a deadline ends with the
// holder's name before the deadline, not with a bare timeout.
func TestWaitingAcquireLoopsOnLongPolls(t *testing.T) {
	b := newBackend(t, backendOptions{maxWait: 300 * time.Millisecond})
	ctx := testContext(t)
	s := b.open(t, client.Config{})
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	counted := &countingStore{Store: s}
	locker, err := baton.NewLocker(counted, &baton.Config{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// With an hour's poll, only the wake-up after each refused long-poll (the server waits at
	// most 300ms) makes a fourth request: the acquire is given up once it has.
	waitCtx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	done := make(chan error, 1)
	go func() {
		_, err := locker.Acquire(waitCtx, "k")
		done <- err
	}()
	for counted.n.Load() < 4 {
		select {
		case err := <-done:
			t.Fatalf("Acquire ended after %d requests: %v", counted.n.Load(), err)
		case <-ctx.Done():
			t.Fatalf("%d acquire requests after %s; want one long-poll after another (hung)", counted.n.Load(), hangGuard)
		case <-time.After(10 * time.Millisecond): // the request count is the signal
		}
	}
	giveUp()
	var held *store.LockHeldError
	if err := <-done; !errors.As(err, &held) || held.Holder != "job-7" || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire given up: %v; want the cancellation and the holder job-7", err)
	}
	// The wait must span at least one refused long-poll (300ms here) with room for a loaded
	// machine's scheduling: a wait that ends before any answer came knows no holder to name.
	_, err = locker.Acquire(ctx, "k", baton.WithWaitTimeout(3*time.Second))
	if !errors.As(err, &held) || held.Holder != "job-7" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its wait: %v; want the deadline and the holder job-7", err)
	}
}

type countingStore struct {
	store.Store
	n atomic.Int64
}

func (c *countingStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	c.n.Add(1)
	return c.Store.Acquire(ctx, p)
}

// Close ends a waiting Acquire's long-poll: the server would wait ten minutes, the holder's
// lease lasts an hour and the Locker's poll is an hour, so only the abort ends it.
func TestCloseAbortsLongPollAndWakesWaiters(t *testing.T) {
	b := newBackend(t, backendOptions{maxWait: 10 * time.Minute})
	ctx := testContext(t)
	holder := b.open(t, client.Config{})
	if _, err := holder.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s := b.open(t, client.Config{MaxWait: 10 * time.Minute})
	locker, err := baton.NewLocker(s, &baton.Config{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := locker.Acquire(ctx, "k")
		done <- err
	}()
	<-b.refused
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("a waiting Acquire outlived Close of its store by %s", hangGuard)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// The release answer's held_ms, where a server sends it, becomes ReleaseResult.Held.
func TestReleaseReportsHeldWhenTheServerDoes(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"released":true,"already_released":false,"held_ms":1500}`+"\n")
	}))
	defer fake.Close()
	s, err := client.NewStore(client.Config{BaseURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Release(testContext(t), &store.ReleaseParams{Key: "k", LeaseID: "x"})
	if err != nil || res.AlreadyReleased || res.Held != 1500*time.Millisecond {
		t.Fatalf("Release = %+v, %v; want Held 1.5s", res, err)
	}
}

// Every answer is read to its end, so that one connection carries call after call: the lock
// cycle's (read whole by the client) and the others' (decoded, then drained), with a token.
func TestCallsReuseTheirConnection(t *testing.T) {
	b := newBackend(t, backendOptions{auth: true})
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	defer tr.CloseIdleConnections()
	s := b.open(t, client.Config{Token: writeToken, HTTPClient: &http.Client{Transport: tr}})
	ctx := testContext(t)
	l, err := baton.NewLocker(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		lease, err := l.TryAcquire(ctx, "reuse")
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if _, err := s.Get(ctx, "reuse"); err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if _, err := s.List(ctx, &store.ListParams{Limit: 10}); err != nil {
			t.Fatalf("List %d: %v", i, err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("20 calls, one at a time, dialled %d connections; want 1", n)
	}
}

// A 404 for a path the server does not have (a wrong prefix, or not a Baton server) is
// ErrNoSuchRoute, never store.ErrNotFound; a Baton 404 about a lease stays ErrNotFound.
func TestNoSuchRouteIsNotNotFound(t *testing.T) {
	ctx := testContext(t)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/baton/v1/locks/free":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"https://baton.dev/problems/not_found","status":404,"code":"not_found","detail":"no live lease on the key"}`)
		case "/old/v1/locks/k":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"https://baton.dev/problems/not_found","status":404,"code":"not_found","detail":"no such endpoint: GET /old/v1/locks/k"}`)
		case "/new/v1/locks/k":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"https://baton.dev/problems/no_such_route","status":404,"code":"no_such_route","detail":"no such endpoint: GET /new/v1/locks/k"}`)
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "<!doctype html><html><body>page-body</body></html>")
		}
	}))
	defer fake.Close()
	get := func(prefix, key string) error {
		s, err := client.NewStore(client.Config{BaseURL: fake.URL + prefix})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Get(ctx, key)
		return err
	}
	if err := get("/baton", "free"); !errors.Is(err, store.ErrNotFound) || errors.Is(err, client.ErrNoSuchRoute) {
		t.Fatalf("Baton's not_found: %v, want store.ErrNotFound", err)
	}
	for _, prefix := range []string{"/old", "/new", "/html"} {
		err := get(prefix, "k")
		pe := &client.ProblemError{}
		if !errors.Is(err, client.ErrNoSuchRoute) || errors.Is(err, store.ErrNotFound) || !errors.As(err, &pe) ||
			pe.URL != fake.URL+prefix+"/v1/locks/k" || strings.Contains(err.Error(), "page-body") {
			t.Errorf("prefix %s: %v (URL %q), want ErrNoSuchRoute naming the URL, not ErrNotFound, no page", prefix, err, pe.URL)
		}
	}
}

// A redirect is an error naming where it pointed, and is not followed: Baton's API never
// redirects, and following one would send the request, bearer token included, there. A client
// given in Config.HTTPClient refuses them too.
func TestRedirectsAreNotFollowed(t *testing.T) {
	ctx := testContext(t)
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"lease":{"key":"k","lease_id":"x","holder":"h","token":1,"acquired_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-01T00:00:15Z","ttl_left_ms":15000}}`)
	}))
	defer other.Close()
	var status atomic.Int32
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, int(status.Load()))
	}))
	defer redirector.Close()
	for _, hc := range []*http.Client{nil, {}} {
		s, err := client.NewStore(client.Config{BaseURL: redirector.URL, Token: "go-secret-token", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		calls := map[string]func() error{
			"GET": func() error { _, err := s.Get(ctx, "team/db"); return err },
			"POST": func() error {
				_, err := s.ForceRelease(ctx, &store.ForceReleaseParams{Key: "team/db", Reason: "redirect test"})
				return err
			},
		}
		for _, code := range []int{301, 302, 303, 307, 308} {
			status.Store(int32(code))
			for method, call := range calls {
				err := call()
				pe := &client.ProblemError{}
				if !errors.As(err, &pe) || pe.Status != code || pe.Retryable() || !strings.Contains(err.Error(), "redirect") ||
					!strings.Contains(err.Error(), other.URL+"/v1/locks/") {
					t.Errorf("%d %s (own client %v): %v, want a ProblemError of status %d naming %s, not retryable",
						code, method, hc != nil, err, code, other.URL)
				}
			}
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the client followed %d redirects to another host", n)
	}
}
