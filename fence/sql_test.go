package fence_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/batonhq/baton/fence"
)

const writesDDL = `CREATE TABLE writes (seq integer PRIMARY KEY, token bigint NOT NULL, prev_max bigint NOT NULL)`

// write is one holder's write to the resource: the fence check, then a row recording its
// token and the greatest token committed before it, committed only if the check passed.
func write(t *testing.T, b *backend, token uint64) error {
	ctx := testCtx(t)
	tx, exec, commit, rollback, err := b.begin(ctx)
	if err != nil {
		return err
	}
	defer rollback()
	if err := fence.Check(ctx, tx, "res", token); err != nil {
		return err
	}
	// seq is assigned here, after the check: in commit order if the fence serialises writers.
	if err := exec(`INSERT INTO writes (seq, token, prev_max)
		SELECT COALESCE(MAX(seq), 0) + 1, $1, COALESCE(MAX(token), 0) FROM writes`, int64(token)); err != nil {
		return err
	}
	return commit()
}

// Many holders whose tokens arrive in random order (as they would when holders pause between
// their grant and their write): no write is committed after one with a greater token.
func TestConcurrentHoldersNeverCommitAStaleWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		if err := fence.Migrate(testCtx(t), b.handle); err != nil {
			t.Fatal(err)
		}
		mustExec(t, b, writesDDL)
		const n = 120
		tokens := rand.Perm(n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = write(t, b, uint64(tokens[i]+1)) })
		}
		wg.Wait()
		passed := 0
		for i, err := range errs {
			var stale *fence.StaleTokenError
			switch {
			case err == nil:
				passed++
			case errors.As(err, &stale):
				if !errors.Is(err, fence.ErrStaleToken) || stale.Token != uint64(tokens[i]+1) || stale.Current <= stale.Token || stale.Resource != "res" {
					t.Errorf("token %d: stale error %+v", tokens[i]+1, stale)
				}
			default:
				t.Errorf("token %d: %v", tokens[i]+1, err)
			}
		}
		rows, err := b.query(testCtx(t), `SELECT token, prev_max FROM writes ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != passed || passed == 0 {
			t.Fatalf("%d writes committed, %d checks passed", len(rows), passed)
		}
		prev := int64(0)
		for i, r := range rows {
			if r[0] < r[1] || r[0] <= prev {
				t.Fatalf("write %d with token %d committed after token %d (greatest before it: %d)", i, r[0], prev, r[1])
			}
			prev = r[0]
		}
		if prev != n {
			t.Errorf("greatest committed token %d, want %d (the greatest always passes)", prev, n)
		}
		t.Logf("%d of %d holders wrote; the rest were refused as stale", passed, n)
	})
}

// The failure fencing prevents, step by step: holder 1 pauses, holder 2 writes, holder 1 wakes
// and tries to write. Its write is refused and, even if it commits anyway, never lands.
func TestPausedHolderIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := testCtx(t)
		if err := fence.Migrate(ctx, b.handle); err != nil {
			t.Fatal(err)
		}
		mustExec(t, b, writesDDL)
		if err := write(t, b, 1); err != nil {
			t.Fatalf("holder 1, first write: %v", err)
		}
		if err := write(t, b, 1); err != nil {
			t.Fatalf("holder 1, second write with the same token: %v", err)
		}
		if err := write(t, b, 2); err != nil {
			t.Fatalf("holder 2: %v", err)
		}
		// Holder 1 wakes: a caller that ignores the error and commits anyway.
		tx, exec, commit, rollback, err := b.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rollback()
		_ = exec(`INSERT INTO writes (seq, token, prev_max) VALUES (100, 1, 0)`)
		err = fence.Check(ctx, tx, "res", 1)
		var stale *fence.StaleTokenError
		if !errors.As(err, &stale) || stale.Token != 1 || stale.Current != 2 {
			t.Fatalf("late holder 1: %v, want a stale token error 1 < 2", err)
		}
		if err := commit(); err == nil {
			t.Error("commit after a stale check succeeded, want it refused")
		}
		rows, err := b.query(ctx, `SELECT token, prev_max FROM writes ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || rows[2][0] != 2 {
			t.Fatalf("writes %v, want tokens 1, 1, 2 and not the late one", rows)
		}
		// Another resource is fenced on its own.
		tx2, _, commit2, rollback2, err := b.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rollback2()
		if err := fence.Check(ctx, tx2, "other", 1); err != nil {
			t.Fatalf("token 1 on another resource: %v", err)
		}
		if err := commit2(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckRejectsBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := testCtx(t)
		if err := fence.Migrate(ctx, b.handle); err != nil {
			t.Fatal(err)
		}
		tx, _, commit, rollback, err := b.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer rollback()
		for _, c := range []struct {
			resource string
			token    uint64
			field    string
		}{
			{"", 1, "resource"},
			{"a\x00b", 1, "resource"},
			{string(make([]byte, fence.MaxResourceLen+1)), 1, "resource"},
			{"r", 0, "token"},
			{"r", 1 << 63, "token"},
		} {
			err := fence.Check(ctx, tx, c.resource, c.token)
			var inv *fence.InvalidArgumentError
			if !errors.As(err, &inv) || inv.Field != c.field || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("Check(%q, %d) = %v, want an invalid %s", c.resource, c.token, err, c.field)
			}
		}
		// Bad input leaves the transaction usable.
		if err := fence.Check(ctx, tx, "r", 1); err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckRejectsOtherHandles(t *testing.T) {
	var inv *fence.InvalidArgumentError
	if err := fence.Check(t.Context(), "not a tx", "r", 1); !errors.As(err, &inv) || inv.Field != "tx" {
		t.Errorf("Check with a string: %v", err)
	}
	if err := fence.Check(t.Context(), nil, "r", 1); !errors.As(err, &inv) || inv.Field != "tx" {
		t.Errorf("Check with nil: %v", err)
	}
	if err := fence.Migrate(t.Context(), 42); !errors.As(err, &inv) || inv.Field != "db" {
		t.Errorf("Migrate with an int: %v", err)
	}
}
