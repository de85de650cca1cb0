package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const periodicFile = `{"periodic": [{"name": "reconcile", "schedule": "@every 1s", "kind": "status.reconcile",
	"resource": "app/web", "args": {"app": "web"}, "policy": "queue"}]}`

// periodicJobs lists the jobs of the periodic job "reconcile" by the start of their period.
func periodicJobs(t *testing.T, s *daemon) map[int64]int {
	t.Helper()
	var page struct {
		Jobs []struct {
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"jobs"`
	}
	if code := s.call("GET", "/v1/jobs?resource=app/web&limit=1000", nil, &page); code != 200 {
		t.Fatalf("list jobs: %d", code)
	}
	periods := make(map[int64]int)
	for _, j := range page.Jobs {
		sec, ok := strings.CutPrefix(j.IdempotencyKey, "periodic:reconcile:")
		n, err := strconv.ParseInt(sec, 10, 64)
		if !ok || err != nil {
			t.Fatalf("job with idempotency key %q; want periodic:reconcile:<unix seconds>", j.IdempotencyKey)
		}
		periods[n]++
	}
	return periods
}

// Two servers on one SQLite file with the same 1 s periodic job: exactly one job per period,
// whichever server leads, across a stop and restart of one of them.
func TestPeriodicOneJobPerPeriodAcrossServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "periodic.json")
	if err := os.WriteFile(file, []byte(periodicFile), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite://" + filepath.Join(dir, "baton.db")
	a := startServer(t, storeURL, "--periodic-file", file)
	b := startServer(t, storeURL, "--periodic-file", file)
	a.putKind(map[string]any{"name": "status.reconcile"})

	on := a // a server that is up, to list the jobs
	total := func() int {
		n := 0
		for _, c := range periodicJobs(t, on) {
			n += c
		}
		return n
	}
	// The job list is the signal.
	jobsAtLeast := func(what string, n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d periodic jobs (%s)", n, what), func() bool { return total() >= n })
	}
	jobsAtLeast("two servers", 4)
	on = b
	a.stop() // if it led, it releases the maintenance lease and b takes over
	jobsAtLeast("one server", total()+3)
	a.start()
	on = a
	b.stop() // the same the other way round
	jobsAtLeast("after a restart", total()+3)

	periods := periodicJobs(t, a)
	first, last := int64(1<<62), int64(0)
	for p, n := range periods {
		if n != 1 {
			t.Errorf("period %d has %d jobs; want one", p, n)
		}
		first, last = min(first, p), max(last, p)
	}
	// @every periods are aligned on the epoch: no job falls between two seconds, and there are
	// no more jobs than periods (a leader change may miss a period, never add one).
	if span := int(last - first + 1); len(periods) > span {
		t.Fatalf("%d periods with jobs within %d seconds: %v", len(periods), span, periods)
	}

	ctx := context.Background()
	sent := time.Now()
	code, out := a.baton(ctx, nil, "periodic", "list", "-o", "json")
	answered := time.Now()
	if code != 0 {
		t.Fatalf("baton periodic list: exit %d\n%s", code, out)
	}
	var list []struct {
		Name, Schedule, Kind, Resource string
		NextRun                        time.Time `json:"next_run"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("periodic list -o json: %v\n%s", err, out)
	}
	// The next run is the start of the first period after the server's now, which lies between
	// the command's start and its answer, however long a loaded machine makes that.
	if len(list) != 1 || list[0].Name != "reconcile" || list[0].Schedule != "@every 1s" || list[0].Kind != "status.reconcile" ||
		list[0].Resource != "app/web" || !list[0].NextRun.After(sent) || list[0].NextRun.After(answered.Add(time.Second)) {
		t.Fatalf("periodic list = %+v (asked between %s and %s); want reconcile, @every 1s, the next run at most a second after the server's now",
			list, sent.Format(time.RFC3339Nano), answered.Format(time.RFC3339Nano))
	}
	code, out = a.baton(ctx, nil, "periodic", "list")
	if code != 0 || !strings.Contains(out, "NEXT RUN") || !strings.Contains(out, "reconcile") || !strings.Contains(out, "(in ") {
		t.Fatalf("baton periodic list: exit %d\n%s", code, out)
	}
}

// A bad periodic file stops serve with exit 2 and names the member at fault.
func TestPeriodicFileBad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, c := range map[string]struct{ file, want string }{
		"schedule": {`{"periodic": [{"name": "r", "schedule": "every 30s", "kind": "k", "resource": "x"}]}`, "periodic[0].schedule"},
		"name":     {`{"periodic": [{"schedule": "@every 1s", "kind": "k", "resource": "x"}]}`, "periodic[0].name"},
		"resource": {`{"periodic": [{"name": "r", "schedule": "@every 1s", "kind": "k"}]}`, "periodic[0].resource"},
		"unknown":  {`{"periodic": [{"name": "r", "shedule": "@every 1s", "kind": "k", "resource": "x"}]}`, `"shedule"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, name+".json")
			if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			s := &daemon{t: t}
			code, out := s.baton(context.Background(), nil, "serve", "--listen", "127.0.0.1:0", "--store", "sqlite://"+filepath.Join(dir, "b.db"),
				"--periodic-file", file)
			if code != 2 || !strings.Contains(out, "--periodic-file") || !strings.Contains(out, c.want) {
				t.Fatalf("serve with %s: exit %d; want 2 and an error naming %s:\n%s", c.file, code, c.want, out)
			}
		})
	}
}
