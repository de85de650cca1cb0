package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/store"
)

// Admission control. Every store call of the API passes a gate that lets at most MaxInflight
// calls reach the store at once; the others wait in one of two queues, and a free slot goes to
// the first queue first:
//
//   - keep: renewals, releases, force-releases, job heartbeats, completions and failures. They
//     keep work that already runs safe: losing a held lease to a queue is worse than delaying a
//     new one.
//   - new: acquires (each attempt of a waiting acquire), gets, listings, events, job submits and
//     claims.
//
// Each queue is bounded; a call that finds its queue full is shed at once with errOverloaded (a
// 503 "overloaded" with Retry-After). The keep queue's bound is keepQueueFactor times the new
// one's, so new work is shed long before renewals are. The new queue is also bounded in time:
// when its oldest call has waited longer than MaxQueueWait, the store is behind by that much and
// new calls are shed at the door until the queue catches up. A count alone does not bound the
// wait (a slow store drains 1,024 calls in seconds), and every new call admitted brings a
// release or a completion with it, which then queues in front of everything else.

// DefaultMaxInflight is the default of Config.MaxInflight.
const DefaultMaxInflight = 64

// DefaultMaxQueue is the default of Config.MaxQueue.
const DefaultMaxQueue = 1024

// keepQueueFactor sizes the keep queue's bound from the new queue's.
const keepQueueFactor = 4

// DefaultMaxQueueWait is the default of Config.MaxQueueWait.
const DefaultMaxQueueWait = 2 * time.Second

// overloadRetryAfter is the Retry-After of a shed request.
const overloadRetryAfter = time.Second

type class int

const (
	classKeep class = iota
	classNew
	// classNewAdmitted queues with classNew but is never shed.
	classNewAdmitted
)

var classNames = [...]string{classKeep: "keep", classNew: "new"}

// errOverloaded is a call shed by the gate.
var errOverloaded = errors.New("the server is overloaded: too many requests wait for the store; retry later")

type waiter struct {
	ch      chan struct{}
	since   time.Time
	granted bool // under gate.mu: a slot was handed to this waiter
}

type gate struct {
	limit    int
	maxQueue [2]int        // negative: unbounded
	maxWait  time.Duration // of the new queue's oldest call; negative: unbounded

	mu       sync.Mutex
	inflight int
	queues   [2][]*waiter

	inflightGauge prometheus.Gauge
	depth         *prometheus.GaugeVec
	shed          *prometheus.CounterVec
	queueWait     *prometheus.HistogramVec
	// The series of each class, looked up once rather than on every call.
	depthOf [2]prometheus.Gauge
	shedOf  [2]prometheus.Counter
	waitOf  [2]prometheus.Observer
}

func newGate(limit, maxQueue int, maxWait time.Duration, reg prometheus.Registerer) *gate {
	g := &gate{limit: limit, maxQueue: [2]int{classKeep: maxQueue * keepQueueFactor, classNew: maxQueue}, maxWait: maxWait}
	if maxQueue < 0 {
		g.maxQueue = [2]int{-1, -1}
	}
	g.inflightGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "baton_store_inflight",
		Help: "Store calls of the API in flight (admitted by the gate).",
	})
	g.depth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "baton_store_queue_depth",
		Help: "Store calls waiting for a slot, by class: keep (renew, release, job heartbeat and end) or new (acquire, get, list, submit, claim).",
	}, []string{"class"})
	g.shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_store_shed_total",
		Help: "Store calls refused with 503 overloaded because their queue was full (or, for new calls, its oldest call had waited longer than the bound), by class.",
	}, []string{"class"})
	g.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_store_queue_wait_seconds",
		Help:    "How long admitted store calls waited for a slot, by class.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9), // 0.5 ms .. ~33 s
	}, []string{"class"})
	for c, name := range classNames {
		g.depthOf[c] = g.depth.WithLabelValues(name)
		g.shedOf[c] = g.shed.WithLabelValues(name)
		g.waitOf[c] = g.queueWait.WithLabelValues(name)
	}
	reg.MustRegister(g.inflightGauge, g.depth, g.shed, g.queueWait)
	return g
}

// shedAtDoor sheds a request of class c that would wait for the store (a waiting acquire) if a
// call of c would be shed now, and counts it.
func (g *gate) shedAtDoor(c class) bool {
	g.mu.Lock()
	full := g.inflight >= g.limit && g.full(c, time.Now())
	g.mu.Unlock()
	if full {
		g.shedOf[c].Inc()
	}
	return full
}

// tryEnter takes a slot for a call of class c only if one is free and nobody waits: for
// background work (the held-leases gauge) that should rather not run than add to a queue.
func (g *gate) tryEnter(c class) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight < g.limit && len(g.queues[classKeep]) == 0 && len(g.queues[classNew]) == 0 {
		g.inflight++
		g.inflightGauge.Set(float64(g.inflight))
		return true
	}
	return false
}

// enter waits for a slot for a call of class c. It returns errOverloaded at once if c's queue is
// full, or ctx's error if ctx ends first. leave must be called once the call is done.
func (g *gate) enter(ctx context.Context, c class) error {
	bounded := true
	if c == classNewAdmitted {
		c, bounded = classNew, false
	}
	g.mu.Lock()
	if g.inflight < g.limit && len(g.queues[classKeep]) == 0 && (c == classKeep || len(g.queues[classNew]) == 0) {
		g.inflight++
		g.inflightGauge.Set(float64(g.inflight))
		g.mu.Unlock()
		g.waitOf[c].Observe(0)
		return nil
	}
	now := time.Now()
	if bounded && g.full(c, now) {
		g.mu.Unlock()
		g.shedOf[c].Inc()
		return errOverloaded
	}
	w := &waiter{ch: make(chan struct{}), since: now}
	g.queues[c] = append(g.queues[c], w)
	g.depthOf[c].Set(float64(len(g.queues[c])))
	g.mu.Unlock()
	select {
	case <-w.ch:
		g.waitOf[c].Observe(time.Since(now).Seconds())
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		g.mu.Unlock()
		g.leave() // handed a slot as ctx ended: pass it on
		return ctx.Err()
	}
	if i := slices.Index(g.queues[c], w); i >= 0 {
		g.queues[c] = slices.Delete(g.queues[c], i, i+1)
	}
	g.depthOf[c].Set(float64(len(g.queues[c])))
	g.mu.Unlock()
	return ctx.Err()
}

// full reports, under g.mu, whether a call of class c that cannot enter now must be shed: its
// queue holds its bound, or (new calls) the queue's oldest call has waited past maxWait.
func (g *gate) full(c class, now time.Time) bool {
	q := g.queues[c]
	if g.maxQueue[c] >= 0 && len(q) >= g.maxQueue[c] {
		return true
	}
	return c == classNew && g.maxWait >= 0 && len(q) > 0 && now.Sub(q[0].since) > g.maxWait
}

// leave frees a slot, handing it to the first waiter of the keep queue, else of the new queue.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.queues {
		if len(g.queues[c]) == 0 {
			continue
		}
		w := g.queues[c][0]
		g.queues[c][0] = nil
		g.queues[c] = g.queues[c][1:]
		g.depthOf[c].Set(float64(len(g.queues[c])))
		w.granted = true
		close(w.ch)
		return
	}
	g.inflight--
	g.inflightGauge.Set(float64(g.inflight))
}

// do runs f once the gate admits a call of class c.
func do[T any](g *gate, ctx context.Context, c class, f func() (T, error)) (T, error) {
	if err := g.enter(ctx, c); err != nil {
		var zero T
		return zero, err
	}
	defer g.leave()
	return f()
}

// gatedStore passes the lease calls of the API through the gate.
type gatedStore struct {
	store.Store
	g *gate
}

// Acquire is shed only when it does not wait: the attempts of a waiting acquire were admitted at
// its start (see Server.acquire), and shedding them would only make the wait retry them.
func (s *gatedStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	c := classNew
	if p.Wait {
		c = classNewAdmitted
	}
	return do(s.g, ctx, c, func() (*store.Lease, error) { return s.Store.Acquire(ctx, p) })
}

func (s *gatedStore) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	return do(s.g, ctx, classKeep, func() (*store.Lease, error) { return s.Store.Renew(ctx, p) })
}

// RenewMany takes one slot for the whole batch: one store call.
func (s *gatedStore) RenewMany(ctx context.Context, ps []*store.RenewParams) ([]store.RenewResult, error) {
	return do(s.g, ctx, classKeep, func() ([]store.RenewResult, error) { return store.RenewMany(ctx, s.Store, ps) })
}

func (s *gatedStore) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	return do(s.g, ctx, classKeep, func() (*store.ReleaseResult, error) { return s.Store.Release(ctx, p) })
}

func (s *gatedStore) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	return do(s.g, ctx, classKeep, func() (*store.Lease, error) { return s.Store.ForceRelease(ctx, p) })
}

func (s *gatedStore) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	return do(s.g, ctx, classKeep, func() (*store.Rest, error) { return s.Store.ClearRest(ctx, p) })
}

func (s *gatedStore) Get(ctx context.Context, key string) (*store.Lease, error) {
	return do(s.g, ctx, classNew, func() (*store.Lease, error) { return s.Store.Get(ctx, key) })
}

func (s *gatedStore) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	return do(s.g, ctx, classNew, func() ([]*store.Lease, error) { return s.Store.List(ctx, p) })
}

func (s *gatedStore) Events(ctx context.Context, p *store.EventsParams) ([]*store.Event, error) {
	return do(s.g, ctx, classNew, func() ([]*store.Event, error) { return s.Store.Events(ctx, p) })
}

// gatedJobs passes the job calls that remote workers make at a high rate through the gate; the
// administrative ones (rare) go straight to the store.
type gatedJobs struct {
	store.JobStore
	g *gate
}

func (s *gatedJobs) SubmitJob(ctx context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	return do(s.g, ctx, classNew, func() (*store.SubmitResult, error) { return s.JobStore.SubmitJob(ctx, p) })
}

func (s *gatedJobs) SubmitMany(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	return do(s.g, ctx, classNew, func() ([]*store.SubmitResult, error) { return s.JobStore.SubmitMany(ctx, ps) })
}

func (s *gatedJobs) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	return do(s.g, ctx, classNew, func() ([]*store.Job, error) { return s.JobStore.ClaimJobs(ctx, p) })
}

func (s *gatedJobs) HeartbeatJob(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	return do(s.g, ctx, classKeep, func() (*store.HeartbeatResult, error) { return s.JobStore.HeartbeatJob(ctx, p) })
}

func (s *gatedJobs) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	return do(s.g, ctx, classKeep, func() (*store.Job, error) { return s.JobStore.CompleteJob(ctx, p) })
}

func (s *gatedJobs) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	return do(s.g, ctx, classKeep, func() (*store.Job, error) { return s.JobStore.FailJob(ctx, p) })
}

// The line's optional capabilities (store.LineWaiter, store.LineReader, store.WorkerActivity)
// pass through the gate's wrappers to the store beneath, so that the server's waiters are woken
// at the front of the line and leave it, and explain can read it. A store without them gets the
// plain behaviour: Subscribe, nothing to leave, ErrNoLine.

// SubscribeAs is the store's, or Subscribe.
func (s *gatedStore) SubscribeAs(key, leaseID string) (<-chan struct{}, func()) {
	if lw, ok := s.Store.(store.LineWaiter); ok {
		return lw.SubscribeAs(key, leaseID)
	}
	return s.Store.Subscribe(key)
}

// LeaveLine is the store's, or nothing to do.
func (s *gatedStore) LeaveLine(ctx context.Context, key, leaseID, owner string) error {
	if lw, ok := s.Store.(store.LineWaiter); ok {
		return lw.LeaveLine(ctx, key, leaseID, owner)
	}
	return nil
}

// ResourceLine is the store's, or ErrNoLine.
func (s *gatedStore) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	return resourceLine(ctx, s.Store, key, limit)
}

// ResourceLine is the store's, or ErrNoLine.
func (s *gatedJobs) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	return resourceLine(ctx, s.JobStore, key, limit)
}

func resourceLine(ctx context.Context, st any, key string, limit int) (*store.ResourceLine, error) {
	if lr, ok := st.(store.LineReader); ok {
		return lr.ResourceLine(ctx, key, limit)
	}
	return nil, store.ErrNoLine
}

// LastClaim is the store's; a store that cannot tell says now, so that explain names no missing
// worker it cannot know of.
func (s *gatedJobs) LastClaim(ctx context.Context, kind string) (time.Time, error) {
	if wa, ok := s.JobStore.(store.WorkerActivity); ok {
		return wa.LastClaim(ctx, kind)
	}
	return time.Now(), nil
}

// gatedLine passes line reads through the gate, like lease reads (a dashboard or a script may
// poll them).
type gatedLine struct {
	store.LineReader
	g *gate
}

func (s *gatedLine) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	return do(s.g, ctx, classNew, func() (*store.ResourceLine, error) { return s.LineReader.ResourceLine(ctx, key, limit) })
}
