package baton_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
)

// spans is this test binary's span recorder: the global TracerProvider can be set once. It
// samples only while recording is set, so that the other tests of the package run with spans
// that record nothing.
var spans = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(whileRecording{})))
	return rec
})

var recording atomic.Bool

// whileRecording samples every span while recording is set, none otherwise.
type whileRecording struct{}

func (whileRecording) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if recording.Load() {
		return sdktrace.AlwaysSample().ShouldSample(p)
	}
	return sdktrace.NeverSample().ShouldSample(p)
}

func (whileRecording) Description() string { return "whileRecording" }

// endedSpans returns the ended spans named name whose baton.key is key.
func endedSpans(name, key string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range spans().Ended() {
		if sp.Name() != name {
			continue
		}
		for _, a := range sp.Attributes() {
			if a.Key == "baton.key" && a.Value.AsString() == key {
				out = append(out, sp)
			}
		}
	}
	return out
}

func attr(sp sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range sp.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestLockSpans: an acquire that waited in line records the wait as a child span naming the
// holder it waited for; a renew the store refuses is recorded under the acquire span; release
// has a span of its own.
func TestLockSpans(t *testing.T) {
	spans()
	recording.Store(true)
	defer recording.Store(false)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	locker, err := baton.NewLocker(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "trace/lock"
	first, err := locker.Acquire(ctx, key, baton.WithHolder("first"))
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan *baton.Lease, 1)
	go func() {
		l, err := locker.Acquire(ctx, key, baton.WithHolder("second"))
		if err != nil {
			t.Error(err)
		}
		granted <- l
	}()
	// Release once the second acquire is in line (polled: the line is the condition).
	for deadline := time.Now().Add(time.Minute); ; {
		line, err := st.ResourceLine(ctx, key, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(line.Tickets) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second acquire never joined the line")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-granted
	if second == nil {
		t.FailNow()
	}
	// The second lease is force-released: its renew is refused and recorded.
	if _, err := locker.ForceRelease(ctx, key, "trace test"); err != nil {
		t.Fatal(err)
	}
	if err := second.Renew(ctx); !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("Renew after a force-release: %v; want ErrNotHeld", err)
	}

	acquires := endedSpans("baton.acquire", key)
	if len(acquires) != 2 {
		t.Fatalf("%d acquire spans of %s; want 2", len(acquires), key)
	}
	var waited sdktrace.ReadOnlySpan
	for _, sp := range acquires {
		if attr(sp, "baton.lease_id").AsString() == second.ID {
			waited = sp
		}
	}
	if waited == nil || attr(waited, "baton.attempts").AsInt64() < 2 {
		t.Fatalf("no acquire span of the second lease with 2 attempts or more: %v", acquires)
	}
	var wait sdktrace.ReadOnlySpan
	for _, sp := range spans().Ended() {
		if sp.Name() == "baton.wait" && sp.Parent().SpanID() == waited.SpanContext().SpanID() {
			wait = sp
		}
	}
	if wait == nil {
		t.Fatal("no baton.wait span under the acquire that waited")
	}
	if got := attr(wait, "baton.holder").AsString(); got != "first" {
		t.Errorf("baton.wait names holder %q; want %q", got, "first")
	}
	if !wait.EndTime().After(wait.StartTime()) || wait.EndTime().After(waited.EndTime()) {
		t.Errorf("baton.wait from %v to %v, its acquire ends %v", wait.StartTime(), wait.EndTime(), waited.EndTime())
	}
	renews := endedSpans("baton.renew", key)
	if len(renews) != 1 || renews[0].Status().Code != codes.Error || renews[0].Parent().SpanID() != waited.SpanContext().SpanID() {
		t.Errorf("renew spans %v; want one failed renew under the second lease's acquire span", renews)
	}
	if rel := endedSpans("baton.release", key); len(rel) != 1 || attr(rel[0], "baton.lease_id").AsString() != first.ID {
		t.Errorf("release spans %v; want the first lease's", rel)
	}
}
