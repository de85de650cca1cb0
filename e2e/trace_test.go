package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// otlpSpan is one span an OTLP receiver got, with the service.name of its resource.
type otlpSpan struct {
	service, name           string
	traceID, spanID, parent string // hex; parent "" for a root
	attrs                   map[string]string
}

// otlpReceiver is a minimal OTLP/HTTP trace receiver: POST /v1/traces with a protobuf
// ExportTraceServiceRequest, as the OpenTelemetry exporters send it.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []otlpSpan
	bad   []string // requests it could not decode
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.mu.Lock()
			r.bad = append(r.bad, fmt.Sprintf("%s %q: %v", req.Header.Get("Content-Type"), body, err))
			r.mu.Unlock()
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range sp.Attributes {
						attrs[kv.Key] = attrText(kv.GetValue())
					}
					r.spans = append(r.spans, otlpSpan{service: service, name: sp.Name,
						traceID: hex.EncodeToString(sp.TraceId), spanID: hex.EncodeToString(sp.SpanId),
						parent: hex.EncodeToString(sp.ParentSpanId), attrs: attrs})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// attrText is an attribute's value as text: a string as is, a number in decimal.
func attrText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

func (r *otlpReceiver) all() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

// TestTraceOfOneJob follows one job from submit to complete across three processes: a client
// submits it with a W3C traceparent; baton serve and baton worker export their spans over OTLP
// to a receiver in this test (configured only by the standard OTEL_* environment); the worker's
// CMD writes the TRACEPARENT it was given. The submit (server), claim, attempt and complete
// spans must all be in the submitter's trace, each the child of the one before, and CMD's
// traceparent must name the attempt's span.
func TestTraceOfOneJob(t *testing.T) {
	t.Parallel()
	recv := startOTLPReceiver(t)
	otelEnv := func(service string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_SERVICE_NAME=" + service,
			"OTEL_TRACES_SAMPLER=parentbased_always_on", "TRACEPARENT="}
	}
	s := &daemon{t: t, addr: freeAddr(t), store: "sqlite://" + filepath.Join(t.TempDir(), "baton.db"), env: otelEnv("baton-serve")}
	s.url = "http://" + s.addr
	s.start()
	t.Cleanup(s.stop)
	s.putKind(map[string]any{"name": "traced"})

	// The submitter: the Go client, in a trace of its own (this process exports nothing).
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c, err := client.NewStore(client.Config{BaseURL: s.url, TraceParent: "00-" + traceID + "-" + parentID + "-01"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.SubmitJob(context.Background(), &store.SubmitParams{Kind: "traced", Resource: "traced/one"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "00-" + traceID; !strings.HasPrefix(res.Job.TraceParent, want) {
		t.Fatalf("submitted job's traceparent %q; want one in trace %s", res.Job.TraceParent, traceID)
	}

	dir := t.TempDir()
	cmd := exec.Command(binary, "worker", "--kind", "traced", "--", "sh", "-c", `printf %s "$TRACEPARENT" > "$DIR/traceparent"`)
	cmd.Env = append(append(os.Environ(), "BATON_SERVER="+s.url, "DIR="+dir), otelEnv("baton-worker")...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, out: out, t: t}
	t.Cleanup(w.stop)
	s.waitJobs("kind=traced", func(js []apiJob) bool { return len(js) == 1 && js[0].State == "succeeded" })
	// Both exit cleanly, flushing their spans: after that, the receiver has all it will get.
	w.stop()
	s.stop()

	cmdTP, err := os.ReadFile(filepath.Join(dir, "traceparent"))
	if err != nil {
		t.Fatal(err)
	}
	spans := recv.all()
	recv.mu.Lock()
	if len(recv.bad) > 0 {
		t.Errorf("the receiver refused %d requests: %v", len(recv.bad), recv.bad)
	}
	recv.mu.Unlock()
	byID := map[string]otlpSpan{}
	var dump strings.Builder
	for _, sp := range spans {
		byID[sp.spanID] = sp
		fmt.Fprintf(&dump, "  %s %s trace=%s span=%s parent=%s %v\n", sp.service, sp.name, sp.traceID, sp.spanID, sp.parent, sp.attrs)
	}
	find := func(service, name string) otlpSpan {
		t.Helper()
		var found []otlpSpan
		for _, sp := range spans {
			if sp.service == service && sp.name == name && sp.traceID == traceID {
				found = append(found, sp)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q of %s in trace %s; want 1. Spans received:\n%s", len(found), name, service, traceID, dump.String())
		}
		return found[0]
	}
	submit := find("baton-serve", "POST /v1/jobs")
	claim := find("baton-worker", "baton.claim")
	attempt := find("baton-worker", "baton.job.attempt")
	complete := find("baton-worker", "baton.complete")
	for _, c := range []struct {
		child, parent otlpSpan
		parentID      string
	}{
		{submit, otlpSpan{name: "the submitter's span"}, parentID},
		{claim, submit, submit.spanID},
		{attempt, claim, claim.spanID},
		{complete, attempt, attempt.spanID},
	} {
		if c.child.parent != c.parentID {
			t.Errorf("%s (%s) has parent %s; want %s (%s). Spans received:\n%s", c.child.name, c.child.service, c.child.parent,
				c.parentID, c.parent.name, dump.String())
		}
	}
	if got := attempt.attrs["baton.job.id"]; got != strconv.FormatInt(res.Job.ID, 10) {
		t.Errorf("attempt span's baton.job.id = %q; want job %d", got, res.Job.ID)
	}
	// The server's span of the complete request is the child of the worker's client span of it,
	// itself under the complete span.
	var serverComplete *otlpSpan
	for _, sp := range spans {
		if sp.service == "baton-serve" && strings.HasSuffix(sp.name, "/complete") && sp.traceID == traceID {
			serverComplete = &sp
		}
	}
	if serverComplete == nil {
		t.Errorf("no server span of the complete request in trace %s. Spans received:\n%s", traceID, dump.String())
	} else if up := byID[serverComplete.parent]; up.parent != complete.spanID {
		t.Errorf("the server's %s has parent %s (%s, whose parent is %s); want the worker's client span under %s",
			serverComplete.name, serverComplete.parent, up.name, up.parent, complete.spanID)
	}
	// CMD continues the attempt's span.
	if want := "00-" + traceID + "-" + attempt.spanID + "-01"; string(cmdTP) != want {
		t.Errorf("CMD's TRACEPARENT = %q; want %q (the attempt's span)", cmdTP, want)
	}
}
