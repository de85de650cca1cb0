package client

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton"
)

// tracer is the global TracerProvider's (a no-op unless the program configures one).
var tracer = otel.Tracer(baton.TracerName + "/client")

// Attributes of the client's spans (OpenTelemetry's HTTP semantic conventions).
const (
	semHTTPMethod = attribute.Key("http.request.method")
	semHTTPStatus = attribute.Key("http.response.status_code")
	semURLPath    = attribute.Key("url.path")
)

// startSpan starts the client span of one request: "POST /v1/jobs" and the like (the path's
// first two segments, so that names stay few; url.path has the whole path).
func (s *Store) startSpan(ctx context.Context, method, path string) (context.Context, trace.Span) {
	if s.traceParent != "" && !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = baton.ContextWithTraceParent(ctx, s.traceParent)
	}
	ctx, sp := tracer.Start(ctx, method+" "+routeOf(path), clientSpan)
	if sp.IsRecording() {
		sp.SetAttributes(semHTTPMethod.String(method), semURLPath.String(path))
	}
	return ctx, sp
}

// clientSpan is the option of every client span (an option is an allocation each time it is
// made).
var clientSpan = trace.WithSpanKind(trace.SpanKindClient)

// routeOf cuts path after "/v1/<collection>".
func routeOf(path string) string {
	n := 0
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			if n++; n == 3 {
				return path[:i]
			}
		}
	}
	return path
}

// injectTrace sets the W3C traceparent (and tracestate) header of the span in ctx, unless the
// caller set one (SubmitParams.TraceParent).
func (s *Store) injectTrace(ctx context.Context, h http.Header) {
	if h.Get("Traceparent") != "" || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}
