package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Every grant, release, expiry takeover and force-release is in the audit log, in order, with
// who and why; renewals, refusals and bad input are not.
func testAuditTrail(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().Audit, "the store was opened without audit")
	const key = "audit"
	a := e.acquire(key, baton.WithHolder("job-1"), baton.WithKeepalive(false))
	if err := a.Renew(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.locker.TryAcquire(e.ctx, key, baton.WithHolder("job-2")); err == nil {
		t.Fatal("acquired a held key")
	}
	if err := a.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	b := e.acquire(key, baton.WithHolder("job-2"), baton.WithTTL(time.Second), baton.WithKeepalive(false))
	c, err := e.locker.Acquire(e.ctx, key, baton.WithHolder("job-3"), baton.WithWaitTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ForceRelease(e.ctx, &store.ForceReleaseParams{Key: key, Reason: "wedged", Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	_ = c.Release(context.Background())
	_, _ = e.locker.TryAcquire(e.ctx, "\x00bad")
	e.acquire("other-key")

	events, err := e.store.Events(e.ctx, &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ kind, holder, actor, reason string }
	want := []row{
		{store.EventAcquire, "job-1", "job-1", ""},
		{store.EventRelease, "job-1", "job-1", ""},
		{store.EventAcquire, "job-2", "job-2", ""},
		{store.EventExpiryTakeover, "job-3", "job-3", ""},
		{store.EventForceRelease, "job-3", "ops", "wedged"},
	}
	tokens := []uint64{a.Token, a.Token, b.Token, c.Token, c.Token}
	if e.store.Capabilities().Line {
		// job-3 waited: its ticket joined the line before its grant.
		want = slices.Insert(want, 3, row{store.EventTicketEnqueue, "job-3", "job-3", ""})
		tokens = slices.Insert(tokens, 3, 0)
	}
	var got []row
	for _, ev := range events {
		got = append(got, row{ev.Kind, ev.Holder, ev.Actor, ev.Reason})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log of %q:\n got %v\nwant %v", key, got, want)
	}
	for i, ev := range events {
		if ev.Key != key || ev.Token != tokens[i] || ev.LeaseID == "" || ev.At.IsZero() || (i > 0 && ev.ID <= events[i-1].ID) {
			t.Fatalf("event %d = %+v; want key %q, token %d, increasing IDs", i, ev, key, tokens[i])
		}
	}
	// Paging and the unfiltered log.
	page, err := e.store.Events(e.ctx, &store.EventsParams{Key: key, After: events[1].ID, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != events[2].ID {
		t.Fatalf("page after %d = %v, %v", events[1].ID, page, err)
	}
	all, err := e.store.Events(e.ctx, &store.EventsParams{})
	if err != nil || len(all) != len(events)+1 || all[len(all)-1].Key != "other-key" {
		t.Fatalf("whole log = %d events, %v; want %d", len(all), err, len(events)+1)
	}
	// Newest first, paged with the last ID of each page as the cursor.
	ids := func(evs []*store.Event) (out []uint64) {
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	first, err := e.store.Events(e.ctx, &store.EventsParams{Key: key, NewestFirst: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := e.store.Events(e.ctx, &store.EventsParams{Key: key, NewestFirst: true, After: first[len(first)-1].ID})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := ids(events)
	slices.Reverse(wantIDs)
	if got := append(ids(first), ids(rest)...); fmt.Sprint(got) != fmt.Sprint(wantIDs) {
		t.Fatalf("newest first, two pages: IDs %v, want %v", got, wantIDs)
	}
	newest, err := e.store.Events(e.ctx, &store.EventsParams{NewestFirst: true, Limit: 1})
	if err != nil || len(newest) != 1 || newest[0].ID != all[len(all)-1].ID {
		t.Fatalf("newest event of the whole log = %v, %v; want ID %d", newest, err, all[len(all)-1].ID)
	}
}

// testAuditTickets: on a store with a line, a waiting request's ticket joining the line is an
// event, and a break-glass request's is recorded with its actor and reason.
func testAuditTickets(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().Audit, "the store was opened without audit")
	requireNotApplicable(t, e.store.Capabilities().Line, "the store keeps no line")
	const key = "audit-tickets"
	hold := e.acquire(key, baton.WithHolder("holder"), baton.WithKeepalive(false))
	for _, p := range []*store.AcquireParams{
		{Key: key, LeaseID: "plain-1", Holder: "plain", TTL: time.Minute, Wait: true},
		{Key: key, LeaseID: "plain-1", Holder: "plain", TTL: time.Minute, Wait: true}, // kept alive: no event
		{Key: key, LeaseID: "bg-1", Holder: "oncall", TTL: time.Minute, Wait: true, First: true, FirstReason: "prod down"},
	} {
		if _, err := e.store.Acquire(e.ctx, p); !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire of a held key as %s: %v; want ErrLockHeld", p.LeaseID, err)
		}
	}
	_ = hold.Release(e.ctx)
	events, err := e.store.Events(e.ctx, &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		if ev.Kind == store.EventTicketEnqueue || ev.Kind == store.EventTicketFirst {
			got = append(got, fmt.Sprintf("%s %s %s %s %q %d", ev.Kind, ev.LeaseID, ev.Holder, ev.Actor, ev.Reason, ev.Token))
		}
	}
	want := []string{
		fmt.Sprintf("%s plain-1 plain plain %q 0", store.EventTicketEnqueue, ""),
		fmt.Sprintf("%s bg-1 oncall oncall %q 0", store.EventTicketFirst, "prod down"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ticket events of %q:\n got %v\nwant %v", key, got, want)
	}
}

// testAuditRegrantSameLeaseID: a key granted again to a lease ID it was granted to before (a
// client that retries an acquire with the lease ID of an earlier one, after that lease ended) has
// a new token, and the audit log records that grant too: a token a holder runs with is always in
// it.
func testAuditRegrantSameLeaseID(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	requireNotApplicable(t, e.store.Capabilities().Audit, "the store was opened without audit")
	const key = "audit/regrant"
	p := &store.AcquireParams{Key: key, LeaseID: "lease-retried", Holder: "retrier", TTL: time.Minute}
	first, err := e.store.Acquire(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Release(e.ctx, &store.ReleaseParams{Key: key, LeaseID: p.LeaseID}); err != nil {
		t.Fatal(err)
	}
	again, err := e.store.Acquire(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.store.Release(context.Background(), &store.ReleaseParams{Key: key, LeaseID: p.LeaseID})
	})
	if again.Token <= first.Token {
		t.Fatalf("granted again to lease %q with token %d, after token %d", p.LeaseID, again.Token, first.Token)
	}
	events, err := e.store.Events(e.ctx, &store.EventsParams{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, fmt.Sprintf("%s %d", ev.Kind, ev.Token))
	}
	want := []string{fmt.Sprintf("%s %d", store.EventAcquire, first.Token), fmt.Sprintf("%s %d", store.EventRelease, first.Token),
		fmt.Sprintf("%s %d", store.EventAcquire, again.Token)}
	if !slices.Equal(kinds, want) {
		t.Fatalf("audit log of %q: %v; want %v", key, kinds, want)
	}
}
