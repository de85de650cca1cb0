package baton_test

import (
	"errors"
	"testing"

	"github.com/batonhq/baton"
)

// Queue.SubmitMany on each backend: results in batch order, the caller's slice left alone, and
// a refusal that names the job and writes nothing.
func TestQueueSubmitMany(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := testCtx(t)
		q := newQueue(t, b.open(t), baton.Kind{Name: "build"}, baton.Kind{Name: "gate", Policy: baton.PolicyReject})
		ps := []baton.SubmitParams{
			{Kind: "build", Resource: "repo/a"},
			{Kind: "build", Resource: "repo/a", IdempotencyKey: "a-2"},
			{Kind: "build", Resource: "repo/b"},
		}
		res, err := q.SubmitMany(ctx, ps)
		if err != nil || len(res) != 3 {
			t.Fatalf("SubmitMany: %d results, %v", len(res), err)
		}
		if !res[0].Job.Head || res[1].Job.Head || res[1].Job.Seq <= res[0].Job.Seq || !res[2].Job.Head || res[1].Job.IdempotencyKey != "a-2" {
			t.Fatalf("SubmitMany = %+v, %+v, %+v; want repo/a's jobs in order behind its head", res[0].Job, res[1].Job, res[2].Job)
		}
		if ps[0].Args != nil || ps[0].Policy != "" {
			t.Fatalf("SubmitMany changed the caller's params: %+v", ps[0])
		}
		_, err = q.SubmitMany(ctx, []baton.SubmitParams{{Kind: "build", Resource: "repo/c"}, {Kind: "gate", Resource: "repo/a"}})
		var se *baton.SubmitManyError
		var busy *baton.ResourceBusyError
		if !errors.As(err, &se) || se.Index != 1 || !errors.As(err, &busy) || busy.HeadJob != res[0].Job.ID {
			t.Fatalf("SubmitMany with a refused job: %v; want a SubmitManyError at 1 naming head %d", err, res[0].Job.ID)
		}
		if _, err := q.Resource(ctx, "repo/c"); !errors.Is(err, baton.ErrNotFound) {
			t.Fatalf("resource of a refused batch: %v; want not found", err)
		}
		if _, err := q.SubmitMany(ctx, []baton.SubmitParams{{Kind: "build", Resource: "repo/c"}, {Kind: "build"}}); !isInvalid(err, "jobs[1].resource") {
			t.Fatalf("SubmitMany with a bad job: %v", err)
		}
	})
}
