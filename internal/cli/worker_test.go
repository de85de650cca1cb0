//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton/store"
)

// workerAsync starts `baton worker` in-process against f and returns its stderr and a channel
// of its result. The tests stop it with a SIGTERM to the test process (they are not parallel);
// the test listens for SIGTERM too while the worker may run, so that a signal sent after the
// worker stopped listening cannot kill the test binary. If the test ends with the worker still
// running, it is stopped the same way.
func (f *fixture) workerAsync(t *testing.T, args ...string) (*syncBuffer, <-chan result) {
	t.Helper()
	t.Setenv("BATON_TOKEN", "")
	guard := make(chan os.Signal, 8)
	signal.Notify(guard, syscall.SIGTERM)
	var out, errOut syncBuffer
	done := make(chan result, 1)
	finished := make(chan struct{})
	args = append([]string{"worker", "--server", f.url}, args...)
	go func() {
		defer close(finished)
		code := run(args, nil, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	t.Cleanup(func() {
		select {
		case <-finished:
		default:
			_ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
			select {
			case <-finished:
			case <-time.After(hangGuard):
				t.Errorf("baton worker still running %s after SIGTERM (hung):\n%s", hangGuard, errOut.String())
			}
		}
		signal.Stop(guard)
	})
	return &errOut, done
}

// stopWorker sends SIGTERM to the test process, where the worker listens, and waits for it.
func stopWorker(t *testing.T, done <-chan result) result {
	t.Helper()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return waitResult(t, done)
}

func jobEnded(id int64, state store.JobState) string {
	return fmt.Sprintf(`msg="baton worker: job ended" job=%d state=%s `, id, state)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// inOrderScript fails loudly if two jobs ever run together (mkdir is atomic), logs each job's
// start and end, and saves its stdin and its BATON_ environment. $1 is the directory.
const inOrderScript = `
if ! mkdir "$1/inside" 2>/dev/null; then echo "overlap: $BATON_JOB_ID" >> "$1/overlaps"; exit 99; fi
echo "start $BATON_JOB_ID" >> "$1/log"
cat > "$1/args-$BATON_JOB_ID"
env | grep '^BATON_JOB\|^BATON_RESOURCE\|^BATON_FENCING' | sort > "$1/env-$BATON_JOB_ID"
echo "hello from $BATON_JOB_ID"
echo "to stderr from $BATON_JOB_ID" >&2
echo "end $BATON_JOB_ID" >> "$1/log"
rmdir "$1/inside"
`

func TestWorkerRunsJobsOfAResourceOneAtATimeInOrder(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "build"); r.code != 0 {
		t.Fatal(r)
	}
	var ids []int64
	for i := 1; i <= 3; i++ {
		ids = append(ids, f.submit(t, "--kind", "build", "--resource", "repo/x", "--args", fmt.Sprintf(`{"n":%d}`, i)).ID)
	}
	dir := t.TempDir()
	// Three slots: only the store's one-at-a-time rule keeps the jobs apart.
	errOut, done := f.workerAsync(t, "--kind", "build", "--concurrency", "3", "--", "sh", "-c", inOrderScript, "sh", dir)
	waitSeen(t, errOut, jobEnded(ids[2], store.JobSucceeded))
	r := stopWorker(t, done)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("worker stopped by SIGTERM: %s", r)
	}
	if overlaps, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Fatalf("jobs overlapped:\n%s", overlaps)
	}
	var want strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&want, "start %d\nend %d\n", id, id)
	}
	if got := readFile(t, filepath.Join(dir, "log")); got != want.String() {
		t.Fatalf("log:\n%s\nwant:\n%s", got, want.String())
	}
	prevToken := uint64(0)
	for i, id := range ids {
		job := f.job(t, id)
		if job.State != store.JobSucceeded || job.Attempt != 1 || job.Token <= prevToken {
			t.Fatalf("job %d: %+v (previous token %d)", id, job, prevToken)
		}
		prevToken = job.Token
		if got := compactJSON(t, []byte(readFile(t, filepath.Join(dir, fmt.Sprint("args-", id))))); got != fmt.Sprintf(`{"n":%d}`, i+1) {
			t.Fatalf("job %d got stdin %s", id, got)
		}
		wantEnv := fmt.Sprintf("BATON_FENCING_TOKEN=%d\nBATON_JOB_ATTEMPT=1\nBATON_JOB_ID=%d\nBATON_JOB_KIND=build\nBATON_JOB_MAX_ATTEMPTS=5\nBATON_RESOURCE=repo/x\n",
			job.Token, id)
		if got := readFile(t, filepath.Join(dir, fmt.Sprint("env-", id))); got != wantEnv {
			t.Fatalf("job %d environment:\n%s\nwant:\n%s", id, got, wantEnv)
		}
		for _, line := range []string{fmt.Sprintf("[job %d] hello from %d\n", id, id), fmt.Sprintf("[job %d] to stderr from %d\n", id, id)} {
			if !strings.Contains(r.stderr, line) {
				t.Fatalf("CMD's output line %q not in the worker's stderr:\n%s", line, r.stderr)
			}
		}
	}
	if !strings.Contains(r.stderr, "baton worker: shutting down") || !strings.Contains(r.stderr, "baton worker: stopped") {
		t.Fatalf("worker's log:\n%s", r.stderr)
	}
}

// failScript exits as its args say: 65 (permanent), death by SIGKILL, or 1.
const failScript = `args=$(cat)
case "$args" in
*65*) echo "bad input: $args" >&2; exit 65;;
*kill*) echo "about to die" >&2; kill -KILL $$;;
*) echo "line one" >&2; echo "boom on attempt $BATON_JOB_ATTEMPT of $BATON_JOB_MAX_ATTEMPTS" >&2; exit 1;;
esac`

func TestWorkerFailures(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "t"); r.code != 0 {
		t.Fatal(r)
	}
	permanent := f.submit(t, "--kind", "t", "--resource", "a", "--args", `{"exit":65}`).ID
	retried := f.submit(t, "--kind", "t", "--resource", "b", "--args", `{"exit":1}`, "--max-attempts", "2").ID
	killed := f.submit(t, "--kind", "t", "--resource", "c", "--args", `{"exit":"kill"}`, "--max-attempts", "1").ID
	errOut, done := f.workerAsync(t, "--kind", "t", "--", "sh", "-c", failScript)
	for _, marker := range []string{jobEnded(permanent, store.JobDiscarded), jobEnded(retried, store.JobRetryable),
		jobEnded(retried, store.JobDiscarded), jobEnded(killed, store.JobDiscarded)} {
		waitSeen(t, errOut, marker)
	}
	if r := stopWorker(t, done); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}

	// Exit 65: discarded after one attempt, no retry.
	j := f.job(t, permanent)
	if j.State != store.JobDiscarded || j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Code != store.CodePermanent ||
		!strings.Contains(j.Errors[0].Message, "exit status 65") || !strings.Contains(j.Errors[0].Message, `stderr: bad input: {"exit":65}`) {
		t.Fatalf("exit 65: %+v", j)
	}
	// Exit 1: retried, then discarded with both errors and the end of stderr in each.
	j = f.job(t, retried)
	if j.State != store.JobDiscarded || j.Attempt != 2 || len(j.Errors) != 2 {
		t.Fatalf("exit 1 with 2 attempts: %+v", j)
	}
	for i, e := range j.Errors {
		want := fmt.Sprintf("exit status 1; stderr: line one\nboom on attempt %d of 2", i+1)
		if e.Attempt != i+1 || e.Code != store.CodeHandlerError || e.Message != want {
			t.Fatalf("error %d: %+v\nwant message %q", i, e, want)
		}
	}
	// Death by a signal is a failure like any other.
	j = f.job(t, killed)
	if j.State != store.JobDiscarded || j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Code != store.CodeHandlerError ||
		j.Errors[0].Message != "killed by signal 9 (killed); stderr: about to die" {
		t.Fatalf("killed CMD: %+v", j)
	}
	if r := f.cli(t, "dlq", "list"); r.code != 0 || strings.Count(r.stdout, "discarded") != 3 {
		t.Fatalf("dlq list: %s", r)
	}
	if r := f.cli(t, "jobs", "show", fmt.Sprint(retried)); r.code != 0 || !strings.Contains(r.stdout, "boom on attempt 2 of 2") ||
		!strings.Contains(r.stdout, "handler_error") {
		t.Fatalf("jobs show: %s", r)
	}
}

func TestWorkerGracefulShutdownLetsTheJobFinish(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "slow"); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	first := f.submit(t, "--kind", "slow", "--resource", "r1").ID
	errOut, done := f.workerAsync(t, "--kind", "slow", "--concurrency", "1", "--",
		"sh", "-c", `echo "ready $BATON_JOB_ID"; read line < "$1/go"; echo "got $line"`, "sh", dir)
	waitSeen(t, errOut, fmt.Sprintf("[job %d] ready %d", first, first))
	// The worker's one slot is taken: this job waits, and is not claimed once shutdown starts.
	second := f.submit(t, "--kind", "slow", "--resource", "r2").ID

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, errOut, "baton worker: shutting down")
	select {
	case r := <-done:
		t.Fatalf("worker exited while its job ran: %s", r)
	default:
	}
	// Let CMD finish (opening a FIFO for writing waits for its reader).
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := waitResult(t, done)
	if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("[job %d] got go", first)) || !strings.Contains(r.stderr, jobEnded(first, store.JobSucceeded)) {
		t.Fatalf("worker after SIGTERM: %s", r)
	}
	if j := f.job(t, first); j.State != store.JobSucceeded || len(j.Errors) != 0 {
		t.Fatalf("the running job: %+v", j)
	}
	if j := f.job(t, second); j.State != store.JobAvailable || j.Attempt != 0 {
		t.Fatalf("a job claimed after shutdown started: %+v", j)
	}
}

func TestWorkerCancelStopsCMD(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "long"); r.code != 0 {
		t.Fatal(r)
	}
	id := f.submit(t, "--kind", "long", "--resource", "r").ID
	// CMD ignores SIGTERM (after saying so): SIGKILL after --grace ends it. The shell runs its
	// trap only once its current sleep ended: the grace leaves a loaded machine time for that.
	errOut, done := f.workerAsync(t, "--kind", "long", "--lease-ttl", "6s", "--grace", "2s", "--",
		"sh", "-c", `trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done`)
	waitSeen(t, errOut, fmt.Sprintf("[job %d] ready", id))
	r := f.cli(t, "jobs", "cancel", fmt.Sprint(id))
	if r.code != 0 || !strings.Contains(r.stdout, "cancel requested") {
		t.Fatalf("cancel of the running job: %s", r)
	}
	waitSeen(t, errOut, jobEnded(id, store.JobCancelled))
	if r := stopWorker(t, done); r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("[job %d] got TERM", id)) ||
		!strings.Contains(r.stderr, "sending SIGKILL") {
		t.Fatalf("worker: %s", r)
	}
	j := f.job(t, id)
	if j.State != store.JobCancelled || len(j.Errors) != 1 || j.Errors[0].Code != store.CodeCancelled ||
		!strings.Contains(j.Errors[0].Message, "stopped (baton: job cancelled): CMD killed by signal 9") {
		t.Fatalf("cancelled job: %+v", j)
	}
}

// watchFIFO makes a FIFO at path and reads it: the first line written is sent on line; eof is
// closed when no writer is left. The tests use it to see a process start and die.
func watchFIFO(t *testing.T, path string) (line <-chan string, eof <-chan struct{}) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	lineC, eofC := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(eofC)
		fd, err := os.Open(path) // waits for a writer
		if err != nil {
			return
		}
		defer fd.Close()
		r := bufio.NewReader(fd)
		l, _ := r.ReadString('\n')
		lineC <- l
		_, _ = io.Copy(io.Discard, r)
	}()
	return lineC, eofC
}

func waitLine(t *testing.T, line <-chan string, want string) {
	t.Helper()
	select {
	case got := <-line:
		if got != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	case <-time.After(hangGuard):
		t.Fatalf("%q not written after %s (hung)", want, hangGuard)
	}
}

func waitEOF(t *testing.T, eof <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-eof:
	case <-time.After(hangGuard):
		t.Fatalf("%s still alive after %s (hung)", what, hangGuard)
	}
}

func TestWorkerKillsWhatCMDLeftRunning(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "bg"); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	line, eof := watchFIFO(t, filepath.Join(dir, "alive"))
	id := f.submit(t, "--kind", "bg", "--resource", "r").ID
	// CMD exits at once, leaving a process in the background that holds the FIFO open.
	errOut, done := f.workerAsync(t, "--kind", "bg", "--",
		"sh", "-c", `exec 3>"$1/alive"; echo started >&3; sleep 1000 & exit 0`, "sh", dir)
	waitLine(t, line, "started\n")
	waitSeen(t, errOut, jobEnded(id, store.JobSucceeded))
	waitEOF(t, eof, "the process CMD left in the background")
	if r := stopWorker(t, done); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
}

// TestWorkerHelperProcess is baton itself when run by TestWorkerKilledKillsCMD.
func TestWorkerHelperProcess(t *testing.T) {
	if os.Getenv("BATON_TEST_HELPER_PROCESS") != "1" {
		t.Skip("a helper process of TestWorkerKilledKillsCMD")
	}
	args := os.Args
	for len(args) > 0 && args[0] != "--" {
		args = args[1:]
	}
	os.Exit(run(args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// A worker killed with SIGKILL cannot stop its CMDs: the kernel does (Pdeathsig), so that the
// job's retry, once the lease expires, cannot overlap with the orphaned CMD.
func TestWorkerKilledKillsCMD(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "orphan"); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	line, eof := watchFIFO(t, filepath.Join(dir, "alive"))
	f.submit(t, "--kind", "orphan", "--resource", "r")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerHelperProcess$", "--",
		"worker", "--server", f.url, "--kind", "orphan", "--",
		"sh", "-c", `exec 3>"$1/alive"; echo started >&3; exec sleep 1000`, "sh", dir)
	cmd.Env = append(os.Environ(), "BATON_TEST_HELPER_PROCESS=1", "BATON_TOKEN=")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitLine(t, line, "started\n")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	waitEOF(t, eof, "CMD of the killed worker")
	if strings.Contains(out.String(), "PASS") || !strings.Contains(out.String(), "baton worker: job started") {
		t.Fatalf("helper process output:\n%s", out.String())
	}
}

func TestWorkerRefusesUnregisteredKinds(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "known"); r.code != 0 {
		t.Fatal(r)
	}
	r := f.cli(t, "worker", "--kind", "known,typo", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, `kind "typo" not registered on the server (registered: known)`) {
		t.Fatalf("worker of an unregistered kind: %s", r)
	}
}

func TestPrefixWriterAndTail(t *testing.T) {
	var out bytes.Buffer
	tail := &tailBuffer{}
	p := &prefixWriter{w: &out, prefix: "[job 7] ", tail: tail}
	for _, s := range []string{"one\ntw", "o\r\n", "", "three"} {
		p.Write([]byte(s))
	}
	p.flush()
	if got := out.String(); got != "[job 7] one\n[job 7] two\n[job 7] three\n" {
		t.Fatalf("prefixed output %q", got)
	}
	if got := tail.last(400); got != "one\ntwo\r\nthree" {
		t.Fatalf("tail %q", got)
	}
	// The tail keeps whole lines when it can, and valid UTF-8 when it cannot.
	tail = &tailBuffer{}
	tail.write([]byte(strings.Repeat("x", 10000) + "\nlast line\n\n"))
	if got := tail.last(400); got != "last line" {
		t.Fatalf("tail %q", got)
	}
	tail = &tailBuffer{}
	tail.write([]byte(strings.Repeat("é", 1000)))
	if got := tail.last(401); !utf8.ValidString(got) || !strings.HasPrefix(got, "…é") || len(got) > 401+len("…") {
		t.Fatalf("tail %q", got)
	}
}
