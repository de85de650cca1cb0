package cli

import (
	"strings"
	"testing"
)

// TestTracingWanted: the standard OTEL_* variables decide whether baton exports traces, and a
// setting it cannot honour is an error naming the variable.
func TestTracingWanted(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		on      bool
		errPart string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, errPart: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, errPart: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}, // off: nothing asks for traces
	} {
		on, err := tracingWanted(func(k string) string { return c.env[k] })
		if c.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%v: err %v; want one naming %s", c.env, err, c.errPart)
			}
			continue
		}
		if err != nil || on != c.on {
			t.Errorf("%v: on=%v err=%v; want on=%v", c.env, on, err, c.on)
		}
	}
}
