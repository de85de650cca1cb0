package server

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton"
)

// tracer is the global TracerProvider's: a no-op unless the program configures one (baton serve
// does when the OTEL_* environment asks for it).
var tracer = otel.Tracer(baton.TracerName + "/server")

// Attributes of the server's spans (OpenTelemetry's HTTP semantic conventions).
const (
	semHTTPMethod = attribute.Key("http.request.method")
	semHTTPRoute  = attribute.Key("http.route")
	semHTTPStatus = attribute.Key("http.response.status_code")
	semURLPath    = attribute.Key("url.path")
)

// serverSpan is the option of every server span (an option is an allocation each time it is
// made).
var serverSpan = trace.WithSpanKind(trace.SpanKindServer)

// traced runs h in a server span named after the method and the route pattern ("POST
// /v1/jobs/{id}/complete"), a child of the request's W3C traceparent when it has one. With
// tracing off, a request that carries a traceparent still has it in its context (the job
// submit stores it); one without costs a header lookup.
func traced(pattern string, h http.HandlerFunc) http.HandlerFunc {
	// The span names of the standard methods, built once.
	names := map[string]string{}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		names[m] = m + " " + pattern
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Header.Get("Traceparent") != "" {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		name, ok := names[r.Method]
		if !ok {
			name = r.Method + " " + pattern
		}
		ctx, sp := tracer.Start(ctx, name, serverSpan)
		if !sp.IsRecording() {
			if ctx != r.Context() && trace.SpanContextFromContext(ctx).IsValid() {
				r = r.WithContext(ctx)
			}
			h(w, r)
			return
		}
		sp.SetAttributes(semHTTPMethod.String(r.Method), semHTTPRoute.String(pattern), semURLPath.String(r.URL.Path))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			sp.SetAttributes(semHTTPStatus.Int(sw.status))
			if sw.status >= 500 {
				sp.SetStatus(codes.Error, http.StatusText(sw.status))
			}
			sp.End()
		}()
		h(sw, r.WithContext(ctx))
	}
}
