package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// `baton run --cooldown` through the binary: the key rests after the run, a second run is
// refused as busy (exit code 75) with the time left, and runs once the cooldown is over.
func TestRunCooldownThroughTheBinary(t *testing.T) {
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) { runCooldown(t, storeURL(t)) })
	}
}

func runCooldown(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	ctx := context.Background()
	if code, out := s.baton(ctx, nil, "run", "--lock", "node/node-1", "--no-wait", "--cooldown", "3s", "--", "echo", "remediated"); code != 0 || !strings.Contains(out, "remediated") {
		t.Fatalf("first run: %d %s", code, out)
	}
	code, out := s.baton(ctx, nil, "run", "--lock", "node/node-1", "--no-wait", "--", "echo", "remediated again")
	if code != 75 || strings.Contains(out, "remediated again") ||
		!regexp.MustCompile(`lock "node/node-1" is resting \(cooldown\) for another [0-9.]+m?s`).MatchString(out) {
		t.Fatalf("second run within the cooldown: %d %s; want exit 75, resting with the time left", code, out)
	}
	left := regexp.MustCompile(`for another ([0-9.]+m?s)`).FindStringSubmatch(out)[1]
	if d, err := time.ParseDuration(left); err != nil || d <= 0 || d > 3*time.Second {
		t.Fatalf("time left %q, want in (0, 3s]", left)
	}
	// Each run is one attempt: retry until one is let in (s.baton guards each against a hang).
	refused := 0
	waitFor(t, "a run after the cooldown", func() bool {
		code, out = s.baton(ctx, nil, "run", "--lock", "node/node-1", "--no-wait", "--", "echo", "remediated again")
		if code != 0 && code != 75 {
			t.Fatalf("run after the cooldown: %d %s", code, out)
		}
		refused += boolInt(code == 75)
		return code == 0
	})
	if !strings.Contains(out, "remediated again") {
		t.Fatalf("run after the cooldown printed %q", out)
	}
	// The cooldown is kept on the server's clock: the audit log's release and the next grant,
	// not this test's view of them, which a loaded machine delays.
	evs := s.events(t, "node/node-1")
	if len(evs) != 4 || evs[1].Kind != "release" || evs[2].Kind != "acquire" {
		t.Fatalf("audit log of node/node-1: %+v; want acquire, release, acquire, release", evs)
	}
	if rest := evs[2].At.Sub(evs[1].At); rest < 3*time.Second {
		t.Fatalf("granted again %s after a release with --cooldown 3s", rest)
	}
	t.Logf("granted again %s after the release (cooldown 3s), %d runs refused meanwhile", evs[2].At.Sub(evs[1].At), refused)
	if code, out := s.baton(ctx, nil, "run", "--lock", "k", "--cooldown", "-1s", "--", "true"); code != 2 || !strings.Contains(out, "--cooldown") {
		t.Fatalf("--cooldown -1s: %d %s; want a usage error naming the flag", code, out)
	}
}

// An operator ends a lease cooldown early with force-release: `locks acquire --cooldown`, a
// release, a refused acquire, a force-release that says what it cleared (audited), and a waiting
// `baton run` that gets the key at once.
func TestForceReleaseClearsACooldown(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forceReleaseClearsCooldown(t, storeURL(t))
		})
	}
}

func forceReleaseClearsCooldown(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	ctx := context.Background()
	code, out := s.baton(ctx, nil, "locks", "acquire", "node/node-2", "--holder", "remediator", "--cooldown", "1h", "-o", "json")
	var lease struct {
		LeaseID string `json:"lease_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &lease) != nil || lease.LeaseID == "" {
		t.Fatalf("locks acquire --cooldown 1h: %d %s", code, out)
	}
	if code, out := s.baton(ctx, nil, "locks", "release", "node/node-2", "--lease", lease.LeaseID); code != 0 {
		t.Fatalf("release: %d %s", code, out)
	}
	if code, out := s.baton(ctx, nil, "locks", "acquire", "node/node-2"); code != 75 || !strings.Contains(out, `"node/node-2" is resting (cooldown) for another 5`) {
		t.Fatalf("acquire within the cooldown: %d %s; want 75, about 1h left", code, out)
	}

	// A run waits for the key; the force-release lets it in. With an hour of cooldown left and
	// a wait far shorter than that, a run that exits 0 was let in by the clear.
	before := s.refusals(t, "cooldown")
	dir := t.TempDir()
	run, runOut := startRun(t, s, dir, "run", "--lock", "node/node-2", "--wait", "10m", "--", "sh", "-c", `touch "$DIR/ran"`)
	// The metric is the only signal of a separate process that it is waiting.
	waitFor(t, "the run to find node/node-2 resting", func() bool {
		if run.ProcessState != nil {
			t.Fatalf("the waiting run exited: %s", runOut)
		}
		return s.refusals(t, "cooldown") != before
	})
	cleared := time.Now()
	code, out = s.baton(ctx, nil, "locks", "force-release", "node/node-2", "--reason", "node-2 checked by hand")
	if code != 0 || !regexp.MustCompile(`^cleared the cooldown on node/node-2 \(5[0-9]m[0-9]+s were left\); the next acquire is granted at once\n$`).MatchString(out) {
		t.Fatalf("force-release on the resting key: %d %q", code, out)
	}
	waitFile(t, filepath.Join(dir, "ran"))
	if err := run.Wait(); err != nil {
		t.Fatalf("the waiting run: %v\n%s", err, runOut)
	}
	t.Logf("the waiting run got the key %s after the clear", time.Since(cleared).Round(time.Millisecond))

	code, out = s.baton(ctx, nil, "locks", "force-release", "node/node-2", "--reason", "again")
	if code != 3 || !strings.Contains(out, `"node/node-2" is free: no lease to end and no cooldown or lock-delay to clear`) {
		t.Fatalf("force-release on a free key: %d %s", code, out)
	}
	code, out = s.baton(ctx, nil, "events", "--key", "node/node-2", "--oldest-first", "-o", "json")
	var evs []struct {
		Kind, Actor, Reason string
		LeaseID             string `json:"lease_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
		t.Fatalf("events: %d %s", code, out)
	}
	var kinds []string
	for _, ev := range evs {
		if ev.Kind == "ticket_enqueue" {
			continue // the waiting run's ticket, on a store with a line
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == "clear_rest" && (ev.Reason != "node-2 checked by hand" || ev.LeaseID != lease.LeaseID) {
			t.Fatalf("clear_rest event %+v, want the reason and the released lease %s", ev, lease.LeaseID)
		}
	}
	if got := strings.Join(kinds, " "); got != "acquire release clear_rest acquire release" {
		t.Fatalf("audit log of node/node-2: %s", got)
	}
}

// refusals is the server's count of acquires refused for reason.
func (s *daemon) refusals(t *testing.T, reason string) int {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	prefix := `baton_lock_acquisition_failures_total{reason="` + reason + `"} `
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}
