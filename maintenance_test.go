package baton_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// runMaintenance runs q.RunMaintenance until stop (or the test's end) and checks it returned nil.
func runMaintenance(t *testing.T, q *baton.Queue, cfg baton.MaintenanceConfig) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.RunMaintenance(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunMaintenance: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Two runners on one store: one leads at a time (the lease on the leader key says which), and
// the other takes over when the leader stops.
func TestMaintenanceLeaderElection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		q := newQueue(t, st)
		var leaders atomic.Int32
		elected := make(chan int, 4)
		cfg := func(i int) baton.MaintenanceConfig {
			return baton.MaintenanceConfig{LeaderTTL: 2 * time.Second, OnLeader: func(leading bool) {
				if leading {
					if n := leaders.Add(1); n != 1 {
						t.Errorf("%d leaders at once", n)
					}
					elected <- i
				} else {
					leaders.Add(-1)
				}
			}}
		}
		stops := []func(){runMaintenance(t, q, cfg(0)), runMaintenance(t, q, cfg(1))}
		first := recv(t, elected)
		locker, err := baton.NewLocker(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := locker.Get(testCtx(t), baton.DefaultMaintenanceKey)
		if err != nil {
			t.Fatalf("the leader holds no lease: %v", err)
		}
		stops[first]()
		second := recv(t, elected)
		if second == first {
			t.Fatalf("runner %d elected twice", first)
		}
		next, err := locker.Get(testCtx(t), baton.DefaultMaintenanceKey)
		if err != nil || next.ID == lease.ID || next.Token <= lease.Token {
			t.Fatalf("after the handover: %+v (was %+v), %v", next, lease, err)
		}
		stops[second]()
		if _, err := locker.Get(testCtx(t), baton.DefaultMaintenanceKey); !errors.Is(err, baton.ErrNotFound) {
			t.Fatalf("lease after both runners stopped: %v", err)
		}
	})
}

// A job whose worker vanished (claimed with a 1s lease and never heartbeated) is reaped to
// retryable with worker_timeout, then run by a real worker.
func TestMaintenanceReapsAbandonedJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		q := newQueue(t, st, baton.Kind{Name: "k"})
		j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
		claimed, err := st.ClaimJobs(testCtx(t), &store.ClaimParams{Worker: "ghost", Kinds: []string{"k"}, Limit: 1, TTL: time.Second})
		if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID {
			t.Fatalf("claim: %+v, %v", claimed, err)
		}
		reaped := make(chan *baton.ReapedJob, 1)
		runMaintenance(t, q, baton.MaintenanceConfig{
			ReapInterval: 50 * time.Millisecond,
			Backoff:      func(int) time.Duration { return 0 },
			OnReaped:     func(r *baton.ReapedJob) { reaped <- r },
		})
		ch, onEnd := endedChan(1)
		// The real worker's lease is long: only the ghost's 1 s lease is under test, and a loaded
		// machine must not get the second attempt reaped too.
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: 10 * time.Second,
			Handlers: map[string]baton.Handler{"k": func(_ context.Context, job *baton.Job) error {
				if job.Attempt != 2 {
					return baton.Permanent(errors.New("expected the second attempt"))
				}
				return nil
			}},
			OnJobEnd: onEnd,
			Logger:   quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		select {
		case r := <-reaped:
			if r.Job.ID != j.ID || r.Reason != store.CodeWorkerTimeout || r.Job.State != baton.JobRetryable {
				t.Fatalf("reaped %+v: job %d %s", r, r.Job.ID, r.Job.State)
			}
		case <-testCtx(t).Done():
			t.Fatal("nothing reaped")
		}
		if e := waitEnded(t, ch); e.outcome != baton.JobSucceeded {
			t.Fatalf("outcome %s", e.outcome)
		}
		got := getJob(t, q, j.ID)
		if got.State != baton.JobSucceeded || got.Attempt != 2 || len(got.Errors) != 1 || got.Errors[0].Code != store.CodeWorkerTimeout {
			t.Fatalf("job %s, attempt %d, errors %+v", got.State, got.Attempt, got.Errors)
		}
	})
}

// "@every 1s" across three runners, with a leader change on the way: one job per period.
func TestMaintenancePeriodic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		q := newQueue(t, st, baton.Kind{Name: "tick"})
		elected := make(chan int, 8)
		stops := make([]func(), 3)
		for i := range stops {
			stops[i] = runMaintenance(t, q, baton.MaintenanceConfig{
				LeaderTTL: 2 * time.Second,
				Periodic:  []baton.PeriodicJob{{Name: "tick", Schedule: "@every 1s", Kind: "tick", Resource: "periodic/tick"}},
				OnLeader: func(leading bool) {
					if leading {
						elected <- i
					}
				},
			})
		}
		runs := make(chan *baton.Job, 16)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: time.Second,
			Handlers: map[string]baton.Handler{"tick": func(_ context.Context, job *baton.Job) error {
				runs <- job
				return nil
			}},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		leader := recv(t, elected)
		recv(t, runs)
		stops[leader]() // hand over to another runner mid-stream
		for range 2 {
			select {
			case <-runs:
			case <-testCtx(t).Done():
				t.Fatal("periodic jobs stopped after the leader change")
			}
		}
		for _, stop := range stops {
			stop()
		}
		jobs := listAll(t, q)
		periods := map[int64]bool{}
		for _, j := range jobs {
			rest, ok := strings.CutPrefix(j.IdempotencyKey, "periodic:tick:")
			sec, err := strconv.ParseInt(rest, 10, 64)
			if !ok || err != nil || periods[sec] {
				t.Fatalf("job %d: idempotency key %q (periods so far %v)", j.ID, j.IdempotencyKey, periods)
			}
			periods[sec] = true
			if j.Kind != "tick" || j.Resource != "periodic/tick" {
				t.Fatalf("job %+v", j)
			}
		}
		if len(jobs) < 3 {
			t.Fatalf("%d periodic jobs", len(jobs))
		}
	})
}

func TestMaintenanceConfigValidation(t *testing.T) {
	q := newQueue(t, openSQLite(t), baton.Kind{Name: "k"})
	p := func(j baton.PeriodicJob) []baton.PeriodicJob {
		if j.Name == "" {
			j.Name = "p"
		}
		if j.Kind == "" {
			j.Kind = "k"
		}
		if j.Resource == "" {
			j.Resource = "r"
		}
		return []baton.PeriodicJob{j}
	}
	cases := []struct {
		cfg   baton.MaintenanceConfig
		field string
	}{
		{baton.MaintenanceConfig{LeaderTTL: time.Millisecond}, "leader_ttl"},
		{baton.MaintenanceConfig{LeaderKey: "bad\x00key"}, "leader_key"},
		{baton.MaintenanceConfig{ReapInterval: time.Millisecond}, "reap_interval"},
		{baton.MaintenanceConfig{CleanInterval: time.Millisecond}, "clean_interval"},
		{baton.MaintenanceConfig{ReapLimit: -1}, "reap_limit"},
		{baton.MaintenanceConfig{Retention: -time.Hour}, "retention"},
		{baton.MaintenanceConfig{DeadLetterRetention: -time.Hour}, "dead_letter_retention"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "61 * * * *"})}, "periodic[0].schedule"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "CRON_TZ=UTC"})}, "periodic[0].schedule"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "@every 1500ms"})}, "periodic[0].schedule"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "@every 100ms"})}, "periodic[0].schedule"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "@every 1h", Kind: "bad kind"})}, "periodic[0].kind"},
		{baton.MaintenanceConfig{Periodic: p(baton.PeriodicJob{Schedule: "@hourly", Name: strings.Repeat("n", 300)})}, "periodic[0].idempotency_key"},
		{baton.MaintenanceConfig{Periodic: append(p(baton.PeriodicJob{Schedule: "@daily"}), p(baton.PeriodicJob{Schedule: "@daily"})...)}, "periodic[1].name"},
	}
	for _, c := range cases {
		if err := q.RunMaintenance(testCtx(t), c.cfg); !isInvalid(err, c.field) {
			t.Errorf("%+v: %v, want invalid %s", c.cfg, err, c.field)
		}
	}
	// A job store without leases cannot elect a leader.
	jq := newQueue(t, struct{ store.JobStore }{openSQLite(t)})
	if err := jq.RunMaintenance(testCtx(t), baton.MaintenanceConfig{}); !isInvalid(err, "store") {
		t.Errorf("RunMaintenance on a JobStore that is not a Store: %v", err)
	}
}
