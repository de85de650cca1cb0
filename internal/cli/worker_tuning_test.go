//go:build linux

package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// --backoff-base sets the wait before a failed job's retry: with 10m (jittered down to no less
// than 5m) the retry is scheduled minutes after the failure, where the default 1s base would
// retry within a second.
func TestWorkerBackoffFlags(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "t"); r.code != 0 {
		t.Fatal(r)
	}
	id := f.submit(t, "--kind", "t", "--resource", "r", "--max-attempts", "3").ID
	errOut, done := f.workerAsync(t, "--kind", "t", "--backoff-base", "10m", "--backoff-max", "20m", "--", "false")
	waitSeen(t, errOut, jobEnded(id, store.JobRetryable))
	if r := stopWorker(t, done); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
	j := f.job(t, id)
	if j.State != store.JobRetryable || len(j.Errors) != 1 {
		t.Fatalf("failed job: %+v", j)
	}
	if wait := j.ScheduledAt.Sub(j.Errors[0].At); wait < 5*time.Minute-time.Second || wait > 10*time.Minute+time.Second {
		t.Fatalf("retry scheduled %s after the failure, want 5m..10m (--backoff-base 10m)", wait)
	}
}

// --heartbeat-interval renews a running job's lease that often: with 200ms (the default for a
// 60s TTL is 20s), successive heartbeats move the lease's expiry on by far less than 20s each.
func TestWorkerHeartbeatIntervalFlag(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "slow"); r.code != 0 {
		t.Fatal(r)
	}
	id := f.submit(t, "--kind", "slow", "--resource", "r").ID
	errOut, done := f.workerAsync(t, "--kind", "slow", "--lease-ttl", "60s", "--heartbeat-interval", "200ms", "--",
		"sh", "-c", `echo ready; sleep 600`)
	waitSeen(t, errOut, fmt.Sprintf("[job %d] ready", id))
	// Each heartbeat sets the expiry to the store's now + TTL, so the step between two expiries
	// is the time between those heartbeats on the store's clock: never under the interval, and
	// under the default interval only if the flag took effect. A loaded machine stretches the
	// steps, by nowhere near the 20s that would make them look like the default's.
	deadline := time.Now().Add(hangGuard)
	var steps []time.Duration
	for last := f.job(t, id).LeaseExpiresAt; len(steps) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lease renewed %d times in %s with --heartbeat-interval 200ms (expiry still %s): hung", len(steps), hangGuard, last)
		}
		if exp := f.job(t, id).LeaseExpiresAt; exp.After(last) {
			steps, last = append(steps, exp.Sub(last)), exp
		}
	}
	for _, step := range steps {
		if step >= 20*time.Second {
			t.Fatalf("expiry steps %v with --heartbeat-interval 200ms; a step of the default interval (20s) or more", steps)
		}
	}
	t.Logf("expiry steps between polls of the job: %v", steps)
	if r := f.cli(t, "jobs", "cancel", fmt.Sprint(id)); r.code != 0 {
		t.Fatal(r)
	}
	waitSeen(t, errOut, jobEnded(id, store.JobCancelled))
	if r := stopWorker(t, done); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
}

// Zero, negative and inconsistent values are usage errors (exit 2) that name the flag.
func TestWorkerTuningFlagsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--heartbeat-interval", "0"}, "--heartbeat-interval must be positive (got 0s)"},
		{[]string{"--heartbeat-interval", "-1s"}, "--heartbeat-interval must be positive (got -1s)"},
		{[]string{"--lease-ttl", "30s", "--heartbeat-interval", "11s"}, "--heartbeat-interval 11s is longer than a third of --lease-ttl (10s)"},
		{[]string{"--backoff-base", "0s"}, "--backoff-base must be positive (got 0s)"},
		{[]string{"--backoff-base", "-5s"}, "--backoff-base must be positive (got -5s)"},
		{[]string{"--backoff-max", "0"}, "--backoff-max must be positive (got 0s)"},
		{[]string{"--backoff-max", "-1m"}, "--backoff-max must be positive (got -1m0s)"},
		{[]string{"--backoff-base", "2m", "--backoff-max", "1m"}, "--backoff-base 2m0s is longer than --backoff-max 1m0s"},
	} {
		args := append(append([]string{"worker", "--server", "http://127.0.0.1:1", "--kind", "k"}, c.args...), "--", "true")
		r := cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("worker %v: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
}
