package server

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/store"
)

// jobMetrics are the job queue's metrics, on the server's own registry. The counters count what
// this server did; the gauges are read from the store when scraped, so they are right whatever
// other servers or library users do.
type jobMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	reaped   *prometheus.CounterVec
}

func newJobMetrics(reg *prometheus.Registry, js store.JobStore) *jobMetrics {
	m := &jobMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_jobs_total",
			Help: "Jobs that entered a state through this server (submit, replace, complete, fail, cancel, reap), by kind and state.",
		}, []string{"kind", "state"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_job_duration_seconds",
			Help:    "Duration of attempts reported through this server (complete, fail), from start to end on the store's clock.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10), // 10 ms .. ~44 min
		}, []string{"kind"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_job_reaped_total",
			Help: "Attempts ended by the reaper, by reason: worker_timeout (lease expired), lock_state_lost.",
		}, []string{"reason"}),
	}
	for _, r := range []string{store.CodeWorkerTimeout, store.CodeLockStateLost} {
		m.reaped.WithLabelValues(r)
	}
	reg.MustRegister(m.total, m.duration, m.reaped)
	if js != nil {
		reg.MustRegister(newJobGauges(js))
	}
	return m
}

// entered counts a job's state after an operation that produced it.
func (m *jobMetrics) entered(j *store.Job) {
	m.total.WithLabelValues(j.Kind, string(j.State)).Inc()
}

// submitted counts the state of a job a submit created and the queued jobs it superseded (of its
// kind, on its resource: store.SubmitResult.Superseded).
func (m *jobMetrics) submitted(r *store.SubmitResult) {
	m.entered(r.Job)
	if r.Superseded > 0 {
		m.total.WithLabelValues(r.Job.Kind, string(store.JobSuperseded)).Add(float64(r.Superseded))
	}
}

// attemptEnded counts the state a complete or fail produced and observes the attempt's
// duration: from its start to its end (the finish, or for a retryable job the error's time).
func (m *jobMetrics) attemptEnded(j *store.Job) {
	m.entered(j)
	end := j.FinishedAt
	if end.IsZero() && len(j.Errors) > 0 {
		end = j.Errors[len(j.Errors)-1].At
	}
	if j.AttemptedAt.IsZero() || end.IsZero() || end.Before(j.AttemptedAt) {
		return
	}
	m.duration.WithLabelValues(j.Kind).Observe(end.Sub(j.AttemptedAt).Seconds())
}

// ObserveReaped counts a job the maintenance reaper ended, in baton_job_reaped_total and
// baton_jobs_total. The serve command passes it as baton.MaintenanceConfig.OnReaped. It does not
// block.
func (s *Server) ObserveReaped(r *store.ReapedJob) {
	if r == nil || r.Job == nil {
		return
	}
	s.jobMetrics.reaped.WithLabelValues(r.Reason).Inc()
	s.jobMetrics.entered(r.Job)
}

// jobGauges reports, per kind, running jobs and queue depth from store.JobCounts and, when the
// store is a store.KindStatsStore, the oldest running attempt's age and the dead letters, read
// when scraped, at most once per second. Every registered kind is reported, at 0 when it has no
// jobs.
type jobGauges struct {
	js                                        store.JobStore
	running, depth, oldest, dead, rateReached *prometheus.Desc

	mu      sync.Mutex
	at      time.Time
	counted bool
	byKind  map[string]*kindGauges
}

// kindGauges are one kind's gauge values.
type kindGauges struct {
	running, depth, oldestAge, dead, rateReached float64
}

func newJobGauges(js store.JobStore) *jobGauges {
	if gj, ok := js.(*gatedJobs); ok {
		js = gj.JobStore // administrative reads, like Kinds and JobCounts: not gated
	}
	g := &jobGauges{js: js,
		running: prometheus.NewDesc("baton_jobs_running", "Running jobs in the store, by kind.", []string{"kind"}, nil),
		depth: prometheus.NewDesc("baton_job_queue_depth",
			"Jobs waiting in the store (scheduled, available or retryable), by kind.", []string{"kind"}, nil),
	}
	if _, ok := js.(store.KindStatsStore); ok {
		g.oldest = prometheus.NewDesc("baton_jobs_oldest_running_age_seconds",
			"How long the oldest running attempt of each kind has run, on the store's clock (0: none runs).", []string{"kind"}, nil)
		g.dead = prometheus.NewDesc("baton_job_dead_letter_depth",
			"Dead letters (discarded jobs) in the store, by kind.", []string{"kind"}, nil)
		g.rateReached = prometheus.NewDesc("baton_job_rate_reached_resources",
			"Resources on which the kind's rate is reached now: its next job there waits for the window to free (or is skipped), by kind.",
			[]string{"kind"}, nil)
	}
	return g
}

func (g *jobGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.running
	ch <- g.depth
	if g.oldest != nil {
		ch <- g.oldest
		ch <- g.dead
		ch <- g.rateReached
	}
}

func (g *jobGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.counted || time.Since(g.at) > time.Second {
		if byKind, err := g.count(); err == nil {
			g.byKind, g.at, g.counted = byKind, time.Now(), true
		}
	}
	for kind, v := range g.byKind {
		ch <- prometheus.MustNewConstMetric(g.running, prometheus.GaugeValue, v.running, kind)
		ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, v.depth, kind)
		if g.oldest != nil {
			ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, v.oldestAge, kind)
			ch <- prometheus.MustNewConstMetric(g.dead, prometheus.GaugeValue, v.dead, kind)
			ch <- prometheus.MustNewConstMetric(g.rateReached, prometheus.GaugeValue, v.rateReached, kind)
		}
	}
}

func (g *jobGauges) count() (map[string]*kindGauges, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kinds, err := g.js.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := g.js.JobCounts(ctx)
	if err != nil {
		return nil, err
	}
	byKind := make(map[string]*kindGauges, len(kinds))
	for _, k := range kinds {
		byKind[k.Name] = &kindGauges{}
	}
	of := func(kind string) *kindGauges {
		v := byKind[kind]
		if v == nil {
			v = &kindGauges{}
			byKind[kind] = v
		}
		return v
	}
	for _, c := range counts {
		v := of(c.Kind)
		switch c.State {
		case store.JobRunning:
			v.running += float64(c.Count)
		case store.JobScheduled, store.JobAvailable, store.JobRetryable:
			v.depth += float64(c.Count)
		}
	}
	if ks, ok := g.js.(store.KindStatsStore); ok {
		stats, err := ks.KindStats(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range stats {
			v := of(st.Kind)
			v.oldestAge, v.dead, v.rateReached = st.OldestRunningAge.Seconds(), float64(st.DeadLetters), float64(st.RateReached)
		}
	}
	return byKind, nil
}
