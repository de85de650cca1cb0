package dynamodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

// TestRestartKeepsTokens restarts dynalite on its data directory between grants: the fencing
// counter lives on the key's item (a tombstone after a release), so tokens keep increasing
// across restarts, and a lease held across a restart is still held afterwards.
func TestRestartKeepsTokens(t *testing.T) {
	d := dynalitetest.Start(t)
	table := freshTable()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last uint64
	for round := range 3 {
		s := openTest(t, d.Endpoint(), table)
		for i := range 3 {
			id := newRVN()
			l, err := s.Acquire(ctx, &store.AcquireParams{Key: "restart", LeaseID: id, Holder: "h", TTL: time.Minute})
			if err != nil {
				t.Fatalf("round %d grant %d: %v", round, i, err)
			}
			if l.Token <= last {
				t.Fatalf("round %d grant %d: token %d after %d", round, i, l.Token, last)
			}
			last = l.Token
			if _, err := s.Release(ctx, &store.ReleaseParams{Key: "restart", LeaseID: id}); err != nil {
				t.Fatal(err)
			}
		}
		// A lease held across the restart.
		held, err := s.Acquire(ctx, &store.AcquireParams{Key: "held", LeaseID: newRVN(), Holder: "across", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		d.Stop()
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, d.Endpoint(), table)
		got, err := s.Get(ctx, "held")
		if err != nil || got.ID != held.ID || got.Token != held.Token {
			t.Fatalf("after restart %d: Get(held) = %+v, %v; want lease %s", round, got, err, held.ID)
		}
		var heldErr *store.LockHeldError
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "held", LeaseID: newRVN(), Holder: "other", TTL: time.Minute}); !errors.As(err, &heldErr) {
			t.Fatalf("after restart %d: another holder got the held key: %v", round, err)
		}
		if _, err := s.Release(ctx, &store.ReleaseParams{Key: "held", LeaseID: held.ID}); err != nil {
			t.Fatalf("after restart %d: release of the lease held across it: %v", round, err)
		}
	}
	if last < 9 {
		t.Fatalf("last token %d after 9 grants", last)
	}
}
