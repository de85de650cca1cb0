package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/batontest"
	"github.com/batonhq/baton/store"
)

// Limits the way users run them: `baton serve` and `baton limits` and `baton run --limit` as
// processes. Two runs on a limit of 1 never overlap (their CMDs record when they ran); limits
// list shows the use; bad input is refused naming the field, with exit code 2.
func TestLimitsThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := batontest.Build(t, "")
	srv := batontest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	baton := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "BATON_SERVER="+srv.URL, "BATON_TOKEN=")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}
	for _, n := range []string{"0", "1000001", "x"} {
		if code, _, stderr := baton("limits", "set", "pool", n); code != exitUsage || !strings.Contains(stderr, "capacity") {
			t.Fatalf("limits set pool %s: exit %d, %q; want 2 naming capacity", n, code, stderr)
		}
	}
	if code, out, stderr := baton("limits", "set", "pool", "1"); code != 0 || !strings.Contains(out, "capacity 1") {
		t.Fatalf("limits set pool 1: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := baton("run", "--limit", "no-such", "--no-wait", "--", "true"); code != exitUsage || !strings.Contains(stderr, "limits") {
		t.Fatalf("run --limit no-such: exit %d, %q; want 2 naming limits", code, stderr)
	}

	// Two semaphore runs of a limit of 1: each CMD appends its start and end (Unix nanoseconds).
	dir := t.TempDir()
	script := `s=$(date +%s%N); touch "$0.running"; sleep 1; e=$(date +%s%N); rm "$0.running"; echo "$s $e" >> "$0"`
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, stderr := baton("run", "--limit", "pool", "--wait", "2m", "--", "sh", "-c", script, filepath.Join(dir, "log"+strconv.Itoa(i)))
			if code != 0 {
				results[i] = "exit " + strconv.Itoa(code) + ": " + stderr
			}
		}()
	}
	// While one holds the unit: limits list shows it used, and the limit cannot be deleted.
	deadline := time.Now().Add(time.Minute)
	for {
		m0, _ := filepath.Glob(filepath.Join(dir, "*.running"))
		if len(m0) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no run started within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, stderr := baton("limits", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^pool\s+1\s+1\s+\S+\s+[01]$`).MatchString(out) {
		t.Fatalf("limits list while held: exit %d %q %q; want pool used 1 of 1", code, out, stderr)
	}
	if code, _, stderr := baton("limits", "delete", "pool"); code != exitConflict {
		t.Fatalf("limits delete while held: exit %d %q; want 4", code, stderr)
	}
	wg.Wait()
	for _, r := range results {
		if r != "" {
			t.Fatal(r)
		}
	}
	var spans [][2]int64
	for i := range 2 {
		raw, err := os.ReadFile(filepath.Join(dir, "log"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(raw))
		s, _ := strconv.ParseInt(f[0], 10, 64)
		e, _ := strconv.ParseInt(f[1], 10, 64)
		spans = append(spans, [2]int64{s, e})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	if spans[1][0] < spans[0][1] {
		t.Fatalf("two runs of a limit of 1 overlapped: %v", spans)
	}
	code, out, _ = baton("limits", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^pool\s+0\s+1\s+-\s+0$`).MatchString(out) {
		t.Fatalf("limits list after the runs: exit %d %q; want pool used 0 of 1", code, out)
	}
	if code, out, stderr := baton("limits", "delete", "pool"); code != 0 {
		t.Fatalf("limits delete: exit %d %q %q", code, out, stderr)
	}
	if code, _, _ := baton("limits", "delete", "pool"); code != exitNotFound {
		t.Fatalf("limits delete of a deleted limit: exit %d, want 3", code)
	}
}

// baton run --lock A --lock B holds both, all or nothing: refused while B is held, naming it;
// then run with both held (BATON_LOCK_KEY is A), and both free after.
func TestRunSeveralLocks(t *testing.T) {
	f := newFixture(t, nil)
	st := f.client(t, "")
	held, err := st.Acquire(context.Background(), &store.AcquireParams{Key: "db/b", LeaseID: "x", Holder: "job-7", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, _, done := f.runAsync(t, "", "--lock", "db/a", "--lock", "db/b", "--no-wait", "--", "echo", "ran")
	if r := waitResult(t, done); r.code != exitBusy || r.stdout != "" || !strings.Contains(r.stderr, `"db/b" held by "job-7"`) {
		t.Fatalf("--lock db/a --lock db/b with db/b held: %s", r)
	}
	f.requireFree(t, "db/a")
	if _, err := st.Release(context.Background(), &store.ReleaseParams{Key: "db/b", LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	_, _, done = f.runAsync(t, "", "--lock", "db/a", "--lock", "db/b", "--", "sh", "-c",
		`echo "$BATON_LOCK_KEY"; baton_held=$(test -n "$BATON_FENCING_TOKEN" && echo yes); echo "$baton_held"; echo "$BATON_RESOURCES"`)
	if r := waitResult(t, done); r.code != 0 || r.stdout != "db/a\nyes\ndb/b\n" {
		t.Fatalf("--lock db/a --lock db/b: %s", r)
	}
	f.requireFree(t, "db/a")
	f.requireFree(t, "db/b")
}

// baton run --limit gives CMD the slot of its unit: with one of a limit of 2 held in slot 0, the
// run's unit is in slot 1 (BATON_LIMITS, BATON_LIMIT_SLOTS); a run without a limit gets neither.
func TestRunLimitSlotEnv(t *testing.T) {
	f := newFixture(t, nil)
	st := f.store // the fixture's server hides the store's limits behind its signalling wrapper
	ctx := context.Background()
	if _, err := st.SetLimit(ctx, &store.SetLimitParams{Name: "pool/two", Capacity: 2}); err != nil {
		t.Fatal(err)
	}
	held, err := st.Acquire(ctx, &store.AcquireParams{Key: "node/x", LeaseID: "x", Holder: "other", TTL: time.Minute, Limits: []string{"pool/two"}})
	if err != nil || held.Slots["pool/two"] != 0 {
		t.Fatalf("first unit: %+v, %v; want slot 0", held, err)
	}
	_, _, done := f.runAsync(t, "", "--lock", "node/y", "--limit", "pool/two", "--", "sh", "-c", `echo "$BATON_LIMITS=$BATON_LIMIT_SLOTS"`)
	if r := waitResult(t, done); r.code != 0 || r.stdout != "pool/two=1\n" {
		t.Fatalf("run --limit pool/two beside a unit in slot 0: %s; want pool/two=1", r)
	}
	_, _, done = f.runAsync(t, "", "--lock", "node/y", "--", "sh", "-c", `echo "${BATON_LIMITS-unset} ${BATON_RESOURCES-unset}"`)
	if r := waitResult(t, done); r.code != 0 || r.stdout != "unset unset\n" {
		t.Fatalf("run without limits or resources: %s", r)
	}
}
