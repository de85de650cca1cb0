package cli

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/batontest"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

// peakRSS is the VmHWM (peak resident set) of process pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// maxBatchBody is a POST /v1/jobs/batch body of store.MaxSubmitMany jobs that fills
// server.MaxJobBatchBodyBytes but for a few bytes. Its jobs share one resource: what is measured
// is the decoding, and 10,000 resource rows per batch only made the writes slower.
func maxBatchBody(t *testing.T, batch int) []byte {
	t.Helper()
	per := server.MaxJobBatchBodyBytes/store.MaxSubmitMany - 1
	var b bytes.Buffer
	b.WriteString(`{"jobs":[`)
	for i := range store.MaxSubmitMany {
		if i > 0 {
			b.WriteByte(',')
		}
		job := fmt.Sprintf(`{"kind":"build","resource":"mem/%d","args":{"pad":""}}`, batch)
		b.WriteString(strings.Replace(job, `"pad":""`, `"pad":"`+strings.Repeat("x", per-len(job))+`"`, 1))
	}
	b.WriteString(`]}`)
	if b.Len() > server.MaxJobBatchBodyBytes || b.Len() < server.MaxJobBatchBodyBytes-store.MaxSubmitMany-100 {
		t.Fatalf("batch body of %d bytes, want just under %d", b.Len(), server.MaxJobBatchBodyBytes)
	}
	return b.Bytes()
}

// Eight clients each send a batch submit of the largest size at once: the server's peak resident
// memory stays under 100 MiB, and every batch is either written (201) or refused as overload
// with Retry-After (503), never lost to an error. Each decode costs about four times its body,
// so eight at once used to take the server past 300 MB.
func TestServeConcurrentMaxBatchesStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := batontest.Build(t, "")
	srv := batontest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	req, _ := http.NewRequest("PUT", srv.URL+"/v1/kinds/build", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT /v1/kinds/build: %v %v", resp, err)
	}
	const clients = 8
	bodies := make([][]byte, clients)
	for i := range bodies {
		bodies[i] = maxBatchBody(t, i)
	}
	before := peakRSS(t, srv.PID)
	var wg sync.WaitGroup
	statuses := make([]int, clients)
	problems := make([]string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/v1/jobs/batch", "application/json", bytes.NewReader(bodies[i]))
			if err != nil {
				problems[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			statuses[i] = resp.StatusCode
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
				problems[i] = "503 without Retry-After"
			} else if resp.StatusCode != 201 && resp.StatusCode != 503 {
				problems[i] = string(raw)
			}
		}()
	}
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(hangGuard):
		t.Fatalf("%d concurrent batches still unanswered after %s (hung)", clients, hangGuard)
	}
	peak := peakRSS(t, srv.PID)
	written := 0
	for i, s := range statuses {
		if problems[i] != "" {
			t.Errorf("batch %d: %d %s", i, s, problems[i])
		}
		if s == 201 {
			written++
		}
	}
	t.Logf("%d concurrent batches of %d jobs (%.1f MiB each): %d written, %d refused 503; peak RSS %.0f MiB (%.0f MiB before)",
		clients, store.MaxSubmitMany, float64(len(bodies[0]))/(1<<20), written, clients-written, float64(peak)/(1<<20), float64(before)/(1<<20))
	if written == 0 {
		t.Errorf("no batch was written")
	}
	if peak > 100<<20 {
		t.Fatalf("peak RSS %.0f MiB with %d concurrent max-size batches; want under 100 MiB", float64(peak)/(1<<20), clients)
	}
}
