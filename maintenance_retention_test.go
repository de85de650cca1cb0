package baton_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Dead letters have a retention of their own: the cleaner deletes other finished jobs after
// Retention and dead letters after DeadLetterRetention, whichever is longer.
func TestMaintenanceDeadLetterRetention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		q := newQueue(t, st, baton.Kind{Name: "k", MaxAttempts: 1})
		ctx := testCtx(t)
		finish := func(resource string, ok bool) *baton.Job {
			t.Helper()
			j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: resource})
			got, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"k"}, Limit: 1, TTL: 10 * time.Second})
			if err != nil || len(got) != 1 || got[0].ID != j.ID {
				t.Fatalf("claim: %v, %v", got, err)
			}
			if ok {
				_, err = st.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: got[0].Token})
			} else {
				_, err = st.FailJob(ctx, &store.FailParams{ID: j.ID, Token: got[0].Token, Message: "dead"})
			}
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		gone := func(id int64) bool {
			_, err := q.Get(ctx, id)
			if err != nil && !errors.Is(err, baton.ErrNotFound) {
				t.Fatal(err)
			}
			return err != nil
		}
		waitGone := func(id int64) {
			t.Helper()
			for !gone(id) {
				select {
				case <-ctx.Done():
					t.Fatalf("job %d still there", id)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}

		// Dead letters kept longer than the rest.
		dead := finish("r/1", false)
		done := finish("r/2", true)
		stop := runMaintenance(t, q, baton.MaintenanceConfig{CleanInterval: 20 * time.Millisecond,
			Retention: 200 * time.Millisecond, DeadLetterRetention: time.Hour})
		waitGone(done.ID)
		stop()
		if gone(dead.ID) {
			t.Fatal("the dead letter went with the succeeded job (dead-letter retention 1h)")
		}
		if j := getJob(t, q, dead.ID); j.State != baton.JobDiscarded {
			t.Fatalf("dead letter: %s", j.State)
		}

		// Dead letters kept shorter than the rest.
		recent := finish("r/3", true)
		stop = runMaintenance(t, q, baton.MaintenanceConfig{CleanInterval: 20 * time.Millisecond,
			Retention: time.Hour, DeadLetterRetention: 200 * time.Millisecond})
		waitGone(dead.ID)
		stop()
		if gone(recent.ID) {
			t.Fatal("a job that succeeded went after the dead-letter retention (retention 1h)")
		}
	})
}
