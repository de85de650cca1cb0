package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonhq/baton/fence"
)

// modeSteps is one resource's history of calls in both modes, with what the fence must answer:
// a shared call is judged against the greatest exclusive token only, an exclusive call against
// the greatest token of either mode.
var modeSteps = []struct {
	mode  fence.Mode
	token uint64
	ok    bool
	cur   uint64 // Current of the stale error
}{
	{fence.Shared, 5, true, 0},
	{fence.Shared, 3, true, 0},     // shared tokens interleave: a greater shared one is no reason
	{fence.Exclusive, 4, false, 5}, // an exclusive holder older than a shared one that wrote
	{fence.Exclusive, 6, true, 0},
	{fence.Shared, 5, false, 6}, // a shared holder older than an exclusive one that wrote
	{fence.Shared, 8, true, 0},
	{fence.Shared, 6, true, 0}, // equal to the greatest exclusive token
	{fence.Exclusive, 7, false, 8},
	{fence.Exclusive, 9, true, 0},
	{fence.Shared, 8, false, 9},
	{fence.Exclusive, 9, true, 0}, // the same holder again
	{fence.Shared, 10, true, 0},
	{fence.Shared, 10, true, 0}, // the same holder again
}

func judgeStep(t *testing.T, i int, err error) {
	t.Helper()
	s := modeSteps[i]
	var stale *fence.StaleTokenError
	switch {
	case s.ok && err != nil:
		t.Fatalf("step %d, %s token %d: %v, want admitted", i, s.mode, s.token, err)
	case !s.ok && !errors.As(err, &stale):
		t.Fatalf("step %d, %s token %d: %v, want a stale token error", i, s.mode, s.token, err)
	case !s.ok && (stale.Token != s.token || stale.Current != s.cur):
		t.Fatalf("step %d, %s token %d: %+v, want current %d", i, s.mode, s.token, stale, s.cur)
	}
}

func TestEnterModeRules(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)().(fence.ModeStore)
			for i, s := range modeSteps {
				release, err := st.EnterMode(testCtx(t), "res", s.token, s.mode)
				judgeStep(t, i, err)
				if err == nil {
					release()
				}
			}
		})
	}
}

func TestCheckModeRules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := testCtx(t)
		if err := fence.Migrate(ctx, b.handle); err != nil {
			t.Fatal(err)
		}
		for i, s := range modeSteps {
			tx, _, commit, rollback, err := b.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = fence.CheckMode(ctx, tx, "res", s.token, s.mode)
			if err == nil {
				err = commit()
			}
			rollback()
			judgeStep(t, i, err)
		}
	})
}

// A fence table created before the mode columns: exclusive checks run on it as they are, and
// Migrate adds the columns, after which the rows written before count as exclusive marks.
func TestMigrateAddsTheModeColumns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := testCtx(t)
		mustExec(t, b, `CREATE TABLE baton_fences (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))`)
		check := func(token uint64, mode fence.Mode) error {
			tx, _, commit, rollback, err := b.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer rollback()
			if err := fence.CheckMode(ctx, tx, "res", token, mode); err != nil {
				return err
			}
			return commit()
		}
		if err := check(10, fence.Exclusive); err != nil {
			t.Fatalf("exclusive check on the table without the mode columns: %v", err)
		}
		for range 2 { // Migrate is safe to run again
			if err := fence.Migrate(ctx, b.handle); err != nil {
				t.Fatal(err)
			}
		}
		if err := check(9, fence.Shared); !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("shared token 9 after exclusive token 10 written before the migration: %v, want stale", err)
		}
		if err := check(12, fence.Shared); err != nil {
			t.Fatal(err)
		}
		if err := check(11, fence.Shared); err != nil {
			t.Fatalf("shared token 11 after shared token 12 and exclusive token 10: %v", err)
		}
		if err := check(11, fence.Exclusive); !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("exclusive token 11 after shared token 12: %v, want stale", err)
		}
	})
}

// Shared holders are admitted together; an exclusive one waits until they have all left, and
// (memory store) shared holders that come while it waits wait behind it. SQLite runs shared
// holders one at a time (a database lock), so it is not judged here.
func TestSharedHoldersTogether(t *testing.T) {
	for name, open := range stores(t) {
		if name == "sqlite" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := open(t)
			st := newStore().(fence.ModeStore)
			ctx := testCtx(t)
			r1, err := st.EnterMode(ctx, "res", 1, fence.Shared)
			if err != nil {
				t.Fatal(err)
			}
			// Admitted beside the first (a store that made it wait hangs here until the guard).
			r2, err := newStore().(fence.ModeStore).EnterMode(ctx, "res", 2, fence.Shared)
			if err != nil {
				t.Fatal(err)
			}
			var left atomic.Int32 // shared holders that have left
			exclusiveIn := make(chan int32, 1)
			go func() {
				release, err := newStore().(fence.ModeStore).EnterMode(ctx, "res", 3, fence.Exclusive)
				if err != nil {
					t.Error(err)
					exclusiveIn <- -1
					return
				}
				exclusiveIn <- left.Load()
				release()
			}()
			waitWaiting(t, name, st, holdExclusiveQuery, exclusiveIn)
			late := make(chan int32, 1)
			if name == "memory" {
				go func() { // a later shared holder: behind the waiting exclusive one
					release, err := st.EnterMode(ctx, "res", 4, fence.Shared)
					if err != nil {
						t.Error(err)
						late <- -1
						return
					}
					late <- left.Load()
					release()
				}()
				for len(late) == 0 && fence.MemoryWaiters(st.(*fence.MemoryStore), "res") < 2 {
					runtime.Gosched()
				}
			}
			left.Add(1)
			r1()
			left.Add(1)
			r2()
			if n := <-exclusiveIn; n != 2 {
				t.Fatalf("the exclusive holder was admitted when %d of 2 shared holders had left", n)
			}
			if name == "memory" {
				if n := <-late; n != 2 {
					t.Fatalf("a shared holder that came while an exclusive one waited went first")
				}
			}
		})
	}
}

// The statements a holder waits in on PostgreSQL: an exclusive one's hold, a shared one's raise.
const (
	holdExclusiveQuery = `%FROM baton_fences WHERE resource = $1 FOR UPDATE`
	raiseSharedQuery   = `INSERT INTO baton_fences (resource, token, shared_token, exclusive_token)%`
)

// waitWaiting waits until a holder waits to enter (a waiter in the memory store; on
// PostgreSQL, a backend waiting for a lock in a statement like query) or was admitted (in).
func waitWaiting(t *testing.T, name string, st fence.ModeStore, query string, in chan int32) {
	if name == "memory" {
		for len(in) == 0 && fence.MemoryWaiters(st.(*fence.MemoryStore), "res") < 1 {
			runtime.Gosched()
		}
		return
	}
	db, err := sql.Open("pgx", pgDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for {
		var n int
		err := db.QueryRowContext(testCtx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE $1`, query).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 || len(in) > 0 {
			return
		}
		runtime.Gosched()
	}
}

// A shared holder that comes while an exclusive one is admitted waits until it has left.
// (SQLite: every holder waits for the database's lock; not judged here.)
func TestSharedWaitsForExclusive(t *testing.T) {
	for name, open := range stores(t) {
		if name == "sqlite" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := open(t)
			st := newStore().(fence.ModeStore)
			ctx := testCtx(t)
			release, err := st.EnterMode(ctx, "res", 1, fence.Exclusive)
			if err != nil {
				t.Fatal(err)
			}
			var left atomic.Int32
			in := make(chan int32, 1)
			go func() {
				r, err := newStore().(fence.ModeStore).EnterMode(ctx, "res", 2, fence.Shared)
				if err != nil {
					t.Error(err)
					in <- -1
					return
				}
				in <- left.Load()
				r()
			}()
			waitWaiting(t, name, st, raiseSharedQuery, in)
			left.Add(1)
			release()
			if n := <-in; n != 1 {
				t.Fatal("a shared holder was admitted beside an exclusive one")
			}
		})
	}
}

// modeResource records the holders inside the handler per mode, and any exclusive call that
// overlapped another call, or any shared call that overlapped an exclusive one; and the
// tokens it accepted, in order, with their modes.
type modeResource struct {
	readers, writers atomic.Int32
	bad              atomic.Int32
	mu               sync.Mutex
	accepted         []modeCall
}

type modeCall struct {
	mode  fence.Mode
	token uint64
}

func (m *modeResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var tok uint64
	fmt.Sscan(r.Header.Get(fence.TokenHeader), &tok)
	mode := fence.Exclusive
	if r.Header.Get(fence.ModeHeader) == "shared" {
		mode = fence.Shared
	}
	if mode == fence.Shared {
		if m.readers.Add(1); m.writers.Load() != 0 {
			m.bad.Add(1)
		}
	} else if m.writers.Add(1) != 1 || m.readers.Load() != 0 {
		m.bad.Add(1)
	}
	m.mu.Lock()
	m.accepted = append(m.accepted, modeCall{mode, tok})
	m.mu.Unlock()
	for range 50 {
		runtime.Gosched()
	}
	if mode == fence.Shared {
		m.readers.Add(-1)
	} else {
		m.writers.Add(-1)
	}
	w.WriteHeader(http.StatusNoContent)
}

// Holders of both modes, with tokens in shuffled order, through two middleware instances sharing
// the store: no exclusive call overlaps another call, and in the order of admission every
// exclusive token is at least every token before it, and every shared token at least every
// exclusive token before it.
func TestMiddlewareConcurrentModes(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := open(t)
			mr := &modeResource{}
			a := httptest.NewServer(fence.Middleware(newStore(), mr))
			defer a.Close()
			b := httptest.NewServer(fence.Middleware(newStore(), mr))
			defer b.Close()
			// Waves of 8 concurrent holders, each wave's tokens above the last's and shuffled
			// within it, as holders granted one after another reach the resource: most pass,
			// some do not.
			const n, wave = 80, 8
			tokens := make([]int, n)
			statuses := make([]int, n)
			for w := 0; w < n; w += wave {
				var wg sync.WaitGroup
				for k, p := range rand.Perm(wave) {
					i := w + k
					tokens[i] = w + p
					url := a.URL
					if i%2 == 1 {
						url = b.URL
					}
					mode := fence.Exclusive
					if tokens[i]%3 != 0 {
						mode = fence.Shared
					}
					wg.Go(func() { statuses[i] = sendMode(t, url, uint64(tokens[i]+1), mode) })
				}
				wg.Wait()
			}
			for i, s := range statuses {
				if s != 204 && s != 409 {
					t.Errorf("token %d: status %d", tokens[i]+1, s)
				}
			}
			if o := mr.bad.Load(); o != 0 {
				t.Errorf("%d calls overlapped an exclusive one", o)
			}
			var either, exclusive uint64
			shared := 0
			for _, c := range mr.accepted {
				if c.mode == fence.Exclusive && c.token < either || c.mode == fence.Shared && c.token < exclusive {
					t.Fatalf("%s token %d admitted after token %d (exclusive %d): %v", c.mode, c.token, either, exclusive, mr.accepted)
				}
				either = max(either, c.token)
				if c.mode == fence.Exclusive {
					exclusive = c.token
				} else {
					shared++
				}
			}
			if shared < 2 {
				t.Errorf("only %d shared calls admitted of %d", shared, len(mr.accepted))
			}
		})
	}
}

func sendMode(t *testing.T, url string, token uint64, mode fence.Mode) int {
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader("data"))
	if err != nil {
		t.Error(err)
		return 0
	}
	fence.HeaderMode(req, "res", token, mode)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The mode header: "shared", "exclusive" or absent; anything else is a 400 naming it, and a
// store that cannot admit shared holders answers a shared call 501.
func TestMiddlewareModeHeader(t *testing.T) {
	srv := httptest.NewServer(fence.Middleware(fence.NewMemoryStore(), newResourceServer()))
	defer srv.Close()
	for _, c := range []struct {
		mode   string
		status int
	}{{"shared", 204}, {"exclusive", 204}, {"", 204}, {"Shared", 400}, {"read", 400}} {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, srv.URL, nil)
		fence.Header(req, "res", 1)
		if c.mode != "" {
			req.Header.Set(fence.ModeHeader, c.mode)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("mode %q: %d, want %d", c.mode, resp.StatusCode, c.status)
		}
	}
	plain := httptest.NewServer(fence.Middleware(exclusiveOnly{fence.NewMemoryStore()}, newResourceServer()))
	defer plain.Close()
	for mode, want := range map[fence.Mode]int{fence.Shared: 501, fence.Exclusive: 204} {
		if got := sendMode(t, plain.URL, 1, mode); got != want {
			t.Errorf("%s call to a store without modes: %d, want %d", mode, got, want)
		}
	}
}

// exclusiveOnly is a Store that is not a ModeStore, as one written before modes.
type exclusiveOnly struct{ s fence.Store }

func (e exclusiveOnly) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	return e.s.Enter(ctx, resource, token)
}

func TestHeaderFromEnvMode(t *testing.T) {
	t.Setenv("BATON_FENCING_TOKEN", "7")
	t.Setenv("BATON_LOCK_KEY", "k")
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	t.Setenv("BATON_FENCING_MODE", "shared")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ModeHeader) != "shared" {
		t.Errorf("shared: %v %v", err, req.Header)
	}
	t.Setenv("BATON_FENCING_MODE", "")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ModeHeader) != "" {
		t.Errorf("unset: %v %v, want no mode header", err, req.Header)
	}
	t.Setenv("BATON_FENCING_MODE", "sharde")
	var inv *fence.InvalidArgumentError
	if err := fence.HeaderFromEnv(req, ""); !errors.As(err, &inv) || inv.Field != "BATON_FENCING_MODE" {
		t.Errorf("a misspelt mode: %v", err)
	}
}
