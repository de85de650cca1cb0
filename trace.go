package baton

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of Baton's spans (the library, the server and the Go
// client). Spans go to the global TracerProvider (otel.SetTracerProvider), which does nothing
// unless a program configures one: the baton binary does when the OTEL_* environment asks for it.
const TracerName = "github.com/batonhq/baton"

// tracer is the global provider's tracer, taken once: before a provider is set it is a no-op
// that forwards to the provider set later.
var tracer = otel.Tracer(TracerName)

// Span attribute keys.
const (
	attrKey       = attribute.Key("baton.key")
	attrLeaseID   = attribute.Key("baton.lease_id")
	attrToken     = attribute.Key("baton.token")
	attrWaitSecs  = attribute.Key("baton.wait_seconds")
	attrTries     = attribute.Key("baton.attempts")
	attrHolder    = attribute.Key("baton.holder")
	attrJobID     = attribute.Key("baton.job.id")
	attrJobKind   = attribute.Key("baton.job.kind")
	attrResource  = attribute.Key("baton.job.resource")
	attrAttempt   = attribute.Key("baton.job.attempt")
	attrJobState  = attribute.Key("baton.job.state")
	attrExisting  = attribute.Key("baton.job.existing")
	attrWorker    = attribute.Key("baton.worker")
	attrClaimed   = attribute.Key("baton.jobs_claimed")
	attrErrorCode = attribute.Key("baton.error_code")
)

// endSpan ends sp, marking it failed with err.
func endSpan(sp trace.Span, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(opts...)
}

// traceContext is the W3C trace-context propagator: traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// TraceParent returns the W3C traceparent of the span in ctx ("00-<trace id>-<span id>-<flags>"),
// or "" when ctx carries no valid span context.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// ContextWithTraceParent returns ctx carrying the remote span context that the W3C traceparent
// tp names, so that spans started from it join that trace. An empty or malformed tp returns ctx
// unchanged.
func ContextWithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// jobSpanContext is the context a job's spans start from: its submitter's trace context when
// the job carries one, else ctx's.
func jobSpanContext(ctx context.Context, job *Job) context.Context {
	if job.TraceParent == "" {
		return ctx
	}
	return ContextWithTraceParent(ctx, job.TraceParent)
}

// waitSpan records the time an acquire spent in line as a child span of the acquire span:
// from the first refusal to the start of the attempt that granted (or to giving up).
type waitSpan struct {
	ctx   context.Context
	from  time.Time // the first refusal; zero while none
	tries int
}

func (w *waitSpan) refused() {
	w.tries++
	if w.from.IsZero() {
		w.from = time.Now()
	}
}

// end records the wait span, if there was a wait, ending at until; and the wait's length and
// the number of attempts on the acquire span.
func (w *waitSpan) end(called, until time.Time, holder string, err error) {
	sp := trace.SpanFromContext(w.ctx)
	if !sp.IsRecording() {
		return
	}
	sp.SetAttributes(attrTries.Int(w.tries+1), attrWaitSecs.Float64(until.Sub(called).Seconds()))
	if w.from.IsZero() {
		return
	}
	_, ws := tracer.Start(w.ctx, "baton.wait", trace.WithTimestamp(w.from))
	ws.SetAttributes(attrTries.Int(w.tries))
	if holder != "" {
		ws.SetAttributes(attrHolder.String(holder))
	}
	endSpan(ws, err, trace.WithTimestamp(until))
}
