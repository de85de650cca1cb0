package storetest

import (
	"context"
	"fmt"
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
	var got []row
	for _, ev := range events {
		got = append(got, row{ev.Kind, ev.Holder, ev.Actor, ev.Reason})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log of %q:\n got %v\nwant %v", key, got, want)
	}
	tokens := []uint64{a.Token, a.Token, b.Token, c.Token, c.Token}
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
	wantIDs := []uint64{events[4].ID, events[3].ID, events[2].ID, events[1].ID, events[0].ID}
	if got := append(ids(first), ids(rest)...); fmt.Sprint(got) != fmt.Sprint(wantIDs) {
		t.Fatalf("newest first, two pages: IDs %v, want %v", got, wantIDs)
	}
	newest, err := e.store.Events(e.ctx, &store.EventsParams{NewestFirst: true, Limit: 1})
	if err != nil || len(newest) != 1 || newest[0].ID != all[len(all)-1].ID {
		t.Fatalf("newest event of the whole log = %v, %v; want ID %d", newest, err, all[len(all)-1].ID)
	}
}
