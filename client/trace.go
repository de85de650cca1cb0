package client

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

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
	ctx, sp := tracer.Start(ctx, spanName(method, routeOf(path)), clientSpan)
	if sp.IsRecording() {
		sp.SetAttributes(semHTTPMethod.String(method), semURLPath.String(path))
	}
	return ctx, sp
}

// clientSpan is the option of every client span (an option is an allocation each time it is
// made).
var clientSpan = trace.WithSpanKind(trace.SpanKindClient)

// spanNames holds the span names made so far: method and route come from fixed sets (the
// client's own calls), so it stays small. It is replaced, never changed.
var (
	spanNames   atomic.Pointer[map[spanKey]string]
	spanNamesMu sync.Mutex // serialises additions
)

type spanKey struct{ method, route string }

// spanName is method + " " + route, made once.
func spanName(method, route string) string {
	k := spanKey{method, route}
	if m := spanNames.Load(); m != nil {
		if name, ok := (*m)[k]; ok {
			return name
		}
	}
	spanNamesMu.Lock()
	defer spanNamesMu.Unlock()
	var old map[spanKey]string
	if m := spanNames.Load(); m != nil {
		old = *m
	}
	if name, ok := old[k]; ok {
		return name
	}
	name := method + " " + route
	next := make(map[spanKey]string, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[spanKey{strings.Clone(method), strings.Clone(route)}] = name
	spanNames.Store(&next)
	return name
}

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
