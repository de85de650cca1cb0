package fence_test

import (
	"errors"
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
