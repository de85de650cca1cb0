package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batonhq/baton/store"
)

// metrics are registered on a registry of the server's own, never the global one.
type metrics struct {
	registry     *prometheus.Registry
	acquisitions *prometheus.CounterVec
	failures     *prometheus.CounterVec
	// The acquisitions' counters by result, looked up once (WithLabelValues hashes its labels
	// on every call).
	granted, renewed prometheus.Counter
	held             prometheus.Histogram
	lockWait         prometheus.Histogram
	expirations      prometheus.Counter
	httpDuration     *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_lock_acquisitions_total",
			Help: "Acquire requests by result: granted, renewed (same holder re-acquired), failed.",
		}, []string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_lock_acquisition_failures_total",
			Help: "Failed acquire requests by reason: held, cooldown, invalid, unavailable, overloaded. A client that waits across several requests of one acquisition (one lease ID) counts one held or cooldown failure.",
		}, []string{"reason"}),
		held: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baton_lock_held_duration_seconds",
			Help:    "How long released leases were held, on the store's clock.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10), // 10 ms .. ~44 min
		}),
		lockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baton_lock_wait_duration_seconds",
			Help:    "How long granted acquires waited for their key: from the first request of the acquisition (one lease ID, across a client's long-poll rounds) to the grant; about 0 when the key was free.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5 ms .. ~22 min
		}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_lock_expirations_total",
			Help: "Grants that took a key over from a lease that expired without release (stale locks).",
		}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_http_request_duration_seconds",
			Help:    "HTTP request duration by route, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method", "code"}),
	}
	m.registry.MustRegister(m.acquisitions, m.failures, m.held, m.lockWait, m.expirations, m.httpDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"granted", "renewed", "failed"} {
		m.acquisitions.WithLabelValues(r)
	}
	m.granted = m.acquisitions.WithLabelValues("granted")
	m.renewed = m.acquisitions.WithLabelValues("renewed")
	for _, r := range []string{"held", "cooldown", "invalid", "unavailable", "overloaded"} {
		m.failures.WithLabelValues(r)
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// observeRoute times a handler under a fixed route label (never the raw path: keys would make
// the label set unbounded) and a method label from a fixed set.
func (m *metrics) observeRoute(route string, h http.HandlerFunc) http.HandlerFunc {
	// The route's series by method label and status, looked up once each (both come from
	// fixed sets: methodLabel, and the statuses the handlers write). The map is replaced, never
	// changed, so that a request reads it without a lock (and without boxing its key).
	var (
		series atomic.Pointer[map[routeSeries]prometheus.Observer]
		mu     sync.Mutex // serialises additions
	)
	series.Store(&map[routeSeries]prometheus.Observer{})
	observer := func(k routeSeries) prometheus.Observer {
		if o, ok := (*series.Load())[k]; ok {
			return o
		}
		mu.Lock()
		defer mu.Unlock()
		old := *series.Load()
		if o, ok := old[k]; ok {
			return o
		}
		o := m.httpDuration.WithLabelValues(route, k.method, strconv.Itoa(k.status))
		next := make(map[routeSeries]prometheus.Observer, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		next[k] = o
		series.Store(&next)
		return o
	}
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		h(sw, r)
		observer(routeSeries{methodLabel(r.Method), sw.status}).Observe(time.Since(start).Seconds())
	}
}

type routeSeries struct {
	method string
	status int
}

// methodLabel is the method label of a request: a standard method, or "other". net/http accepts
// any token as a method, and every label value is a series kept for the life of the process, so
// a raw method would let anyone, without a token, grow the server's memory without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions:
		return method
	}
	return "other"
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// heldGauge counts live leases by listing them when scraped, at most once per second, so that
// it is right whatever other servers or library users do to the store. It lists only while the
// gate has a free slot and nothing waits: under load it keeps its last count rather than queue.
type heldGauge struct {
	desc  *prometheus.Desc
	store store.Store
	gate  *gate

	mu      sync.Mutex
	at      time.Time
	count   float64
	counted bool
}

func newHeldGauge(st store.Store, g *gate) *heldGauge {
	return &heldGauge{store: st, gate: g, desc: prometheus.NewDesc("baton_locks_held", "Live leases in the store (counted up to 100000).", nil, nil)}
}

func (g *heldGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *heldGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.counted || time.Since(g.at) > time.Second {
		if n, err := g.countLive(); err == nil {
			g.count, g.at, g.counted = n, time.Now(), true
		}
	}
	if g.counted {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.count)
	}
}

func (g *heldGauge) countLive() (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, after := 0, ""
	for n < 100000 {
		if !g.gate.tryEnter(classNew) {
			return 0, errOverloaded
		}
		page, err := g.store.List(ctx, &store.ListParams{After: after, Limit: store.MaxListLimit})
		g.gate.leave()
		if err != nil {
			return 0, err
		}
		n += len(page)
		if len(page) < store.MaxListLimit {
			break
		}
		after = page[len(page)-1].Key
	}
	return float64(n), nil
}

// maxLimitSeries bounds the limits limitGauges reads at a scrape (and so its series): the first
// maxLimitSeries in name order; the others are left out rather than make a scrape unbounded.
const maxLimitSeries = 1000

// limitGauges reports each limit's use and line (baton_limit_in_use, baton_limit_waiters) by
// listing the limits when scraped, at most once per second, and, like heldGauge, only while the
// gate has a free slot and nothing waits: under load it keeps its last reading.
type limitGauges struct {
	inUse, waiters *prometheus.Desc
	lim            store.Limiter
	gate           *gate

	mu     sync.Mutex
	at     time.Time
	limits []*store.Limit
	read   bool
}

func newLimitGauges(lim store.Limiter, g *gate) *limitGauges {
	return &limitGauges{lim: lim, gate: g,
		inUse:   prometheus.NewDesc("baton_limit_in_use", "Live leases that hold a unit of the limit (the first 1000 limits by name).", []string{"limit"}, nil),
		waiters: prometheus.NewDesc("baton_limit_waiters", "Live tickets in the limit's line (the first 1000 limits by name).", []string{"limit"}, nil),
	}
}

func (g *limitGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.inUse
	ch <- g.waiters
}

func (g *limitGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.read || time.Since(g.at) > time.Second {
		if ls, err := g.readLimits(); err == nil {
			g.limits, g.at, g.read = ls, time.Now(), true
		}
	}
	for _, l := range g.limits {
		ch <- prometheus.MustNewConstMetric(g.inUse, prometheus.GaugeValue, float64(l.InUse), l.Name)
		ch <- prometheus.MustNewConstMetric(g.waiters, prometheus.GaugeValue, float64(l.Waiting), l.Name)
	}
}

func (g *limitGauges) readLimits() ([]*store.Limit, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []*store.Limit
	after := ""
	for len(out) < maxLimitSeries {
		n := min(store.MaxListLimit, maxLimitSeries-len(out))
		if !g.gate.tryEnter(classNew) {
			return nil, errOverloaded
		}
		page, err := g.lim.Limits(ctx, &store.LimitsParams{After: after, Limit: n})
		g.gate.leave()
		if err != nil {
			return nil, err
		}
		for _, l := range page {
			// Only the numbers are kept: the holders may be many.
			out = append(out, &store.Limit{Name: l.Name, InUse: l.InUse, Waiting: l.Waiting})
		}
		if len(page) < n {
			break
		}
		after = page[len(page)-1].Name
	}
	return out, nil
}
