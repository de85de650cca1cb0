package storetest

import (
	"fmt"
	"testing"

	"github.com/batonhq/baton/store"
)

// testJobTraceParent: a job keeps its submitter's W3C traceparent, through every way of
// submitting (one job, a batch with and without idempotency keys, a job with holds), and returns
// it from Get and from the claim; a job submitted without one has none; a malformed one is
// refused, naming the field.
func testJobTraceParent(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "trace"}, store.Kind{Name: "trace.shared", Mode: store.ModeShared})
	tp := func(i int) string { return fmt.Sprintf("00-%032x-%016x-01", 0xabc0+i, 0xde0+i) }
	one := e.submit(store.SubmitParams{Kind: "trace", Resource: "trace/one", TraceParent: tp(1)})
	none := e.submit(store.SubmitParams{Kind: "trace", Resource: "trace/none"})
	shared := e.submitBeyond(store.SubmitParams{Kind: "trace.shared", Resource: "trace/shared", TraceParent: tp(2)})
	batch := e.submitMany(
		store.SubmitParams{Kind: "trace", Resource: "trace/b1", TraceParent: tp(3)},
		store.SubmitParams{Kind: "trace", Resource: "trace/b2"},
		store.SubmitParams{Kind: "trace", Resource: "trace/b3", TraceParent: tp(4)})
	keyed := e.submitMany(
		store.SubmitParams{Kind: "trace", Resource: "trace/k1", IdempotencyKey: "trace-k1", TraceParent: tp(5)},
		store.SubmitParams{Kind: "trace", Resource: "trace/k2", IdempotencyKey: "trace-k2"})
	want := map[int64]string{one.ID: tp(1), none.ID: "", shared.ID: tp(2), batch[0].Job.ID: tp(3),
		batch[1].Job.ID: "", batch[2].Job.ID: tp(4), keyed[0].Job.ID: tp(5), keyed[1].Job.ID: ""}
	for id, tp := range want {
		if got := e.get(id).TraceParent; got != tp {
			t.Errorf("job %d: TraceParent = %q; want %q", id, got, tp)
		}
	}
	for _, j := range []*store.Job{one, none, shared, batch[0].Job, batch[2].Job, keyed[0].Job} {
		if j.TraceParent != want[j.ID] {
			t.Errorf("job %d as submitted: TraceParent = %q; want %q", j.ID, j.TraceParent, want[j.ID])
		}
	}
	claimed := e.claim(10, "trace", "trace.shared")
	if len(claimed) != len(want) {
		t.Fatalf("claimed %d jobs; want %d", len(claimed), len(want))
	}
	for _, j := range claimed {
		if j.TraceParent != want[j.ID] {
			t.Errorf("claimed job %d: TraceParent = %q; want %q", j.ID, j.TraceParent, want[j.ID])
		}
	}
	for _, bad := range []string{"00-abc", "01-" + tp(9)[3:], "00-00000000000000000000000000000000-0000000000000de9-01",
		"00-" + fmt.Sprintf("%032X", 0xabc) + "-0000000000000de9-01"} {
		_, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "trace", Resource: "trace/bad", TraceParent: bad})
		wantInvalid(t, fmt.Sprintf("SubmitJob with traceparent %q", bad), err, "traceparent")
	}
}
