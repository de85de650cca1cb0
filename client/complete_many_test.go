package client_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// submitAndClaim submits one job of kind "many" on each resource and claims them all, in claims
// of at most the HTTP bound; it returns the claimed jobs' completions.
func submitAndClaim(t *testing.T, ctx context.Context, st *client.Store, resources []string) []*store.CompleteParams {
	t.Helper()
	if err := st.RegisterKinds(ctx, []store.Kind{{Name: "many"}}); err != nil {
		t.Fatal(err)
	}
	ps := make([]*store.SubmitParams, len(resources))
	for i, r := range resources {
		ps[i] = &store.SubmitParams{Kind: "many", Resource: r}
	}
	if _, err := st.SubmitMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var cs []*store.CompleteParams
	for want := len(resources); len(cs) < want; {
		js, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"many"}, Limit: want - len(cs), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 0 {
			t.Fatalf("claimed %d of %d jobs, then none", len(cs), want)
		}
		for _, j := range js {
			cs = append(cs, &store.CompleteParams{ID: j.ID, Token: j.Token})
		}
	}
	return cs
}

// The server's POST /v1/jobs/complete over a store without store.ManyCompleter completes the
// attempts one at a time: each as POST /v1/jobs/{id}/complete would, null where that would
// answer 409, the others all the same, then the claim, which finds the successors those
// completions promoted.
func TestCompleteManyOneByOneOnAStoreWithoutBatches(t *testing.T) {
	b := serveStore(t, time.Second, func(st *sqlite.Store) store.Store {
		// Only the two interfaces: the server finds no CompleteMany, no CompleteManyAndClaim.
		return struct {
			store.Store
			store.JobStore
		}{st, st}
	}, nil)
	ctx := testContext(t)
	st := b.open(t, client.Config{ClaimWait: -1})
	cs := submitAndClaim(t, ctx, st, []string{"r/1", "r/2", "r/3"})
	// A successor on r/1, claimable only once its first job has completed.
	next, err := st.SubmitJob(ctx, &store.SubmitParams{Kind: "many", Resource: "r/1"})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]*store.CompleteParams{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	stale := *cs[1]
	stale.Token += 1000 // not the running attempt's token
	done, claimed, err := st.CompleteManyAndClaim(ctx, []*store.CompleteParams{cs[0], &stale, cs[2]},
		&store.ClaimParams{Worker: "w", Kinds: []string{"many"}, Limit: 10, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 || done[1] != nil {
		t.Fatalf("completed %v; want 3 results, the stale token's nil", done)
	}
	for _, i := range []int{0, 2} {
		if done[i] == nil || done[i].ID != cs[i].ID || done[i].State != store.JobSucceeded {
			t.Fatalf("completion %d = %+v; want job %d succeeded", i, done[i], cs[i].ID)
		}
	}
	if len(claimed) != 1 || claimed[0].ID != next.Job.ID {
		t.Fatalf("claimed %v; want the successor %d on r/1", claimed, next.Job.ID)
	}
	for i, want := range []store.JobState{store.JobSucceeded, store.JobRunning, store.JobSucceeded} {
		j, err := b.sqlite.GetJob(ctx, cs[i].ID)
		if err != nil || j.State != want {
			t.Fatalf("job %d in the store: %+v, %v; want %s", cs[i].ID, j, err, want)
		}
	}
}

// The Go client sends more than the HTTP bound of completions (wire.MaxClaimLimit, 100) in
// requests of at most the bound, and every attempt completes.
func TestCompleteManyAboveTheHTTPBoundIsChunked(t *testing.T) {
	const n = 250
	var requests atomic.Int64
	b := serveStore(t, time.Second, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/jobs/complete" {
				requests.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx := testContext(t)
	st := b.open(t, client.Config{ClaimWait: -1})
	resources := make([]string, n)
	for i := range resources {
		resources[i] = fmt.Sprintf("r/%d", i)
	}
	cs := submitAndClaim(t, ctx, st, resources)
	done, err := st.CompleteMany(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != n {
		t.Fatalf("%d results for %d completions", len(done), n)
	}
	for i, j := range done {
		if j == nil || j.ID != cs[i].ID || j.State != store.JobSucceeded {
			t.Fatalf("completion %d = %+v; want job %d succeeded", i, j, cs[i].ID)
		}
	}
	if want := int64((n + wire.MaxClaimLimit - 1) / wire.MaxClaimLimit); requests.Load() != want {
		t.Fatalf("%d requests; want %d of at most %d", requests.Load(), want, wire.MaxClaimLimit)
	}
	counts, err := b.sqlite.JobCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.Kind == "many" && c.Count > 0 {
			t.Fatalf("unfinished in the store: %+v; want every job succeeded", c)
		}
	}
}
