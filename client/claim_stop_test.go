package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// longWait is a claim wait no test may wait out (the server's longest, longer than hangGuard): a
// worker that waited it out would hang the test until hangGuard.
const longWait = 10 * time.Minute

// stopBackend is a real server over SQLite that lets claims wait for longWait, and tells the
// test when a claim reaches it and when a claim's stop has been served.
type stopBackend struct {
	*jobBackend
	claims  chan struct{} // a claim request arrived (not blocking: buffered, extra dropped)
	stopped chan struct{} // closed once a stop request has been served
	once    sync.Once
}

func newStopBackend(t *testing.T, wrap func(*sqlite.Store) store.Store) *stopBackend {
	t.Helper()
	b := &stopBackend{claims: make(chan struct{}, 1), stopped: make(chan struct{})}
	b.jobBackend = serveStore(t, longWait, wrap, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/jobs/claim":
				select {
				case b.claims <- struct{}{}:
				default:
				}
			case "/v1/jobs/claim/stop":
				h.ServeHTTP(w, r)
				b.once.Do(func() { close(b.stopped) })
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	return b
}

// serveStore is newJobBackend with claims that may wait up to maxWait, the server's store
// wrapped by wrap and its handler by handle (each nil for none).
func serveStore(t *testing.T, maxWait time.Duration, wrap func(*sqlite.Store) store.Store, handle func(http.Handler) http.Handler) *jobBackend {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var served store.Store = st
	if wrap != nil {
		served = wrap(st)
	}
	srv, err := server.New(server.Config{Store: served, MaxWait: maxWait, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	if handle != nil {
		h = handle(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &jobBackend{url: ts.URL, sqlite: st}
}

// newLongWaitWorker is a worker whose claims over HTTP wait up to longWait in the server.
func newLongWaitWorker(t *testing.T, ctx context.Context, b *stopBackend, handle baton.Handler) *baton.Worker {
	t.Helper()
	q, err := baton.NewQueue(ctx, b.open(t, client.Config{ClaimWait: longWait}), &baton.QueueConfig{
		Kinds: []baton.Kind{{Name: "stop.work"}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The lease outlasts the wait, so that nothing but the stop ends the claim's wait early.
	w, err := q.NewWorker(baton.WorkerConfig{Name: "w", Concurrency: 1, PollInterval: longWait, LeaseTTL: 2 * longWait,
		Handlers: map[string]baton.Handler{"stop.work": handle}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runWorker runs w until runCtx ends; the channel gets Run's error.
func runWorker(w *baton.Worker, runCtx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	return done
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		t.Fatalf("%s: not in %s (hung)", what, hangGuard)
	}
}

// A worker over HTTP whose Run context ends while its claim waits in the server returns
// without waiting the wait out (ten minutes here): the worker stops the server's wait.
func TestWorkerStopsItsClaimsWaitOnShutdown(t *testing.T) {
	b := newStopBackend(t, nil)
	ctx := testContext(t)
	w := newLongWaitWorker(t, ctx, b, func(context.Context, *baton.Job) error { return nil })
	runCtx, cancelRun := context.WithCancel(ctx)
	done := runWorker(w, runCtx)
	waitFor(t, b.claims, "the worker's claim reaching the server")
	cancelRun()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v; want nil after a shutdown", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("Run still running %s after its context ended: it waits out its claim's %s wait", hangGuard, longWait)
	}
}

// claimGate holds the claim of the worker "w" that finds a job until the test opens the gate
// (or the claim's request ends), then claims for real even if the request has ended: the store
// answers a claim in the instant its wait is stopped.
type claimGate struct {
	*sqlite.Store
	armed    atomic.Bool
	claiming chan struct{} // closed when a held claim is waiting at the gate
	gate     <-chan struct{}
}

func (g *claimGate) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	if p.Worker != "w" || !g.armed.CompareAndSwap(true, false) {
		return g.Store.ClaimJobs(ctx, p)
	}
	close(g.claiming)
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return g.Store.ClaimJobs(context.WithoutCancel(ctx), p)
}

// A job the server claims for a waiting claim in the instant the worker stops that wait is
// answered to the worker and run before Run returns: the stop ends the wait, not the request,
// so no claimed job is left running with nobody to run it until its lease expires.
func TestJobClaimedAsTheWaitStopsIsRun(t *testing.T) {
	var gate *claimGate
	b := newStopBackend(t, func(st *sqlite.Store) store.Store {
		gate = &claimGate{Store: st, claiming: make(chan struct{})}
		return gate
	})
	gate.gate = b.stopped // the claim goes on once the worker's stop has been served
	ctx := testContext(t)
	ran := make(chan int64, 1)
	w := newLongWaitWorker(t, ctx, b, func(_ context.Context, j *baton.Job) error {
		ran <- j.ID
		return nil
	})
	runCtx, cancelRun := context.WithCancel(ctx)
	done := runWorker(w, runCtx)
	waitFor(t, b.claims, "the worker's claim reaching the server")
	gate.armed.Store(true)
	res, err := b.open(t, client.Config{ClaimWait: -1}).SubmitJob(ctx, &store.SubmitParams{Kind: "stop.work", Resource: "r/1"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, gate.claiming, "the waiting claim finding the job")
	cancelRun()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v; want nil after a shutdown", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("Run still running %s after its context ended", hangGuard)
	}
	select {
	case id := <-ran:
		if id != res.Job.ID {
			t.Fatalf("ran job %d; want %d", id, res.Job.ID)
		}
	default:
		t.Fatal("the job claimed as the wait stopped was not run")
	}
	j, err := b.sqlite.GetJob(ctx, res.Job.ID)
	if err != nil || j.State != store.JobSucceeded {
		t.Fatalf("job after the worker stopped: %+v, %v; want succeeded (not left running)", j, err)
	}
}
