package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// testJobCleanDeadLetterAge: a clean with DiscardedAge keeps dead letters to their own age,
// apart from the other finished jobs' Age, shorter or longer; without Discarded it deletes none.
func testJobCleanDeadLetterAge(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "dl", MaxAttempts: 1})
	finish := func(resource string, ok bool) *store.Job {
		t.Helper()
		j := e.sub("dl", resource)
		if ok {
			e.complete(e.claimOne(j.ID, "dl"))
		} else {
			e.fail(e.claimOne(j.ID, "dl"), store.FailParams{Message: "dead"})
		}
		return j
	}
	// drain cleans with p until want jobs went (the store's clock must pass the jobs' finish);
	// more is a failure.
	drain := func(p store.CleanParams, want int) {
		t.Helper()
		if e.canAdvance() {
			e.advance(time.Second)
		}
		deleted := 0
		e.poll(fmt.Sprintf("CleanJobs(%+v) deletes %d jobs", p, want), 10*time.Second, func() bool {
			n, err := e.s.CleanJobs(e.ctx, &p)
			if err != nil {
				t.Fatalf("CleanJobs(%+v): %v", p, err)
			}
			deleted += n
			return deleted >= want
		})
		if deleted != want {
			t.Fatalf("CleanJobs(%+v) deleted %d jobs; want %d", p, deleted, want)
		}
	}
	// The dead letter finished first: whenever the succeeded job is old enough, so is it.
	dead := finish("dl/1", false)
	succeeded := finish("dl/2", true)
	drain(store.CleanParams{DiscardedAge: time.Millisecond}, 1) // no Discarded: dead letters stay
	e.gone(succeeded.ID)
	e.expectState(dead.ID, store.JobDiscarded)

	// Dead letters kept longer: a succeeded job goes, the older dead letter stays.
	succeeded = finish("dl/3", true)
	drain(store.CleanParams{Discarded: true, DiscardedAge: time.Hour}, 1)
	e.gone(succeeded.ID)
	e.expectState(dead.ID, store.JobDiscarded)

	// Dead letters kept shorter: the dead letter goes, a job that just succeeded stays.
	recent := finish("dl/4", true)
	drain(store.CleanParams{Age: time.Hour, Discarded: true, DiscardedAge: time.Millisecond}, 1)
	e.gone(dead.ID)
	e.expectState(recent.ID, store.JobSucceeded)

	_, err := e.s.CleanJobs(e.ctx, &store.CleanParams{Discarded: true, DiscardedAge: -time.Second})
	wantInvalid(t, "clean with a negative discarded age", err, "discarded_age")
}

// testJobKindStats: a store.KindStatsStore reports each kind's oldest running attempt's age
// (growing while it runs) and its dead letters.
func testJobKindStats(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "ks", MaxAttempts: 1}, store.Kind{Name: "ks.other"})
	ks, ok := e.s.(store.KindStatsStore)
	requireNotApplicable(t, ok, "the store does not implement store.KindStatsStore")
	stats := func() map[string]*store.KindStats {
		t.Helper()
		rows, err := ks.KindStats(e.ctx)
		if err != nil {
			t.Fatalf("KindStats: %v", err)
		}
		out := map[string]*store.KindStats{}
		for _, r := range rows {
			out[r.Kind] = r
		}
		return out
	}
	if s := stats(); len(s) != 0 {
		t.Fatalf("KindStats of an empty store: %+v", s)
	}
	dead := e.sub("ks", "ks/1")
	e.fail(e.claimOne(dead.ID, "ks"), store.FailParams{Message: "dead"})
	running := e.sub("ks", "ks/2")
	e.claimOne(running.ID, "ks")
	e.sub("ks.other", "ks/3") // available: neither running nor dead
	var first time.Duration
	e.poll("the running attempt ages", 10*time.Second, func() bool {
		if e.canAdvance() {
			e.advance(time.Second)
		}
		s := stats()["ks"]
		if s == nil || s.DeadLetters != 1 {
			t.Fatalf("KindStats[ks] = %+v, want 1 dead letter", s)
		}
		if first == 0 {
			first = max(s.OldestRunningAge, time.Nanosecond)
			return false
		}
		return s.OldestRunningAge > first
	})
	if s := stats(); s["ks.other"] != nil || len(s) != 1 {
		t.Fatalf("KindStats lists a kind with no running job nor dead letter: %+v", s["ks.other"])
	}
}
