package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Run runs the whole suite. Heavy concurrency cases run first, one at a time; the cases that
// mostly wait on TTLs then run in parallel.
func Run(t *testing.T, h Harness) {
	serial := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"TokenRealTimeOrder", testTokenRealTimeOrder},
		{"HistoryLinearizable", testHistoryLinearizable},
		{"SharedAndExclusive", testSharedAndExclusive},
		{"LimitCapacity", testLimitCapacity},
		{"SeveralResources", testSeveralResources},
		{"TreeConcurrent", testTreeConcurrent},
	}
	for _, c := range serial {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
	parallel := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"TokensIncreaseAcrossHandovers", testTokensAcrossHandovers},
		{"ExpiryDecidedByStore", testExpiry},
		{"ReleaseByOtherIDChangesNothing", testReleaseByOtherID},
		{"ReleaseTwiceIsHarmless", testReleaseTwice},
		{"KeepaliveOutlivesTTL", testKeepalive},
		{"RenewMany", testRenewMany},
		{"RenewConcurrent", testRenewConcurrent},
		{"KeepaliveStoreClosedCancelsBeforeTTL", testKeepaliveStoreClosed},
		{"KeepaliveRowDeletedCancels", testKeepaliveRowDeleted},
		{"WaiterWokenByPush", testWaiterPush},
		{"WaiterWokenByPushFromOtherStore", testWaiterPushOtherStore},
		{"WaitTimeoutNamesHolder", testWaitTimeout},
		{"IdempotentReacquire", testIdempotentReacquire},
		{"OwnerKeepsLease", testOwnerKeepsLease},
		{"ReleaseOutcomeUnknown", testReleaseOutcomeUnknown},
		{"Cooldown", testCooldown},
		{"LockDelayAfterExpiry", testLockDelayAfterExpiry},
		{"LockDelayAfterForceRelease", testLockDelayAfterForceRelease},
		{"ClearRest", testClearRest},
		{"MetadataRoundTrip", testMetadata},
		{"ListPrefixHolderPaging", testList},
		{"ListPrefixEdges", testListPrefixEdges},
		{"ForceRelease", testForceRelease},
		{"WithLock", testWithLock},
		{"WithLockReportsLoss", testWithLockLoss},
		{"InvalidArguments", testInvalidArguments},
		{"ClosedStore", testClosedStore},
		{"AuditTrail", testAuditTrail},
		{"AuditRegrantSameLeaseID", testAuditRegrantSameLeaseID},
		{"AuditPrincipal", testAuditPrincipal},
		{"AuditTickets", testAuditTickets},
		{"Fences", testFences},
		{"FencesRefuseUnissuedTokens", testFenceUnissuedTokens},
		{"FenceReset", testFenceReset},
		{"SharedWaitsBehindExclusive", testSharedWaitsBehindExclusive},
		{"SeveralResourcesAllOrNothing", testSeveralResourcesAllOrNothing},
		{"LimitLowered", testLimitLowered},
		{"BeyondBadInput", testBeyondBadInput},
		{"HoldsAreNobodysLease", testHoldsAreNobodysLease},
		{"LimitUnitExpires", testLimitUnitExpires},
		{"LimitSlots", testLimitSlots},
		{"ForceReleaseEndsHolds", testForceReleaseEndsHolds},
		{"BeyondUnsupported", testBeyondUnsupported},
		{"TreeMatrix", testTreeMatrix},
		{"TreeFIFO", testTreeFIFO},
		{"TreeWake", testTreeWake},
		{"TreeRest", testTreeRest},
		{"TreeValidation", testTreeValidation},
		{"TreeInUse", testTreeInUse},
		{"TreeSetByAnotherStore", testTreeSetByAnotherStore},
	}
	for _, c := range parallel {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// env is one test's backend, store and locker.
type env struct {
	t       *testing.T
	backend Backend
	store   store.Store
	locker  *baton.Locker
	ctx     context.Context
	// holdFor is how long the beyond-one cases hold each lease, plus up to 300 µs.
	holdFor time.Duration
}

func newEnv(t *testing.T, h Harness, cfg *baton.Config) *env {
	t.Helper()
	b := h.NewBackend(t)
	s := b.Open(t)
	l, err := baton.NewLocker(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, backend: b, store: s, locker: l, ctx: ctx}
}

func (e *env) acquire(key string, opts ...baton.Option) *baton.Lease {
	e.t.Helper()
	l, err := e.locker.TryAcquire(e.ctx, key, opts...)
	if err != nil {
		e.t.Fatalf("TryAcquire(%q): %v", key, err)
	}
	e.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// waitDone waits for a lease's context to end, failing the test after limit.
func waitDone(t *testing.T, l *baton.Lease, limit time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("lease %s on %q still live after %s", l.ID, l.Key, limit)
		return time.Time{}
	}
}

func requireNotApplicable(t *testing.T, ok bool, why string) {
	t.Helper()
	if !ok {
		t.Skip("not applicable: " + why)
	}
}
