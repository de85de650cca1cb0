package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// The job queue over HTTP: *Store is a store.JobStore. Every method checks its input as the
// database stores do, so that bad input is the same *store.InvalidArgumentError without a round
// trip, then makes one request, which the server serves with one store call.

// RegisterKinds creates or replaces kind definitions, all or none (an admin call). Defaults are
// applied to copies; durations are sent in whole milliseconds, rounded up.
func (s *Store) RegisterKinds(ctx context.Context, kinds []store.Kind) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	req := wire.KindsRequest{Kinds: make([]wire.Kind, len(kinds))}
	for i := range kinds {
		k := kinds[i]
		if err := k.Validate(); err != nil {
			return err
		}
		req.Kinds[i] = wire.KindFrom(&k)
		req.Kinds[i].TimeoutMs, req.Kinds[i].CooldownMs = ceilMs(k.Timeout), ceilMs(k.Cooldown)
	}
	if len(kinds) == 0 {
		return nil
	}
	var resp wire.KindsResponse
	return s.do(ctx, http.MethodPost, "/v1/kinds", nil, req, &resp)
}

// Kinds lists the registered kinds, by name.
func (s *Store) Kinds(ctx context.Context) ([]store.Kind, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var resp wire.KindsResponse
	if err := s.do(ctx, http.MethodGet, "/v1/kinds", nil, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]store.Kind, len(resp.Kinds))
	for i := range resp.Kinds {
		out[i] = resp.Kinds[i].Store()
		rate, err := resp.Kinds[i].StoreRate()
		if err != nil {
			return nil, err
		}
		out[i].Rate = rate
	}
	return out, nil
}

// SubmitJob enqueues a job. The idempotency key is sent as the Idempotency-Key header; the
// server answers 200 instead of 201 when it names a job submitted before (Existing). p.Delay is
// sent in whole milliseconds, rounded up; p.ScheduledAt as RFC 3339.
func (s *Store) SubmitJob(ctx context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	req := wire.SubmitRequest{Kind: p.Kind, Resource: p.Resource, Args: p.Args, Policy: p.Policy,
		MaxAttempts: p.MaxAttempts, Priority: p.Priority, DelayMs: ceilMs(p.Delay),
		Mode: p.Mode, Resources: p.Resources, Limits: p.Limits, DebounceMs: ceilMs(p.Debounce)}
	if !p.ScheduledAt.IsZero() {
		req.ScheduledAt = p.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	var header http.Header
	if p.IdempotencyKey != "" {
		header = http.Header{"Idempotency-Key": {p.IdempotencyKey}}
	}
	if p.TraceParent != "" {
		// The job keeps the trace context the server receives.
		if header == nil {
			header = http.Header{}
		}
		header.Set("Traceparent", p.TraceParent)
	}
	var resp wire.Job
	status, err := s.doHeader(ctx, http.MethodPost, "/v1/jobs", nil, header, req, &resp)
	if err != nil {
		return nil, err
	}
	j := resp.Store()
	existing := status != http.StatusCreated
	if !existing && j.Head && j.State == store.JobAvailable {
		s.jobHub.notify(j.Kind)
	}
	return &store.SubmitResult{Job: j, Existing: existing}, nil
}

// SubmitMany enqueues a batch with one POST /v1/jobs/batch (the server's body limit,
// server.MaxJobBatchBodyBytes, bounds a batch too). Each job's idempotency key travels in its
// idempotency_key member.
func (s *Store) SubmitMany(ctx context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateSubmitMany(ps); err != nil {
		return nil, err
	}
	req := wire.SubmitBatchRequest{Jobs: make([]*wire.SubmitRequest, len(ps))}
	for i, p := range ps {
		req.Jobs[i] = &wire.SubmitRequest{Kind: p.Kind, Resource: p.Resource, Args: p.Args, Policy: p.Policy,
			MaxAttempts: p.MaxAttempts, Priority: p.Priority, DelayMs: ceilMs(p.Delay), IdempotencyKey: p.IdempotencyKey,
			Mode: p.Mode, Resources: p.Resources, Limits: p.Limits, DebounceMs: ceilMs(p.Debounce),
			TraceParent: p.TraceParent}
		if !p.ScheduledAt.IsZero() {
			req.Jobs[i].ScheduledAt = p.ScheduledAt.UTC().Format(time.RFC3339Nano)
		}
	}
	var resp wire.SubmitBatchResponse
	if err := s.do(ctx, http.MethodPost, "/v1/jobs/batch", nil, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(ps) {
		return nil, fmt.Errorf("baton client: POST /v1/jobs/batch: %d results for %d jobs", len(resp.Results), len(ps))
	}
	out := make([]*store.SubmitResult, len(ps))
	woken := map[string]bool{}
	for i := range resp.Results {
		j := resp.Results[i].Job.Store()
		out[i] = &store.SubmitResult{Job: j, Existing: resp.Results[i].Existing}
		if !out[i].Existing && j.Head && j.State == store.JobAvailable && !woken[j.Kind] {
			woken[j.Kind] = true
			s.jobHub.notify(j.Kind)
		}
	}
	return out, nil
}

func checkJobID(id int64) error {
	if id <= 0 {
		return &store.InvalidArgumentError{Field: "id", Rule: fmt.Sprintf("must be a positive job ID (got %d)", id)}
	}
	return nil
}

func jobPath(id int64, op string) string {
	p := "/v1/jobs/" + strconv.FormatInt(id, 10)
	if op != "" {
		p += "/" + op
	}
	return p
}

// GetJob returns one job, or store.ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id int64) (*store.Job, error) {
	return s.jobCall(ctx, http.MethodGet, id, "", nil)
}

// jobCall is a request on one job answered with the job.
func (s *Store) jobCall(ctx context.Context, method string, id int64, op string, body any) (*store.Job, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := checkJobID(id); err != nil {
		return nil, err
	}
	var resp wire.Job
	if err := s.do(ctx, method, jobPath(id, op), nil, body, &resp); err != nil {
		return nil, err
	}
	return resp.Store(), nil
}

// ListJobs lists jobs by ID, after p.After, at most p.Limit.
func (s *Store) ListJobs(ctx context.Context, p *store.JobListParams) ([]*store.Job, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.State != "" {
		q.Set("state", string(p.State))
	}
	if p.Kind != "" {
		q.Set("kind", p.Kind)
	}
	if p.Resource != "" {
		q.Set("resource", p.Resource)
	}
	if p.After > 0 {
		q.Set("after", strconv.FormatInt(p.After, 10))
	}
	var resp wire.JobsResponse
	if err := s.do(ctx, http.MethodGet, "/v1/jobs", q, nil, &resp); err != nil {
		return nil, err
	}
	return wire.StoreJobs(resp.Jobs), nil
}

// ClaimJobs claims up to p.Limit jobs of p.Kinds. When none is claimable the server waits for
// one, up to Config.ClaimWait (capped as its documentation says), and answers as soon as one
// is claimed: a worker over HTTP waits there rather than polling. After such a wait came back
// empty, this store's SubscribeJobs subscribers of p.Kinds are woken, so that a worker asks
// again at once and is always waiting in the server.
//
// When p.WaitDone is closed during the wait, the wait is ended by a second request (POST
// /v1/jobs/claim/stop), not by abandoning this one: ClaimJobs returns soon after with what the
// server claimed, maybe nothing, so that a job claimed in that instant is still returned to
// the worker rather than left running with nobody to run it until its lease expires. The stop
// reaches the server it is sent to: behind a load balancer that sends it to another replica, or
// from a server too old to offer it, the claim waits out its wait as if not stopped.
func (s *Store) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ttl := ceilMs(p.TTL)
	// The server starts at most wire.MaxClaimLimit jobs per request; a worker asking for more
	// gets fewer, as when fewer are claimable, and asks again.
	req := wire.ClaimRequest{Worker: p.Worker, Kinds: p.Kinds, Limit: min(p.Limit, wire.MaxClaimLimit), TTLMs: &ttl}
	var wait time.Duration
	if s.claimWait > 0 && !isClosed(p.WaitDone) {
		wait = s.waitFor(ctx, s.claimWait)
		req.WaitMs = wait.Milliseconds()
	}
	var stopped func() bool
	if wait > 0 && p.WaitDone != nil {
		if info, err := s.serverInfo(ctx); err == nil && info.ClaimStop {
			req.WaitID = newWaitID()
			stopped = s.stopWaitOn(ctx, p.WaitDone, req.WaitID)
		}
	}
	start := time.Now()
	var resp wire.JobsResponse
	err := s.do(ctx, http.MethodPost, "/v1/jobs/claim", nil, req, &resp)
	wasStopped := stopped != nil && stopped()
	if err != nil {
		return nil, err
	}
	// Only a request that really waited wakes the subscribers: a server that answers at once
	// (shutting down, or not waiting) must not turn a worker's loop into a spin; nor does one
	// its caller stopped.
	if len(resp.Jobs) == 0 && wait > 0 && !wasStopped && time.Since(start) >= wait/2 {
		s.jobHub.notify(p.Kinds...)
	}
	jobs := wire.StoreJobs(resp.Jobs)
	for _, j := range jobs {
		j.ClaimWaited = time.Duration(max(resp.WaitedMs, 0)) * time.Millisecond
	}
	return jobs, nil
}

// HeartbeatJob extends the running attempt's lease by p.TTL (sent in whole milliseconds,
// rounded up). store.ErrNotHeld if (ID, Token) is not the running attempt.
func (s *Store) HeartbeatJob(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ttl := ceilMs(p.TTL)
	var resp wire.HeartbeatResponse
	if err := s.do(ctx, http.MethodPost, jobPath(p.ID, "heartbeat"), nil, wire.HeartbeatRequest{Token: p.Token, TTLMs: &ttl}, &resp); err != nil {
		return nil, err
	}
	return &store.HeartbeatResult{CancelRequested: resp.CancelRequested, TTLLeft: time.Duration(resp.TTLLeftMs) * time.Millisecond}, nil
}

// CompleteJob ends the running attempt (ID, Token) as succeeded.
func (s *Store) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	j, err := s.jobCall(ctx, http.MethodPost, p.ID, "complete", wire.CompleteRequest{Token: p.Token})
	if err != nil {
		return nil, err
	}
	s.jobHub.notifyAll() // the resource's next job, of any kind, may have been promoted
	return j, nil
}

// CompleteMany completes many attempts in one request (POST /v1/jobs/complete; up to
// wire.MaxClaimLimit a request): the result is aligned with ps, nil where CompleteJob would have
// returned ErrNotHeld. A baton.Worker over this store reports its attempts this way.
func (s *Store) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	done, _, err := s.completeMany(ctx, ps, nil)
	return done, err
}

// CompleteManyAndClaim completes many attempts and claims jobs in the same request and the
// server's same transaction, so that a worker over HTTP takes a resource's next job in the round
// trip that completed the previous one. The claim never waits in the server.
func (s *Store) CompleteManyAndClaim(ctx context.Context, ps []*store.CompleteParams, claim *store.ClaimParams) ([]*store.Job, []*store.Job, error) {
	if err := claim.Validate(); err != nil {
		return nil, nil, err
	}
	return s.completeMany(ctx, ps, claim)
}

// completeMany sends ps in requests of at most wire.MaxClaimLimit attempts, the claim (if any)
// with the last. Each request is one transaction in the server: if one fails, those before it
// have completed all the same (the error is returned; their attempts are no longer running).
func (s *Store) completeMany(ctx context.Context, ps []*store.CompleteParams, claim *store.ClaimParams) ([]*store.Job, []*store.Job, error) {
	if err := s.closed.Check(); err != nil {
		return nil, nil, err
	}
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, nil, err
		}
	}
	done := make([]*store.Job, 0, len(ps))
	var claimed []*store.Job
	if len(ps) == 0 {
		if claim == nil {
			return done, nil, nil
		}
		ttl := ceilMs(claim.TTL)
		var resp wire.JobsResponse
		req := wire.ClaimRequest{Worker: claim.Worker, Kinds: claim.Kinds, Limit: min(claim.Limit, wire.MaxClaimLimit), TTLMs: &ttl}
		if err := s.do(ctx, http.MethodPost, "/v1/jobs/claim", nil, req, &resp); err != nil {
			return nil, nil, err
		}
		return done, wire.StoreJobs(resp.Jobs), nil
	}
	for start := 0; start < len(ps); start += wire.MaxClaimLimit {
		chunk := ps[start:min(start+wire.MaxClaimLimit, len(ps))]
		req := wire.CompleteManyRequest{Completions: make([]wire.CompleteItem, len(chunk))}
		for i, p := range chunk {
			req.Completions[i] = wire.CompleteItem{ID: p.ID, Token: p.Token}
		}
		if claim != nil && start+len(chunk) == len(ps) {
			ttl := ceilMs(claim.TTL)
			req.Claim = &wire.CompleteClaim{Worker: claim.Worker, Kinds: claim.Kinds, Limit: min(claim.Limit, wire.MaxClaimLimit), TTLMs: &ttl}
		}
		var resp wire.CompleteManyResponse
		if err := s.do(ctx, http.MethodPost, "/v1/jobs/complete", nil, req, &resp); err != nil {
			if len(done) > 0 {
				s.jobHub.notifyAll()
			}
			return nil, nil, err
		}
		if len(resp.Completed) != len(chunk) {
			return nil, nil, fmt.Errorf("baton client: complete jobs: the server answered %d completions for %d", len(resp.Completed), len(chunk))
		}
		for _, j := range resp.Completed {
			if j == nil {
				done = append(done, nil)
			} else {
				done = append(done, j.Store())
			}
		}
		claimed = append(claimed, wire.StoreJobs(resp.Claimed)...)
	}
	s.jobHub.notifyAll() // the resources' next jobs, of any kind, may have been promoted
	return done, claimed, nil
}

// FailJob ends the running attempt (ID, Token) with an error. p.RetryAfter is sent in whole
// milliseconds, rounded up.
func (s *Store) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	j, err := s.jobCall(ctx, http.MethodPost, p.ID, "fail", wire.FailRequest{Token: p.Token, Code: p.Code,
		Message: p.Message, Permanent: p.Permanent, RetryAfterMs: ceilMs(p.RetryAfter)})
	if err != nil {
		return nil, err
	}
	s.jobHub.notifyAll() // the job itself may be claimable again, or the next one promoted
	return j, nil
}

// CancelJob cancels a job that is not running, or requests the cancellation of a running one.
func (s *Store) CancelJob(ctx context.Context, id int64) (*store.Job, error) {
	j, err := s.jobCall(ctx, http.MethodPost, id, "cancel", nil)
	if err != nil {
		return nil, err
	}
	if j.State == store.JobCancelled {
		s.jobHub.notifyAll() // the resource's next job may have been promoted
	}
	return j, nil
}

// RetryJob makes a discarded, cancelled or skipped job available again, or a retryable job
// claimable now.
func (s *Store) RetryJob(ctx context.Context, id int64) (*store.Job, error) {
	j, err := s.jobCall(ctx, http.MethodPost, id, "retry", nil)
	if err != nil {
		return nil, err
	}
	s.jobHub.notify(j.Kind)
	return j, nil
}

// PurgeJobs deletes the dead letters matching p (an admin call); returns how many.
func (s *Store) PurgeJobs(ctx context.Context, p *store.PurgeParams) (int, error) {
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var resp wire.PurgeResponse
	if err := s.do(ctx, http.MethodPost, "/v1/dlq/purge", nil, wire.PurgeRequest{IDs: p.IDs, Kind: p.Kind, Resource: p.Resource}, &resp); err != nil {
		return 0, err
	}
	return resp.Purged, nil
}

// ReapJobs ends the attempts whose lease expired (an admin call; the server's own maintenance
// normally does this).
func (s *Store) ReapJobs(ctx context.Context, p *store.ReapParams) ([]*store.ReapedJob, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.ReapResponse
	if err := s.do(ctx, http.MethodPost, "/v1/jobs/reap", nil, wire.ReapRequest{Limit: p.Limit, RetryAfterMs: ceilMs(p.RetryAfter)}, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.ReapedJob, len(resp.Reaped))
	for i := range resp.Reaped {
		out[i] = &store.ReapedJob{Job: resp.Reaped[i].Job.Store(), Reason: resp.Reaped[i].Reason}
	}
	if len(out) > 0 {
		s.jobHub.notifyAll()
	}
	return out, nil
}

// CleanJobs deletes old finished jobs (an admin call). p.Age and p.DiscardedAge are sent in whole milliseconds,
// rounded down, so that a job is never kept longer than asked.
func (s *Store) CleanJobs(ctx context.Context, p *store.CleanParams) (int, error) {
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var resp wire.CleanResponse
	if err := s.do(ctx, http.MethodPost, "/v1/jobs/clean", nil,
		wire.CleanRequest{AgeMs: p.Age.Milliseconds(), Discarded: p.Discarded, DiscardedAgeMs: p.DiscardedAge.Milliseconds(),
			Limit: p.Limit}, &resp); err != nil {
		return 0, err
	}
	return resp.Deleted, nil
}

// JobCounts counts jobs per kind and unfinished state.
func (s *Store) JobCounts(ctx context.Context) ([]*store.JobCount, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var resp wire.JobCountsResponse
	if err := s.do(ctx, http.MethodGet, "/v1/jobs/counts", nil, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.JobCount, len(resp.Counts))
	for i, c := range resp.Counts {
		out[i] = &store.JobCount{Kind: c.Kind, State: c.State, Count: c.Count}
	}
	return out, nil
}

// GetResource returns a resource, or store.ErrNotFound.
func (s *Store) GetResource(ctx context.Context, key string) (*store.Resource, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateResource(key); err != nil {
		return nil, err
	}
	var resp wire.Resource
	if err := s.do(ctx, http.MethodGet, "/v1/resources/"+keyPath(key), nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Store(), nil
}

// ListResources lists resources by key, after p.After.
func (s *Store) ListResources(ctx context.Context, p *store.ResourceListParams) ([]*store.Resource, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.Prefix != "" {
		q.Set("prefix", p.Prefix)
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	var resp wire.ResourcesResponse
	if err := s.do(ctx, http.MethodGet, "/v1/resources", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.Resource, len(resp.Resources))
	for i := range resp.Resources {
		out[i] = resp.Resources[i].Store()
	}
	return out, nil
}

// SetResourceState sets a resource's state (an admin call: it overrides the kinds' guards);
// with p.IfVersion, only if the version matches (else *store.VersionMismatchError).
func (s *Store) SetResourceState(ctx context.Context, p *store.SetResourceStateParams) (*store.Resource, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.Resource
	// keyPath of the whole path, so that a key ending in "/" keeps its slash escaped.
	if err := s.do(ctx, http.MethodPut, "/v1/resources/"+keyPath(p.Key+"/state"), nil,
		wire.SetResourceStateRequest{State: p.State, IfVersion: p.IfVersion}, &resp); err != nil {
		return nil, err
	}
	return resp.Store(), nil
}

// ClearResourceCooldown ends a resource's cooldown early (an admin call) and returns what it
// was; store.ErrNotFound if the resource is not cooling down.
func (s *Store) ClearResourceCooldown(ctx context.Context, p *store.ClearCooldownParams) (*store.ResourceCooldown, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.ResourceCooldown
	if err := s.do(ctx, http.MethodPost, "/v1/resources/"+keyPath(p.Resource+"/clear-cooldown"), nil,
		wire.ClearCooldownRequest{Reason: p.Reason, Actor: p.Actor}, &resp); err != nil {
		return nil, err
	}
	// The head the cooldown held back may be claimable now.
	s.jobHub.notifyAll()
	return resp.Store(), nil
}

// SubscribeJobs registers a local waiter for jobs of kinds, on one channel. The server cannot push to this
// store, and it needs no push: a claim through it is a long-poll that the server answers as
// soon as a job of its kinds is claimable. The wake-ups are local hints, for the one thing a
// long-poll cannot do, which is to start: the subscriber is woken when a ClaimJobs through this
// store waited in the server and came back empty (ask again at once, so that a worker is always
// waiting in the server rather than sleeping its poll interval), when a submit, retry or reap
// through this store may have made a job of one of kinds claimable, when a complete, fail or cancel
// through this store may have promoted the next job of a resource (of any kind), and at Close.
// Jobs made claimable by other clients, or by time passing, wake nobody here: the long-poll
// and the subscriber's own poll find them.
func (s *Store) SubscribeJobs(kinds ...string) (<-chan struct{}, func()) {
	return s.jobHub.subscribe(kinds)
}

// kindHub broadcasts wake-ups to every local subscriber of a kind. Unlike the lease hub it
// wakes them all: wake-ups are hints that cost one claim request each, and which waiter should
// get one cannot be known here.
type kindHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newKindHub() *kindHub { return &kindHub{subs: map[string]map[chan struct{}]struct{}{}} }

// subscribe registers one channel under each of kinds.
func (h *kindHub) subscribe(kinds []string) (<-chan struct{}, func()) {
	kinds = slices.Clone(kinds) // kept for cancel
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	for _, kind := range kinds {
		if h.subs[kind] == nil {
			h.subs[kind] = map[chan struct{}]struct{}{}
		}
		h.subs[kind][ch] = struct{}{}
	}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, kind := range kinds {
				delete(h.subs[kind], ch)
				if len(h.subs[kind]) == 0 {
					delete(h.subs, kind)
				}
			}
		})
	}
}

func (h *kindHub) notify(kinds ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range kinds {
		for ch := range h.subs[k] {
			wakeChan(ch)
		}
	}
}

func (h *kindHub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for ch := range set {
			wakeChan(ch)
		}
	}
}

func wakeChan(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// stopWaitOn ends the wait of the claim named id (POST /v1/jobs/claim/stop) once done is
// closed. The returned function is called when the claim has answered: it says whether the
// stop was sent, after it has ended (cut short if still on its way).
func (s *Store) stopWaitOn(ctx context.Context, done <-chan struct{}, id string) func() bool {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	var sent bool
	go func() {
		defer close(finished)
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
		sent = true
		// A stop that fails leaves the claim to wait out its wait; it is answered all the same.
		var resp wire.ClaimStopResponse
		_ = s.do(ctx, http.MethodPost, "/v1/jobs/claim/stop", nil, wire.ClaimStopRequest{WaitID: id}, &resp)
	}()
	return func() bool {
		cancel()
		<-finished
		return sent
	}
}

// newWaitID names one claim's wait: random, so that no other claim's stop ends it.
func newWaitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
