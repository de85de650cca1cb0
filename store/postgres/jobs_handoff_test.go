package postgres_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// A completion that claims in the same round trip starts the completed job's successor with its
// promotion (one write of the successor's row, not two): the successor goes to this worker ahead of an
// older head of equal priority on another resource (which the next claim takes).
func TestCompleteAndClaimStartsTheSuccessor(t *testing.T) {
	s := jobStore(t, store.Kind{Name: "k"})
	ctx := testCtx(t)
	first := submit(t, s, "k", "a")
	running := claim(t, s, 1, "k")
	older := submit(t, s, "k", "b") // a head, older than the successor
	next := submit(t, s, "k", "a")
	if len(running) != 1 || running[0].ID != first.ID {
		t.Fatalf("claimed %v; want job %d", running, first.ID)
	}
	_, claimed, err := s.CompleteJobsAndClaim(ctx, []*store.CompleteParams{{ID: first.ID, Token: running[0].Token}},
		&store.ClaimParams{Worker: "w2", Kinds: []string{"k"}, Limit: 1, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != next.ID || claimed[0].State != store.JobRunning || !claimed[0].Head {
		t.Fatalf("claimed %v; want the successor %d started with its promotion", claimed, next.ID)
	}
	if got := claim(t, s, 5, "k"); len(got) != 1 || got[0].ID != older.ID {
		t.Fatalf("next claim %v; want the older head %d", got, older.ID)
	}
}
