package fence_test

import (
	"database/sql"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/batonhq/baton/fence"
)

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
