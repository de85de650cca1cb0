package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// apiJob is the part of the API's job document the end-to-end tests read.
type apiJob struct {
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	State    string `json:"state"`
	Attempt  int    `json:"attempt"`
	Token    uint64 `json:"token"`
	Errors   []struct {
		Attempt int       `json:"attempt"`
		Code    string    `json:"code"`
		Message string    `json:"message"`
		At      time.Time `json:"at"`
	} `json:"errors"`
}

// call sends one API request and decodes a 2xx answer into out; it returns the status. A 503
// "overloaded" (the server shed the request, nothing was done) is retried after its
// Retry-After, as the API asks of clients.
func (s *daemon) call(method, path string, body, out any) int {
	s.t.Helper()
	for shed := 0; ; shed++ {
		code, retryAfter := s.callOnce(method, path, body, out, shed < 100)
		if retryAfter == 0 {
			return code
		}
		time.Sleep(retryAfter) // the server's own pacing, not a synchronisation
	}
}

// callOnce is one attempt of call; retryAfter is set when the server shed the request and
// mayRetry is true.
func (s *daemon) callOnce(method, path string, body, out any, mayRetry bool) (code int, retryAfter time.Duration) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusServiceUnavailable && mayRetry && bytes.Contains(raw, []byte(`"code":"overloaded"`)) {
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || secs <= 0 {
			secs = 1
		}
		return resp.StatusCode, time.Duration(secs) * time.Second
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	if resp.StatusCode/100 != 2 && out != nil {
		s.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, 0
}

func (s *daemon) putKind(kind map[string]any) {
	s.t.Helper()
	if code := s.call("PUT", "/v1/kinds/"+url.PathEscape(kind["name"].(string)), kind, &map[string]any{}); code != 200 {
		s.t.Fatalf("PUT kind %v: %d", kind, code)
	}
}

func (s *daemon) submitJob(kind, resource string, extra map[string]any) apiJob {
	s.t.Helper()
	body := map[string]any{"kind": kind, "resource": resource}
	for k, v := range extra {
		body[k] = v
	}
	var j apiJob
	if code := s.call("POST", "/v1/jobs", body, &j); code != 201 {
		s.t.Fatalf("submit %v: %d", body, code)
	}
	return j
}

// jobs lists every job (all pages) matching query (e.g. "resource=c1").
func (s *daemon) jobs(query string) []apiJob {
	s.t.Helper()
	var all []apiJob
	after := int64(0)
	for {
		var page struct {
			Jobs []apiJob `json:"jobs"`
		}
		if code := s.call("GET", fmt.Sprintf("/v1/jobs?limit=1000&after=%d&%s", after, query), nil, &page); code != 200 {
			s.t.Fatalf("list jobs: %d", code)
		}
		all = append(all, page.Jobs...)
		if len(page.Jobs) < 1000 {
			return all
		}
		after = page.Jobs[len(page.Jobs)-1].ID
	}
}

// waitJobs polls the API (the jobs' state is the signal) until done(jobs) holds. However long
// that takes on a loaded machine, it waits while the jobs move; it fails only when no job has
// changed state or attempt for hangGuard (a hang), naming the jobs not yet final.
func (s *daemon) waitJobs(query string, done func([]apiJob) bool) []apiJob {
	s.t.Helper()
	var last string
	moved := time.Now()
	for {
		js := s.jobs(query)
		if done(js) {
			return js
		}
		if p := progress(js); p != last {
			last, moved = p, time.Now()
		} else if time.Since(moved) > hangGuard {
			s.t.Fatalf("jobs %q: no job moved for %s (hung); %d listed, not final: %s", query, hangGuard, len(js), pending(js))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// progress is what changes whenever a job moves: its state or its attempt.
func progress(js []apiJob) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "%d:%s:%d ", j.ID, j.State, j.Attempt)
	}
	return b.String()
}

// pending lists the jobs not yet final (the first 20), for a failure message.
func pending(js []apiJob) string {
	var out []string
	for _, j := range js {
		if !allFinal([]apiJob{j}) {
			if len(out) == 20 {
				out = append(out, "...")
				break
			}
			out = append(out, fmt.Sprintf("job %d on %s %s (attempt %d)", j.ID, j.Resource, j.State, j.Attempt))
		}
	}
	if len(out) == 0 {
		return "none (the condition waits for more jobs)"
	}
	return strings.Join(out, ", ")
}

func allFinal(js []apiJob) bool {
	for _, j := range js {
		switch j.State {
		case "succeeded", "discarded", "cancelled", "skipped":
		default:
			return false
		}
	}
	return len(js) > 0
}

// worker is one `baton worker` process.
type worker struct {
	cmd *exec.Cmd
	out *bytes.Buffer
	t   *testing.T
}

// startWorker runs `baton worker ARGS -- sh -c SCRIPT` with DIR in its environment.
func startWorker(t *testing.T, s *daemon, dir, script string, args ...string) *worker {
	t.Helper()
	full := append([]string{"worker"}, args...)
	full = append(full, "--", "sh", "-c", script)
	cmd := exec.Command(binary, full...)
	cmd.Env = append(os.Environ(), "BATON_SERVER="+s.url, "DIR="+dir)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, out: out, t: t}
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the worker gracefully (SIGTERM) and waits for it.
func (w *worker) stop() {
	if w.cmd.ProcessState != nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil && !w.t.Failed() {
			w.t.Logf("baton worker exited with %v:\n%s", err, w.out)
		}
	case <-time.After(hangGuard):
		_ = w.cmd.Process.Kill()
		<-done
		w.t.Errorf("baton worker still running %s after SIGTERM: hung\n%s", hangGuard, w.out)
	}
}

// kill ends the worker with SIGKILL, as a crash would.
func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// syscallKill0 reports whether pid exists (signal 0), nil if it does.
func syscallKill0(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("no pid")
	}
	return syscall.Kill(pid, 0)
}

// stopAll stops workers at once: each may be in a long-poll claim that ends only at its timeout.
func stopAll(ws ...*worker) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.stop)
	}
	wg.Wait()
}
