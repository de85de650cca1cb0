package storetest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// memJobStore is an in-memory reference store.JobStore: one mutex makes every method atomic. It
// exists so the job suite can be run, and its checks shown to fail on broken variants, without
// depending on a database backend. Its bug fields make it one of those broken variants.
type memJobStore struct {
	mu        sync.Mutex
	offset    time.Duration // added to the real clock by Advance
	kinds     map[string]store.Kind
	jobs      map[int64]*store.Job
	resources map[string]*memResource
	idem      map[string]int64
	nextID    int64
	nextSeq   int64
	nextToken uint64
	hub       *notify.Hub

	// Bugs, for the meta-test.
	ignoreHead bool // claim any unfinished job, not only its resource's head
	lifo       bool // promote the newest job instead of the oldest
}

type memResource struct {
	key       string
	state     string
	version   int64
	updatedAt time.Time
	cooldowns map[string]time.Time // per kind: no start before
	coolUntil time.Time            // the resource's cooldown (Kind.ResourceCooldown)
	coolJob   int64
}

var _ store.JobStore = (*memJobStore)(nil)

func newMemJobStore() *memJobStore {
	return &memJobStore{kinds: map[string]store.Kind{}, jobs: map[int64]*store.Job{},
		resources: map[string]*memResource{}, idem: map[string]int64{}, hub: notify.NewHub()}
}

func (s *memJobStore) now() time.Time { return time.Now().Add(s.offset) }

func (s *memJobStore) advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

func clone(j *store.Job) *store.Job {
	c := *j
	c.Args = slices.Clone(j.Args)
	c.Errors = slices.Clone(j.Errors)
	return &c
}

func unfinished(s store.JobState) bool { return !s.Final() }

func invalidArg(field, rule string) error {
	return &store.InvalidArgumentError{Field: field, Rule: rule}
}

func (s *memJobStore) RegisterKinds(_ context.Context, kinds []store.Kind) error {
	checked := make([]store.Kind, len(kinds))
	for i, k := range kinds {
		k.FromStates = slices.Clone(k.FromStates)
		if err := k.Validate(); err != nil {
			return err
		}
		checked[i] = k
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range checked {
		s.kinds[k.Name] = k
	}
	return nil
}

func (s *memJobStore) Kinds(context.Context) ([]store.Kind, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Kind
	for _, k := range s.kinds {
		k.FromStates = slices.Clone(k.FromStates)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b store.Kind) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// queue returns the unfinished jobs of a resource in queue order.
func (s *memJobStore) queue(key string) []*store.Job {
	var q []*store.Job
	for _, j := range s.jobs {
		if j.Resource == key && unfinished(j.State) {
			q = append(q, j)
		}
	}
	slices.SortFunc(q, func(a, b *store.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return q
}

// promote makes the first unfinished job of a resource its head if it has none.
func (s *memJobStore) promote(key string, now time.Time) {
	q := s.queue(key)
	if len(q) == 0 {
		return
	}
	for _, j := range q {
		if j.Head {
			return
		}
	}
	h := q[0]
	if s.lifo {
		h = q[len(q)-1]
	}
	h.Head = true
	if cd := s.resources[key].cooldowns[h.Kind]; cd.After(h.ScheduledAt) {
		h.ScheduledAt = cd
	}
	if cd := s.resources[key].coolUntil; cd.After(h.ScheduledAt) {
		h.ScheduledAt = cd
	}
	if h.State == store.JobAvailable && h.ScheduledAt.After(now) {
		h.State = store.JobScheduled
	}
	s.hub.Notify(notify.JobKey(h.Kind))
}

// finish ends j in a final state and promotes the next job.
func (s *memJobStore) finish(j *store.Job, state store.JobState, now time.Time) {
	j.State, j.FinishedAt, j.Head, j.LeaseExpiresAt = state, now, false, time.Time{}
	if k, r := s.kinds[j.Kind], s.resources[j.Resource]; k.ResourceCooldown > 0 && j.Attempt > 0 && now.Add(k.ResourceCooldown).After(r.coolUntil) {
		r.coolUntil, r.coolJob = now.Add(k.ResourceCooldown), j.ID
	}
	if state == store.JobDiscarded || state == store.JobCancelled {
		if k := s.kinds[j.Kind]; k.FailureState != "" && j.Attempt > 0 {
			s.setState(s.resources[j.Resource], k.FailureState, now)
		}
	}
	s.promote(j.Resource, now)
}

func (s *memJobStore) setState(r *memResource, state string, now time.Time) {
	r.state, r.updatedAt = state, now
	r.version++
}

func (s *memJobStore) SubmitJob(_ context.Context, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submitLocked(p)
}

// SubmitMany submits each job in turn under the lock and, if one fails, removes what the
// others added (a submit adds a job, maybe a resource and a key, and touches nothing else).
func (s *memJobStore) SubmitMany(_ context.Context, ps []*store.SubmitParams) ([]*store.SubmitResult, error) {
	if err := store.ValidateSubmitMany(ps); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	firstID := s.nextID
	var newResources []string
	out := make([]*store.SubmitResult, len(ps))
	for i, p := range ps {
		_, had := s.resources[p.Resource]
		res, err := s.submitLocked(p)
		if err != nil {
			for id := firstID + 1; id <= s.nextID; id++ {
				delete(s.idem, s.jobs[id].IdempotencyKey)
				delete(s.jobs, id)
			}
			for _, r := range newResources {
				delete(s.resources, r)
			}
			return nil, store.AtJob(i, err)
		}
		if !had {
			newResources = append(newResources, p.Resource)
		}
		out[i] = res
	}
	return out, nil
}

func (s *memJobStore) submitLocked(p *store.SubmitParams) (*store.SubmitResult, error) {
	now := s.now()
	if p.IdempotencyKey != "" {
		if id, ok := s.idem[p.IdempotencyKey]; ok {
			return &store.SubmitResult{Job: clone(s.jobs[id]), Existing: true}, nil
		}
	}
	k, ok := s.kinds[p.Kind]
	if !ok {
		return nil, invalidArg("kind", fmt.Sprintf("%q is not registered", p.Kind))
	}
	q := s.queue(p.Resource)
	policy := p.Policy
	if policy == "" {
		policy = k.Policy
	}
	cool := s.resources[p.Resource] != nil && s.resources[p.Resource].coolUntil.After(now)
	if policy == store.PolicyReject && len(q) > 0 && !cool {
		head := q[0]
		for _, j := range q {
			if j.Head {
				head = j
			}
		}
		return nil, &store.ResourceBusyError{Resource: p.Resource, HeadJob: head.ID, State: head.State}
	}
	r := s.resources[p.Resource]
	if r == nil {
		r = &memResource{key: p.Resource, updatedAt: now, cooldowns: map[string]time.Time{}}
		s.resources[p.Resource] = r
	}
	s.nextID++
	s.nextSeq++
	j := &store.Job{ID: s.nextID, Seq: s.nextSeq, Kind: p.Kind, Resource: p.Resource, Args: slices.Clone(p.Args),
		State: store.JobAvailable, MaxAttempts: cmp.Or(p.MaxAttempts, k.MaxAttempts), Priority: p.Priority,
		IdempotencyKey: p.IdempotencyKey, TraceParent: p.TraceParent, CreatedAt: now, ScheduledAt: now}
	if len(j.Args) == 0 {
		j.Args = json.RawMessage(`{}`)
	}
	switch {
	case p.Delay > 0:
		j.ScheduledAt = now.Add(p.Delay)
	case !p.ScheduledAt.IsZero() && p.ScheduledAt.After(now):
		j.ScheduledAt = p.ScheduledAt
	}
	if j.ScheduledAt.After(now) {
		j.State = store.JobScheduled
	}
	if cool {
		j.State, j.FinishedAt = store.JobSkipped, now
		j.Errors = []store.JobError{store.CooldownSkipError(p.Resource, r.coolUntil, r.coolJob, now)}
	} else if policy == store.PolicySkip && len(q) > 0 {
		j.State, j.FinishedAt = store.JobSkipped, now
		j.Errors = []store.JobError{{At: now, Code: store.CodeResourceBusy, Message: fmt.Sprintf("resource busy: job %d is %s", q[0].ID, q[0].State)}}
	}
	s.jobs[j.ID] = j
	if p.IdempotencyKey != "" {
		s.idem[p.IdempotencyKey] = j.ID
	}
	s.promote(p.Resource, now)
	return &store.SubmitResult{Job: clone(j)}, nil
}

func (s *memJobStore) GetJob(_ context.Context, id int64) (*store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return clone(j), nil
}

func (s *memJobStore) ListJobs(_ context.Context, p *store.JobListParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.Job
	for _, j := range s.jobs {
		if j.ID > p.After && (p.State == "" || j.State == p.State) && (p.Kind == "" || j.Kind == p.Kind) &&
			(p.Resource == "" || j.Resource == p.Resource) {
			out = append(out, clone(j))
		}
	}
	slices.SortFunc(out, func(a, b *store.Job) int { return cmp.Compare(a.ID, b.ID) })
	return out[:min(len(out), p.Limit)], nil
}

func guardAllows(k store.Kind, state string, attempt int) bool {
	if len(k.FromStates) == 0 || slices.Contains(k.FromStates, state) {
		return true
	}
	return attempt > 0 && k.RunningState != "" && state == k.RunningState
}

func (s *memJobStore) ClaimJobs(_ context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var cands []*store.Job
	for _, j := range s.jobs {
		if (j.Head || s.ignoreHead && unfinished(j.State)) && j.State != store.JobRunning && unfinished(j.State) &&
			!j.ScheduledAt.After(now) && slices.Contains(p.Kinds, j.Kind) {
			cands = append(cands, j)
		}
	}
	slices.SortFunc(cands, func(a, b *store.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Seq, b.Seq))
	})
	var out []*store.Job
	for _, j := range cands {
		if len(out) == p.Limit {
			break
		}
		k, r := s.kinds[j.Kind], s.resources[j.Resource]
		if !guardAllows(k, r.state, j.Attempt) {
			j.Errors = append(j.Errors, store.JobError{Attempt: j.Attempt, At: now, Code: store.CodeInvalidResourceState,
				Message: fmt.Sprintf("resource state %q is not one of %q", r.state, k.FromStates)})
			s.finish(j, store.JobDiscarded, now)
			continue
		}
		s.nextToken++
		j.State, j.Attempt, j.Token, j.Worker, j.Owner = store.JobRunning, j.Attempt+1, s.nextToken, p.Worker, p.Owner
		j.AttemptedAt, j.LeaseExpiresAt, j.CancelRequested, j.Timeout = now, now.Add(p.TTL), false, k.Timeout
		if k.RunningState != "" {
			s.setState(r, k.RunningState, now)
		}
		out = append(out, clone(j))
	}
	return out, nil
}

// attempt returns the running attempt (id, token) of owner, or an error.
func (s *memJobStore) attempt(id int64, token uint64, owner string) (*store.Job, error) {
	j, ok := s.jobs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	if j.State != store.JobRunning || j.Token != token || j.Owner != owner {
		return nil, store.ErrNotHeld
	}
	return j, nil
}

func (s *memJobStore) HeartbeatJob(_ context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	j, err := s.attempt(p.ID, p.Token, p.Owner)
	if err != nil {
		return nil, err
	}
	if !j.LeaseExpiresAt.After(now) {
		return nil, store.ErrNotHeld
	}
	j.LeaseExpiresAt = now.Add(p.TTL)
	return &store.HeartbeatResult{CancelRequested: j.CancelRequested, TTLLeft: p.TTL}, nil
}

func (s *memJobStore) CompleteJob(_ context.Context, p *store.CompleteParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	j, err := s.attempt(p.ID, p.Token, p.Owner)
	if err != nil {
		return nil, err
	}
	k, r := s.kinds[j.Kind], s.resources[j.Resource]
	if k.Cooldown > 0 {
		r.cooldowns[j.Kind] = now.Add(k.Cooldown)
	}
	if k.SuccessState != "" {
		s.setState(r, k.SuccessState, now)
	}
	s.finish(j, store.JobSucceeded, now)
	return clone(j), nil
}

// endAttempt records an error on a running job and ends it: cancelled, discarded or retryable.
func (s *memJobStore) endAttempt(j *store.Job, code, msg string, permanent bool, retryAfter time.Duration, now time.Time) {
	j.Errors = append(j.Errors, store.JobError{Attempt: j.Attempt, At: now, Code: code, Message: msg})
	switch {
	case j.CancelRequested:
		s.finish(j, store.JobCancelled, now)
	case permanent || j.Attempt >= j.MaxAttempts:
		s.finish(j, store.JobDiscarded, now)
	default:
		j.State, j.ScheduledAt, j.LeaseExpiresAt = store.JobRetryable, now.Add(retryAfter), time.Time{}
		if retryAfter == 0 {
			s.hub.Notify(notify.JobKey(j.Kind))
		}
	}
}

func (s *memJobStore) FailJob(_ context.Context, p *store.FailParams) (*store.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	j, err := s.attempt(p.ID, p.Token, p.Owner)
	if err != nil {
		return nil, err
	}
	s.endAttempt(j, p.Code, p.Message, p.Permanent, p.RetryAfter, now)
	return clone(j), nil
}

func (s *memJobStore) CancelJob(_ context.Context, id int64) (*store.Job, error) {
	if id <= 0 {
		return nil, invalidArg("id", "must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	switch {
	case !ok:
		return nil, store.ErrNotFound
	case j.State.Final():
		return nil, &store.JobStateError{ID: id, Op: "cancel", State: j.State}
	case j.State == store.JobRunning:
		j.CancelRequested = true
	default:
		s.finish(j, store.JobCancelled, s.now())
	}
	return clone(j), nil
}

func (s *memJobStore) RetryJob(_ context.Context, id int64) (*store.Job, error) {
	if id <= 0 {
		return nil, invalidArg("id", "must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	j, ok := s.jobs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	switch j.State {
	case store.JobDiscarded, store.JobCancelled, store.JobSkipped:
		s.nextSeq++
		j.State, j.Seq, j.FinishedAt, j.ScheduledAt, j.CancelRequested = store.JobAvailable, s.nextSeq, time.Time{}, now, false
		if j.Attempt >= j.MaxAttempts {
			j.MaxAttempts = j.Attempt + 1
		}
		s.promote(j.Resource, now)
	case store.JobRetryable:
		j.ScheduledAt = now
		s.hub.Notify(notify.JobKey(j.Kind))
	default:
		return nil, &store.JobStateError{ID: id, Op: "retry", State: j.State}
	}
	return clone(j), nil
}

func (s *memJobStore) PurgeJobs(_ context.Context, p *store.PurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, j := range s.jobs {
		if j.State == store.JobDiscarded && (len(p.IDs) == 0 || slices.Contains(p.IDs, id)) &&
			(p.Kind == "" || j.Kind == p.Kind) && (p.Resource == "" || j.Resource == p.Resource) {
			s.delete(j)
			n++
		}
	}
	return n, nil
}

func (s *memJobStore) delete(j *store.Job) {
	delete(s.jobs, j.ID)
	if j.IdempotencyKey != "" {
		delete(s.idem, j.IdempotencyKey)
	}
}

func (s *memJobStore) ReapJobs(_ context.Context, p *store.ReapParams) ([]*store.ReapedJob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var expired []*store.Job
	for _, j := range s.jobs {
		if j.State == store.JobRunning && !j.LeaseExpiresAt.After(now) {
			expired = append(expired, j)
		}
	}
	slices.SortFunc(expired, func(a, b *store.Job) int { return a.LeaseExpiresAt.Compare(b.LeaseExpiresAt) })
	var out []*store.ReapedJob
	for _, j := range expired[:min(len(expired), p.Limit)] {
		s.endAttempt(j, store.CodeWorkerTimeout, "the attempt's lease expired", false, p.RetryAfter, now)
		out = append(out, &store.ReapedJob{Job: clone(j), Reason: store.CodeWorkerTimeout})
	}
	return out, nil
}

func (s *memJobStore) CleanJobs(_ context.Context, p *store.CleanParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff, dlCutoff := s.now().Add(-p.Age), s.now().Add(-p.DeadLetterAge())
	var old []*store.Job
	for _, j := range s.jobs {
		if j.State.Final() && (j.State != store.JobDiscarded && j.FinishedAt.Before(cutoff) ||
			j.State == store.JobDiscarded && p.Discarded && j.FinishedAt.Before(dlCutoff)) {
			old = append(old, j)
		}
	}
	slices.SortFunc(old, func(a, b *store.Job) int { return a.FinishedAt.Compare(b.FinishedAt) })
	old = old[:min(len(old), p.Limit)]
	for _, j := range old {
		s.delete(j)
	}
	return len(old), nil
}

func (s *memJobStore) JobCounts(context.Context) ([]*store.JobCount, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[[2]string]int64{}
	for _, j := range s.jobs {
		if unfinished(j.State) {
			counts[[2]string{j.Kind, string(j.State)}]++
		}
	}
	var out []*store.JobCount
	for k, n := range counts {
		out = append(out, &store.JobCount{Kind: k[0], State: store.JobState(k[1]), Count: n})
	}
	slices.SortFunc(out, func(a, b *store.JobCount) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(string(a.State), string(b.State)))
	})
	return out, nil
}

func (s *memJobStore) resource(r *memResource) *store.Resource {
	out := &store.Resource{Key: r.key, State: r.state, Version: r.version, UpdatedAt: r.updatedAt}
	if now := s.now(); r.coolUntil.After(now) {
		out.Cooldown = &store.ResourceCooldown{Resource: r.key, Until: r.coolUntil, Left: r.coolUntil.Sub(now), Job: r.coolJob}
	}
	for _, j := range s.queue(r.key) {
		out.Unfinished++
		if j.State == store.JobRunning {
			out.RunningJob = j.ID
		}
	}
	return out
}

func (s *memJobStore) GetResource(_ context.Context, key string) (*store.Resource, error) {
	if err := store.ValidateResource(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resources[key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return s.resource(r), nil
}

func (s *memJobStore) ListResources(_ context.Context, p *store.ResourceListParams) ([]*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.resources {
		if strings.HasPrefix(k, p.Prefix) && k > p.After {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []*store.Resource
	for _, k := range keys[:min(len(keys), p.Limit)] {
		out = append(out, s.resource(s.resources[k]))
	}
	return out, nil
}

func (s *memJobStore) SetResourceState(_ context.Context, p *store.SetResourceStateParams) (*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.resources[p.Key]
	var version int64
	if r != nil {
		version = r.version
	}
	if p.IfVersion != nil && *p.IfVersion != version {
		return nil, &store.VersionMismatchError{Key: p.Key, Want: *p.IfVersion, Current: version}
	}
	if r == nil {
		r = &memResource{key: p.Key, cooldowns: map[string]time.Time{}}
		s.resources[p.Key] = r
	}
	s.setState(r, p.State, now)
	return s.resource(r), nil
}

func (s *memJobStore) ClearResourceCooldown(_ context.Context, p *store.ClearCooldownParams) (*store.ResourceCooldown, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.resources[p.Resource]
	if r == nil || !r.coolUntil.After(now) {
		return nil, store.ErrNotFound
	}
	out := &store.ResourceCooldown{Resource: r.key, Until: r.coolUntil, Left: r.coolUntil.Sub(now), Job: r.coolJob}
	for _, j := range s.queue(r.key) {
		if j.Head && j.ScheduledAt.Equal(r.coolUntil) {
			j.ScheduledAt = now
			if j.State == store.JobScheduled {
				j.State = store.JobAvailable
			}
			s.hub.Notify(notify.JobKey(j.Kind))
		}
	}
	r.coolUntil, r.coolJob = time.Time{}, 0
	return out, nil
}

func (s *memJobStore) SubscribeJobs(kinds ...string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(notify.JobKeys(kinds)...)
}
