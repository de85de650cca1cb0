package baton_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// A job whose kind's rate on its resource is reached says so, with the rate and when the window
// frees, once (not also as "scheduled"); a job of another resource does not.
func TestExplainRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		rate := store.Rate{Max: 1, Window: time.Hour}
		q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "remediate", Rate: &rate}}})
		if err != nil {
			t.Fatal(err)
		}
		submit := func(res string) int64 {
			t.Helper()
			r, err := q.Submit(ctx, baton.SubmitParams{Kind: "remediate", Resource: res})
			if err != nil {
				t.Fatal(err)
			}
			return r.Job.ID
		}
		first, second := submit("wl/r"), submit("wl/r")
		j := claim2(t, ctx, st, first, "remediate")
		if _, err := st.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
			t.Fatal(err)
		}
		if js, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"remediate"}, Limit: 1, TTL: time.Minute}); err != nil || len(js) != 0 {
			t.Fatalf("claim under a reached rate: %v, %v; want none", js, err)
		}
		e, err := q.Explain(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		r := reasonOf(t, e, baton.WaitRate)
		want := j.AttemptedAt.Add(time.Hour)
		if r.Rate != "1/1h" || r.Until.Sub(want).Abs() > 2*time.Millisecond ||
			!strings.Contains(r.Message, "rate 1/1h") || !strings.Contains(r.Message, "next at") {
			t.Fatalf("rate reason %+v; want rate 1/1h, until %s", r, want)
		}
		noReason(t, e, baton.WaitScheduled)
		e, err = q.Explain(ctx, submit("wl/other"))
		if err != nil {
			t.Fatal(err)
		}
		noReason(t, e, baton.WaitRate)
	})
}
