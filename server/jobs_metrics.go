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
			Help: "Jobs that entered a state through this server (submit, complete, fail, cancel, reap), by kind and state.",
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

// jobGauges reports running jobs and queue depth per kind from store.JobCounts when scraped, at
// most once per second. Every registered kind is reported, at 0 when it has no jobs.
type jobGauges struct {
	js             store.JobStore
	running, depth *prometheus.Desc

	mu      sync.Mutex
	at      time.Time
	counted bool
	byKind  map[string]*[2]float64 // running, queue depth
}

func newJobGauges(js store.JobStore) *jobGauges {
	return &jobGauges{js: js,
		running: prometheus.NewDesc("baton_jobs_running", "Running jobs in the store, by kind.", []string{"kind"}, nil),
		depth: prometheus.NewDesc("baton_job_queue_depth",
			"Jobs waiting in the store (scheduled, available or retryable), by kind.", []string{"kind"}, nil),
	}
}

func (g *jobGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.running
	ch <- g.depth
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
		ch <- prometheus.MustNewConstMetric(g.running, prometheus.GaugeValue, v[0], kind)
		ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, v[1], kind)
	}
}

func (g *jobGauges) count() (map[string]*[2]float64, error) {
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
	byKind := make(map[string]*[2]float64, len(kinds))
	for _, k := range kinds {
		byKind[k.Name] = &[2]float64{}
	}
	for _, c := range counts {
		v := byKind[c.Kind]
		if v == nil {
			v = &[2]float64{}
			byKind[c.Kind] = v
		}
		switch c.State {
		case store.JobRunning:
			v[0] += float64(c.Count)
		case store.JobScheduled, store.JobAvailable, store.JobRetryable:
			v[1] += float64(c.Count)
		}
	}
	return byKind, nil
}
