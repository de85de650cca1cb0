package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/batonhq/baton"
)

// cliTracer is the global provider's tracer, for the spans of baton run.
var cliTracer = otel.Tracer(baton.TracerName + "/cli")

// tracingShutdownTimeout bounds the flush of the spans still buffered when baton exits.
const tracingShutdownTimeout = 5 * time.Second

// tracingWanted says whether the standard OpenTelemetry environment asks for traces:
// OTEL_SDK_DISABLED=true turns them off; OTEL_TRACES_EXPORTER=otlp turns them on and =none off;
// without it, an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// turns them on. Other exporters and protocols are errors that name the variable.
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
	case "none":
		return false, nil
	case "otlp":
		on = true
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: must be \"otlp\" or \"none\" (baton exports traces over OTLP only)", exp)
	}
	if !on {
		return false, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: must be \"http/protobuf\" (baton exports OTLP over HTTP only)", v, p)
			}
			break
		}
	}
	return true, nil
}

// startTracing installs the OpenTelemetry SDK as the global TracerProvider, exporting over
// OTLP/HTTP as the OTEL_* environment says (endpoint, headers, timeout, sampler, batch limits,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the service name defaults to "baton"), if the
// environment asks for traces (tracingWanted). The returned stop flushes and shuts the provider
// down; it is a no-op when tracing is off. service names the command ("serve", "run", "worker").
func startTracing(command string, stderr io.Writer) (stop func(), err error) {
	on, err := tracingWanted(os.Getenv)
	if err != nil || !on {
		return func() {}, err
	}
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry OTLP exporter: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("baton"), semconv.ServiceVersion(versionString()),
		semconv.ProcessCommandArgs("baton", command))
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	if res, err = resource.Merge(res, env); err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "baton %s: flushing traces: %v\n", command, err)
		}
	}, nil
}
