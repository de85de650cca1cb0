package sqlite_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkLockCycleTracing is the lock cycle with tracing on (the OpenTelemetry SDK as the
// global TracerProvider: every span recorded and handed to a batch span processor, whose exporter
// drops them) against tracing off (a no-op provider), alternating cycle by cycle in one run.
// x-off is the throughput with tracing on over that with it off (1.0: as fast).
func BenchmarkLockCycleTracing(b *testing.B) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	sw := &switchProvider{on: sdk, off: noop.NewTracerProvider()}
	otel.SetTracerProvider(sw)
	b.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	locker, err := baton.NewLocker(openDefault(b, filepath.Join(b.TempDir(), "baton.db")), nil)
	if err != nil {
		b.Fatal(err)
	}
	cycle := storetest.LockerCycle(locker)
	ctx := context.Background()
	// Cycles alternate one by one, so that drift in the database (WAL growth, checkpoints) and
	// the machine's load weigh on both alike.
	var took [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		on := i%2 == 1
		sw.tracing.Store(on)
		start := time.Now()
		if err := cycle(ctx, "bench/trace"); err != nil {
			b.Fatal(err)
		}
		if on {
			took[1] += time.Since(start)
		} else {
			took[0] += time.Since(start)
		}
	}
	b.StopTimer()
	offNs := float64(took[0].Nanoseconds()) / float64((b.N+1)/2)
	onNs := float64(took[1].Nanoseconds()) / float64(max(1, b.N/2))
	b.ReportMetric(offNs, "off-ns/op")
	b.ReportMetric(onNs, "on-ns/op")
	b.ReportMetric(offNs/onNs, "x-off")
}

// switchProvider is the global TracerProvider of the benchmark: the SDK's while tracing is set,
// the no-op one otherwise, so that both run in one process (the global provider can be set once).
type switchProvider struct {
	embedded.TracerProvider
	tracing atomic.Bool
	on, off trace.TracerProvider
}

func (p *switchProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &switchTracer{p: p, on: p.on.Tracer(name, opts...), off: p.off.Tracer(name, opts...)}
}

type switchTracer struct {
	embedded.Tracer
	p       *switchProvider
	on, off trace.Tracer
}

func (t *switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t.p.tracing.Load() {
		return t.on.Start(ctx, name, opts...)
	}
	return t.off.Start(ctx, name, opts...)
}

// discardExporter drops the spans the batch span processor hands it.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
