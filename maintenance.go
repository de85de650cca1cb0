package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// Defaults of MaintenanceConfig.
const (
	DefaultMaintenanceKey = "baton/maintenance"
	DefaultReapInterval   = 5 * time.Second
	DefaultReapLimit      = 100
	DefaultCleanInterval  = time.Minute
	DefaultCleanLimit     = 1000
	DefaultRetention      = 24 * time.Hour
)

// MaintenanceConfig configures Queue.RunMaintenance. Zero fields take their defaults.
type MaintenanceConfig struct {
	// LeaderKey is the lease key the runners compete for (DefaultMaintenanceKey). Runners over
	// one store with the same key elect one leader, which does the work.
	LeaderKey string
	// LeaderTTL is the leader lease's TTL (DefaultTTL). A crashed leader is replaced after it.
	LeaderTTL time.Duration
	// ReapInterval: how often the leader ends the attempts of running jobs whose lease expired
	// (DefaultReapInterval), in batches of ReapLimit (DefaultReapLimit) until a batch is short.
	ReapInterval time.Duration
	ReapLimit    int
	// Backoff gives the wait before a reaped job is retried: Backoff(1) for each batch.
	// Default: DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// CleanInterval: how often the leader deletes jobs that finished more than Retention ago
	// (DefaultCleanInterval, DefaultRetention), dead letters too if CleanDiscarded.
	CleanInterval  time.Duration
	Retention      time.Duration
	CleanDiscarded bool
	// DeadLetterRetention, if positive, is how long dead letters (discarded jobs) are kept after
	// they finished, apart from Retention: the cleaner deletes them once older, whatever
	// CleanDiscarded says. Zero leaves them to CleanDiscarded (kept until purged, or deleted
	// after Retention).
	DeadLetterRetention time.Duration
	// Periodic jobs, submitted by the leader at the start of each period.
	Periodic []PeriodicJob
	// OnReaped, if set, is called for each reaped job (for metrics). It must not block.
	OnReaped func(*ReapedJob)
	// OnLeader, if set, is called with true when this runner becomes the leader and with false
	// when it stops being one. It must not block.
	OnLeader func(leading bool)
	// Logger defaults to the Queue's.
	Logger *slog.Logger
}

func (c MaintenanceConfig) withDefaults(q *Queue) (MaintenanceConfig, error) {
	if c.LeaderKey == "" {
		c.LeaderKey = DefaultMaintenanceKey
	}
	if err := store.ValidateKey(c.LeaderKey); err != nil {
		return c, &InvalidArgumentError{Field: "leader_key", Rule: err.(*InvalidArgumentError).Rule}
	}
	if c.LeaderTTL == 0 {
		c.LeaderTTL = DefaultTTL
	}
	if err := store.ValidateTTL(c.LeaderTTL); err != nil {
		return c, &InvalidArgumentError{Field: "leader_ttl", Rule: err.(*InvalidArgumentError).Rule}
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.CleanInterval == 0 {
		c.CleanInterval = DefaultCleanInterval
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"reap_interval", c.ReapInterval}, {"clean_interval", c.CleanInterval}} {
		if d.v < 10*time.Millisecond {
			return c, &InvalidArgumentError{Field: d.field, Rule: fmt.Sprintf("must be at least 10ms (got %s)", d.v)}
		}
	}
	if c.ReapLimit == 0 {
		c.ReapLimit = DefaultReapLimit
	}
	if c.ReapLimit < 1 || c.ReapLimit > store.MaxListLimit {
		return c, &InvalidArgumentError{Field: "reap_limit", Rule: fmt.Sprintf("must be between 1 and %d (got %d)", store.MaxListLimit, c.ReapLimit)}
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Retention < 0 {
		return c, &InvalidArgumentError{Field: "retention", Rule: "must not be negative"}
	}
	if c.DeadLetterRetention < 0 {
		return c, &InvalidArgumentError{Field: "dead_letter_retention", Rule: "must not be negative"}
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.Logger == nil {
		c.Logger = q.log
	}
	return c, nil
}

// maintenance is one runner of RunMaintenance.
type maintenance struct {
	q        *Queue
	cfg      MaintenanceConfig
	log      *slog.Logger
	periodic []*periodic
}

// RunMaintenance runs the queue's background work until ctx ends, then returns nil: reaping the
// attempts of crashed or cut-off workers (error code worker_timeout; the job is retried),
// deleting old finished jobs, and submitting periodic jobs. Run it in every process that should
// be able to do this work: the runners elect one leader with a Baton lease on cfg.LeaderKey, so
// the store must also be a store.Store. A runner that loses the lease stops its work at once
// and waits to be elected again.
func (q *Queue) RunMaintenance(ctx context.Context, cfg MaintenanceConfig) error {
	c, err := cfg.withDefaults(q)
	if err != nil {
		return err
	}
	ls, ok := q.st.(store.Store)
	if !ok {
		return &InvalidArgumentError{Field: "store",
			Rule: fmt.Sprintf("must also be a store.Store for the maintenance leader's lease (%T is not)", q.st)}
	}
	jobs, err := parsePeriodic(c.Periodic)
	if err != nil {
		return err
	}
	locker, err := NewLocker(ls, &Config{TTL: c.LeaderTTL, Logger: c.Logger})
	if err != nil {
		return err
	}
	m := &maintenance{q: q, cfg: c, log: c.Logger.With("leader_key", c.LeaderKey), periodic: jobs}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		lease, err := locker.Acquire(ctx, c.LeaderKey)
		switch {
		case ctx.Err() != nil:
			if lease != nil {
				m.release(ctx, lease)
			}
			return nil
		case errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument):
			return err
		case err != nil:
			m.log.Warn("baton: maintenance: acquiring the leader lease failed; retrying", "err", err)
			timer.Reset(retry.Jitter(DefaultPollInterval))
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
			continue
		}
		m.lead(ctx, lease)
		m.release(ctx, lease)
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (m *maintenance) release(ctx context.Context, lease *Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.LeaderTTL)
	defer cancel()
	if err := lease.Release(rctx); err != nil && !errors.Is(err, ErrNotHeld) {
		m.log.Warn("baton: maintenance: releasing the leader lease failed", "err", err)
	}
}

// lead does the leader's work until ctx ends or the lease is lost.
func (m *maintenance) lead(ctx context.Context, lease *Lease) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lease.Context(), cancel)
	defer stop()
	m.log.Info("baton: maintenance leader elected", "holder", lease.Holder, "token", lease.Token)
	if m.cfg.OnLeader != nil {
		m.cfg.OnLeader(true)
		defer m.cfg.OnLeader(false)
	}
	reap := time.NewTimer(0)
	defer reap.Stop()
	clean := time.NewTimer(0)
	defer clean.Stop()
	periodic := time.NewTimer(time.Hour)
	defer periodic.Stop()
	schedulePeriodic(m.periodic, time.Now())
	for {
		var periodicC <-chan time.Time
		if next := nextPeriodic(m.periodic); !next.IsZero() {
			periodic.Reset(max(time.Until(next), 0))
			periodicC = periodic.C
		}
		select {
		case <-ctx.Done():
			if err := lease.Err(); err != nil && !errors.Is(err, ErrReleased) {
				m.log.Warn("baton: maintenance leadership lost", "err", err)
			}
			return
		case <-reap.C:
			m.reap(ctx)
			reap.Reset(retry.Jitter(m.cfg.ReapInterval))
		case <-clean.C:
			m.clean(ctx)
			clean.Reset(retry.Jitter(m.cfg.CleanInterval))
		case <-periodicC:
			m.submitDue(ctx, time.Now())
		}
	}
}

// reap ends expired attempts in batches until a batch comes back short.
func (m *maintenance) reap(ctx context.Context) {
	for ctx.Err() == nil {
		reaped, err := m.q.st.ReapJobs(ctx, &store.ReapParams{Limit: m.cfg.ReapLimit, RetryAfter: retryAfter(m.cfg.Backoff, 1)})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("baton: maintenance: reaping jobs failed", "err", err)
			}
			return
		}
		for _, r := range reaped {
			m.log.Info("baton: reaped a job whose attempt ended without a report", "job", r.Job.ID, "kind", r.Job.Kind,
				"resource", r.Job.Resource, "reason", r.Reason, "state", r.Job.State)
			if m.cfg.OnReaped != nil {
				m.cfg.OnReaped(r)
			}
		}
		if len(reaped) < m.cfg.ReapLimit {
			return
		}
	}
}

// clean deletes old finished jobs in batches until a batch comes back short.
func (m *maintenance) clean(ctx context.Context) {
	total := 0
	for ctx.Err() == nil {
		n, err := m.q.st.CleanJobs(ctx, &store.CleanParams{Age: m.cfg.Retention,
			Discarded: m.cfg.CleanDiscarded || m.cfg.DeadLetterRetention > 0, DiscardedAge: m.cfg.DeadLetterRetention,
			Limit: DefaultCleanLimit})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("baton: maintenance: cleaning jobs failed", "err", err)
			}
			break
		}
		total += n
		if n < DefaultCleanLimit {
			break
		}
	}
	if total > 0 {
		m.log.Debug("baton: maintenance: deleted old finished jobs", "count", total)
	}
}
