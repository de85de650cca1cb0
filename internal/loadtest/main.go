// Command loadtest is Baton's bounded load test (make loadtest): it starts a server on loopback
// over a fresh SQLite file or PostgreSQL schema, drives it through the Go client in the same
// process, and prints what an operator sizing a server needs to know:
//
//   - held: N leases held with keepalive (TTL 15 s, renewed every 5 s) for a while: how many
//     were lost, the renewal latency, renewals refused.
//   - waiters: W goroutines looping on waiting acquires of K keys, holding each grant 10-50 ms:
//     grants/s, handoff latency (release to the next grant of the key), waits that ran out
//     (409), 503s by code, and ERROR lines the server logged.
//
// Everything runs on this machine's cores: the figures are a floor for a dedicated server.
//
//	go run ./internal/loadtest -store sqlite -scenario held -held 10000 -duration 30s
//	go run ./internal/loadtest -store postgres -scenario waiters -waiters 2000 -keys 50
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/storeurl"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

type flags struct {
	store, scenario, pgDSN      string
	held, waiters, keys, concur int
	clients                     int
	duration, waitTimeout, ttl  time.Duration
	maxInflight, maxQueue       int
	maxQueueWait                time.Duration
	limit                       time.Duration
}

func main() {
	var f flags
	flag.StringVar(&f.store, "store", "sqlite", "sqlite or postgres")
	flag.StringVar(&f.scenario, "scenario", "held", "held, waiters, cycles or hammer")
	flag.StringVar(&f.pgDSN, "pg", envOr("BATON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN (a fresh schema is created and dropped)")
	flag.IntVar(&f.held, "held", 10000, "held: leases to hold")
	flag.IntVar(&f.concur, "concurrency", 64, "held: concurrent acquires while taking the leases")
	flag.DurationVar(&f.ttl, "ttl", 15*time.Second, "held: lease TTL (keepalive renews every TTL/3)")
	flag.IntVar(&f.waiters, "waiters", 2000, "waiters: goroutines looping on waiting acquires")
	flag.IntVar(&f.keys, "keys", 50, "waiters: keys they share")
	flag.IntVar(&f.clients, "clients", 64, "cycles, hammer: concurrent clients")
	flag.DurationVar(&f.waitTimeout, "wait", 2*time.Second, "waiters: wait timeout of each acquire")
	flag.DurationVar(&f.duration, "duration", 30*time.Second, "how long to measure (after the leases are taken)")
	flag.IntVar(&f.maxInflight, "max-inflight", 0, "server --max-inflight (0: default)")
	flag.IntVar(&f.maxQueue, "max-queue", 0, "server --max-queue (0: default)")
	flag.DurationVar(&f.maxQueueWait, "max-queue-wait", 0, "server --max-queue-wait (0: default; negative: none)")
	flag.DurationVar(&f.limit, "limit", 60*time.Second, "hard bound of the whole run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
	}
	err := run(f)
	pprof.StopCPUProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
	// Leases still held die with the process (the store expires them); nothing to wait for.
	os.Exit(0)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// errorCounter counts the server's log lines at ERROR.
type errorCounter struct{ n atomic.Int64 }

func (c *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (c *errorCounter) Handle(context.Context, slog.Record) error    { c.n.Add(1); return nil }
func (c *errorCounter) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *errorCounter) WithGroup(string) slog.Handler                { return c }

func run(f flags) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.limit)
	defer cancel()
	var url string
	switch f.store {
	case "sqlite":
		dir, err := os.MkdirTemp("", "baton-load")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url = "sqlite://" + filepath.Join(dir, "baton.db")
	case "postgres":
		b := make([]byte, 6)
		_, _ = crand.Read(b)
		schema := "baton_load_" + hex.EncodeToString(b)
		sep := "?"
		if strings.Contains(f.pgDSN, "?") {
			sep = "&"
		}
		url = f.pgDSN + sep + "baton_schema=" + schema
		defer dropSchema(f.pgDSN, schema)
	default:
		return fmt.Errorf("unknown store %q", f.store)
	}
	st, name, err := storeurl.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	errs := &errorCounter{}
	srv, err := server.New(server.Config{Store: st, Logger: slog.New(errs), MaxInflight: f.maxInflight, MaxQueue: f.maxQueue, MaxQueueWait: f.maxQueueWait})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 8192, 8192
	// Both ends of every connection are in this process: stay well under its file limit.
	t.MaxConnsPerHost = 6000
	cl, err := client.NewStore(client.Config{BaseURL: "http://" + ln.Addr().String(), HTTPClient: &http.Client{Transport: t}})
	if err != nil {
		return err
	}
	defer cl.Close()
	cs := &countingStore{Store: cl}
	locker, err := baton.NewLocker(cs, &baton.Config{Logger: quietLog()})
	if err != nil {
		return err
	}
	inflight := "default (twice the store's connections, 8 to 64)"
	if f.maxInflight != 0 {
		inflight = fmt.Sprint(f.maxInflight)
	}
	fmt.Printf("store %s, server max-inflight %s, max-queue %d, max-queue-wait %s, GOMAXPROCS %d\n", name,
		inflight, or(f.maxQueue, server.DefaultMaxQueue), orDur(f.maxQueueWait, server.DefaultMaxQueueWait), runtime.GOMAXPROCS(0))
	switch f.scenario {
	case "held":
		err = held(ctx, f, locker, cs)
	case "waiters":
		err = waiters(ctx, f, locker, cs)
	case "cycles":
		err = cycles(ctx, f, locker, st)
	case "hammer":
		err = hammer(ctx, f, locker)
	default:
		err = fmt.Errorf("unknown scenario %q", f.scenario)
	}
	fmt.Printf("  server ERROR log lines: %d\n", errs.n.Load())
	return err
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func dropSchema(dsn, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: dropping schema:", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: dropping schema:", err)
	}
}

// countingStore times renewals and counts the answers of every HTTP call the Locker makes.
type countingStore struct {
	store.Store
	mu        sync.Mutex
	renewDur  []time.Duration
	acquires  atomic.Int64
	held409   atomic.Int64
	renewErrs atomic.Int64
	// firstRenewErr is the first renewal error's text, for the report.
	firstRenewErr atomic.Value
	overload      atomic.Int64 // 503 overloaded
	unavail       atomic.Int64 // other 5xx
	other         atomic.Int64
}

func (c *countingStore) classify(err error) {
	var pe *client.ProblemError
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLockHeld), errors.Is(err, store.ErrResting):
		c.held409.Add(1)
	case errors.As(err, &pe) && pe.Code == "overloaded":
		c.overload.Add(1)
	case errors.As(err, &pe) && pe.Status >= 500:
		c.unavail.Add(1)
	default:
		c.other.Add(1)
	}
}

func (c *countingStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	c.acquires.Add(1)
	l, err := c.Store.Acquire(ctx, p)
	c.classify(err)
	return l, err
}

func (c *countingStore) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	start := time.Now()
	l, err := c.Store.Renew(ctx, p)
	d := time.Since(start)
	if err != nil {
		if c.renewErrs.Add(1) == 1 {
			c.firstRenewErr.Store(fmt.Sprintf("%v (after %s)", err, d.Round(time.Millisecond)))
		}
		c.classify(err)
	}
	c.mu.Lock()
	c.renewDur = append(c.renewDur, d)
	c.mu.Unlock()
	return l, err
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func held(ctx context.Context, f flags, locker *baton.Locker, cs *countingStore) error {
	var lost, gaveUp atomic.Int64
	leases := make([]*baton.Lease, f.held)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range f.concur {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= f.held || ctx.Err() != nil {
					return
				}
				l, err := locker.Acquire(ctx, fmt.Sprintf("held/%06d", i), baton.WithTTL(f.ttl), baton.WithWaitTimeout(10*time.Second))
				for err != nil && ctx.Err() == nil {
					// A saturated store serves renewals first: new acquires may wait out their
					// timeout. Count and ask again.
					gaveUp.Add(1)
					l, err = locker.Acquire(ctx, fmt.Sprintf("held/%06d", i), baton.WithTTL(f.ttl), baton.WithWaitTimeout(10*time.Second))
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				leases[i] = l
				context.AfterFunc(l.Context(), func() { lost.Add(1) })
			}
		}()
	}
	progress := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-progress:
				return
			case <-tick.C:
				fmt.Printf("  … %s: %d taken, %d lost so far\n", time.Since(start).Round(time.Second), min(int(next.Load()), f.held), lost.Load())
			}
		}
	}()
	wg.Wait()
	close(progress)
	if firstErr != nil {
		return fmt.Errorf("taking the leases: %w", firstErr)
	}
	ramp := time.Since(start)
	fmt.Printf("held: %d leases taken in %s (%.0f acquires/s; %d acquires gave up after 10 s and were asked again), TTL %s\n",
		f.held, ramp.Round(time.Millisecond), float64(f.held)/ramp.Seconds(), gaveUp.Load(), f.ttl)
	cs.mu.Lock()
	cs.renewDur = cs.renewDur[:0]
	cs.mu.Unlock()
	window := f.duration
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)-2*time.Second < window {
		// Taking the leases ate into the run's bound: measure what is left of it.
		window = max(time.Until(dl)-2*time.Second, 0)
	}
	select {
	case <-time.After(window):
	case <-ctx.Done():
	}
	cs.mu.Lock()
	d := slices.Clone(cs.renewDur)
	cs.mu.Unlock()
	fmt.Printf("  after %s: held %d, lost %d; renewals %d (%.0f/s), p50 %s, p99 %s, max %s; renew errors %d (503 overloaded %d, other 5xx %d)\n",
		window.Round(time.Second), int64(f.held)-lost.Load(), lost.Load(), len(d), float64(len(d))/max(window.Seconds(), 1e-3),
		ms(pct(d, 0.5)), ms(pct(d, 0.99)), ms(pct(d, 1)), cs.renewErrs.Load(), cs.overload.Load(), cs.unavail.Load())
	if e, ok := cs.firstRenewErr.Load().(string); ok {
		fmt.Printf("  first renewal error: %s\n", e)
	}
	return nil
}

func waiters(ctx context.Context, f flags, locker *baton.Locker, cs *countingStore) error {
	var mu sync.Mutex
	lastRelease := make(map[string]time.Time)
	var handoffs []time.Duration
	var grants, ranOut, failed atomic.Int64
	runCtx, stop := context.WithTimeout(ctx, f.duration)
	defer stop()
	var wg sync.WaitGroup
	start := time.Now()
	for range f.waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				key := fmt.Sprintf("w/%03d", rand.IntN(f.keys))
				asked := time.Now()
				l, err := locker.Acquire(runCtx, key, baton.WithWaitTimeout(f.waitTimeout), baton.WithTTL(15*time.Second))
				if err != nil {
					switch {
					case runCtx.Err() != nil:
					case errors.Is(err, baton.ErrLockHeld), errors.Is(err, baton.ErrResting):
						ranOut.Add(1)
					default:
						failed.Add(1)
					}
					continue
				}
				got := time.Now()
				grants.Add(1)
				mu.Lock()
				if rel, ok := lastRelease[key]; ok && rel.After(asked) {
					handoffs = append(handoffs, got.Sub(rel))
				}
				mu.Unlock()
				time.Sleep(time.Duration(10+rand.IntN(41)) * time.Millisecond) // the work under the lease
				mu.Lock()
				lastRelease[key] = time.Now()
				mu.Unlock()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 10*time.Second)
				_ = l.Release(rctx)
				cancel()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("waiters: %d on %d keys, wait %s, hold 10-50 ms, %s\n", f.waiters, f.keys, f.waitTimeout, el.Round(time.Millisecond))
	fmt.Printf("  grants %d (%.0f/s), handoff p50 %s p99 %s; waits ran out (409) %d, failed %d; HTTP acquires %d: 409 %d, 503 overloaded %d, other 5xx %d\n",
		grants.Load(), float64(grants.Load())/el.Seconds(), ms(pct(handoffs, 0.5)), ms(pct(handoffs, 0.99)),
		ranOut.Load(), failed.Load(), cs.acquires.Load(), cs.held409.Load(), cs.overload.Load(), cs.unavail.Load())
	return nil
}
