package baton

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/store"
)

// QueueConfig configures a Queue. The zero value is valid.
type QueueConfig struct {
	// Kinds are registered (created or replaced, all or none) by NewQueue. Kinds already in the
	// store need not be repeated: the definitions live in the database.
	Kinds []Kind
	// Logger receives the queue's, its workers' and its maintenance's logs. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Queue submits and administers jobs over a store.JobStore, and makes workers and the
// maintenance runner. It is safe for concurrent use. It does not own the store: close the store
// when done with it.
type Queue struct {
	st  store.JobStore
	log *slog.Logger
}

// NewQueue returns a Queue over st, after registering cfg.Kinds. A nil cfg means no kinds and
// the default logger.
func NewQueue(ctx context.Context, st store.JobStore, cfg *QueueConfig) (*Queue, error) {
	if st == nil {
		return nil, &InvalidArgumentError{Field: "store", Rule: "must not be nil"}
	}
	var c QueueConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	q := &Queue{st: st, log: c.Logger}
	if len(c.Kinds) > 0 {
		if err := q.RegisterKinds(ctx, c.Kinds...); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Store returns the job store the Queue works over.
func (q *Queue) Store() store.JobStore { return q.st }

// RegisterKinds creates or replaces kind definitions, all or none.
func (q *Queue) RegisterKinds(ctx context.Context, kinds ...Kind) error {
	// A copy: the store applies defaults to what it is given.
	return q.st.RegisterKinds(ctx, append([]Kind(nil), kinds...))
}

// Kinds lists the registered kinds, by name.
func (q *Queue) Kinds(ctx context.Context) ([]Kind, error) { return q.st.Kinds(ctx) }

// Submit enqueues a job. With an idempotency key that exists, it returns the existing job and
// Existing=true. Under the reject policy a busy resource gives a *ResourceBusyError.
//
// The job keeps the W3C trace context of p.TraceParent or, when that is empty, of the submit's
// span (a child of ctx's span): its attempts join the submitter's trace.
func (q *Queue) Submit(ctx context.Context, p SubmitParams) (res *SubmitResult, err error) {
	ctx, sp := q.startSubmit(ctx, &p)
	defer func() { endSubmitSpan(sp, res, err) }()
	return q.st.SubmitJob(ctx, &p)
}

// startSubmit starts a submit span and fills p.TraceParent from it when empty.
func (q *Queue) startSubmit(ctx context.Context, p *SubmitParams) (context.Context, trace.Span) {
	if p.TraceParent != "" {
		ctx = ContextWithTraceParent(ctx, p.TraceParent)
	}
	ctx, sp := tracer.Start(ctx, "baton.submit")
	if sp.IsRecording() {
		sp.SetAttributes(attrJobKind.String(p.Kind), attrResource.String(p.Resource))
	}
	if p.TraceParent == "" {
		p.TraceParent = TraceParent(ctx)
	}
	return ctx, sp
}

func endSubmitSpan(sp trace.Span, res *SubmitResult, err error) {
	if res != nil && res.Job != nil && sp.IsRecording() {
		sp.SetAttributes(attrJobID.Int64(res.Job.ID), attrJobState.String(string(res.Job.State)), attrExisting.Bool(res.Existing))
	}
	endSpan(sp, err)
}

// SubmitMany enqueues 1..MaxSubmitMany jobs in one atomic step (one round trip on PostgreSQL,
// one transaction on SQLite), all or none. Each job is submitted as Submit would, one after the
// other in slice order: a later job on the same resource queues behind an earlier one (or is
// skipped, or refused, under its policy); a repeated idempotency key returns the job of its first
// occurrence with Existing=true. The results are in the order of ps. Bad input is an
// *InvalidArgumentError whose field names the job ("jobs[3].resource"); a job refused under the
// reject policy fails them all with a *SubmitManyError around a *ResourceBusyError.
func (q *Queue) SubmitMany(ctx context.Context, ps []SubmitParams) ([]*SubmitResult, error) {
	ctx, sp := tracer.Start(ctx, "baton.submit_many")
	if sp.IsRecording() {
		sp.SetAttributes(attribute.Int("baton.jobs", len(ps)))
	}
	tp := TraceParent(ctx)
	in := make([]*store.SubmitParams, len(ps))
	for i := range ps {
		p := ps[i] // a copy: the caller's slice is left alone
		if p.TraceParent == "" {
			p.TraceParent = tp
		}
		in[i] = &p
	}
	res, err := q.st.SubmitMany(ctx, in)
	endSpan(sp, err)
	return res, err
}

// SubmitTx enqueues a job inside the caller's own transaction, so that the job exists if and
// only if the transaction commits: a *sql.Tx on the SQLite store's database; a pgx.Tx, or a
// *sql.Tx opened with pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib), on the PostgreSQL
// store's. Workers are woken when the job becomes claimable, at the latest by their
// poll. A transaction the store cannot use is an *InvalidArgumentError on field "tx".
func (q *Queue) SubmitTx(ctx context.Context, tx any, p SubmitParams) (*SubmitResult, error) {
	if tx == nil {
		return nil, &InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
	}
	s, ok := q.st.(store.TxSubmitter)
	if !ok {
		return nil, &InvalidArgumentError{Field: "tx",
			Rule: fmt.Sprintf("this store (%T) cannot enqueue in a caller's transaction of type %T", q.st, tx)}
	}
	ctx, sp := q.startSubmit(ctx, &p)
	res, err := s.SubmitJobTxAny(ctx, tx, &p)
	endSubmitSpan(sp, res, err)
	return res, err
}

// Get returns one job, or ErrNotFound.
func (q *Queue) Get(ctx context.Context, id int64) (*Job, error) { return q.st.GetJob(ctx, id) }

// JobPage is one page of jobs, by ID. Next is set when the page is full: pass it as the next
// call's After (that page may turn out empty). Zero means there are no more pages.
type JobPage struct {
	Jobs []*Job
	Next int64
}

// ListJobs lists jobs by ID, after p.After, at most p.Limit (default 100), page by page.
func (q *Queue) ListJobs(ctx context.Context, p JobListParams) (*JobPage, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	jobs, err := q.st.ListJobs(ctx, &p)
	if err != nil {
		return nil, err
	}
	page := &JobPage{Jobs: jobs}
	if len(jobs) == p.Limit {
		page.Next = jobs[len(jobs)-1].ID
	}
	return page, nil
}

// List lists jobs by ID, after p.After, at most p.Limit (default 100).
//
// Deprecated: use ListJobs, whose page says where the next one starts.
func (q *Queue) List(ctx context.Context, p JobListParams) ([]*Job, error) {
	page, err := q.ListJobs(ctx, p)
	if err != nil {
		return nil, err
	}
	return page.Jobs, nil
}

// Cancel cancels a job that is not running, or asks the worker of a running one to stop: its
// handler's context is cancelled with ErrJobCancelled at the worker's next heartbeat, and the
// job ends cancelled. A finished job gives a *JobStateError.
func (q *Queue) Cancel(ctx context.Context, id int64) (*Job, error) { return q.st.CancelJob(ctx, id) }

// Retry makes a discarded, cancelled or skipped job available again at the back of its
// resource's queue, or a retryable job claimable now. Other states give a *JobStateError.
func (q *Queue) Retry(ctx context.Context, id int64) (*Job, error) { return q.st.RetryJob(ctx, id) }

// Purge deletes the dead letters (discarded jobs) matching p and says how many.
func (q *Queue) Purge(ctx context.Context, p PurgeParams) (int, error) {
	return q.st.PurgeJobs(ctx, &p)
}

// Counts counts unfinished jobs per kind and state.
func (q *Queue) Counts(ctx context.Context) ([]*JobCount, error) { return q.st.JobCounts(ctx) }

// Resource returns a resource's recorded state, or ErrNotFound.
func (q *Queue) Resource(ctx context.Context, key string) (*Resource, error) {
	return q.st.GetResource(ctx, key)
}

// ResourcePage is one page of resources, by key. Next is set when the page is full: pass it as
// the next call's After (that page may turn out empty). An empty Next means there are no more
// pages.
type ResourcePage struct {
	Resources []*Resource
	Next      string
}

// ListResources lists resources by key, after p.After, at most p.Limit (default 100), page by
// page.
func (q *Queue) ListResources(ctx context.Context, p ResourceListParams) (*ResourcePage, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rs, err := q.st.ListResources(ctx, &p)
	if err != nil {
		return nil, err
	}
	page := &ResourcePage{Resources: rs}
	if len(rs) == p.Limit {
		page.Next = rs[len(rs)-1].Key
	}
	return page, nil
}

// Resources lists resources by key, after p.After.
//
// Deprecated: use ListResources, whose page says where the next one starts.
func (q *Queue) Resources(ctx context.Context, p ResourceListParams) ([]*Resource, error) {
	page, err := q.ListResources(ctx, p)
	if err != nil {
		return nil, err
	}
	return page.Resources, nil
}

// SetResourceState sets a resource's state, creating the resource if needed; with p.IfVersion
// set, only if its version matches (else a *VersionMismatchError).
func (q *Queue) SetResourceState(ctx context.Context, p SetResourceStateParams) (*Resource, error) {
	return q.st.SetResourceState(ctx, &p)
}
