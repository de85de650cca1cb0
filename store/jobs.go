package store

import (
	"context"
	"encoding/json"
	"time"
)

// JobStore is the seam of the job queue, implemented by the SQLite and PostgreSQL stores and by
// the HTTP client, and checked by storetest.RunJobs.
//
// The execution record is the lock: a running job's row carries its own lease (worker, fencing
// token, expiry on the store's clock). The database enforces at most one running job per
// resource. Per resource, jobs run one at a time in queue order (Job.Seq): only the oldest
// unfinished job of a resource (its head) can be claimed, and it stays head through its retries.
//
// Every method is one atomic step. Errors: *InvalidArgumentError for bad input (nothing written),
// ErrNotFound for an unknown job or resource, ErrNotHeld when (ID, Token) no longer names the
// running attempt, *ResourceBusyError from SubmitJob under the reject policy, *JobStateError when
// the job's state forbids the operation, ErrClosed after Close.
type JobStore interface {
	// RegisterKinds creates or replaces kind definitions, all or none.
	RegisterKinds(ctx context.Context, kinds []Kind) error
	// Kinds lists the registered kinds, by name.
	Kinds(ctx context.Context) ([]Kind, error)

	// SubmitJob enqueues a job. With an idempotency key that exists, it returns the existing job
	// and Existing=true, whatever the other fields say (if that job was superseded, the job
	// that replaced it, following the chain of replacements); concurrent submits with one key
	// create one job. The kind must be registered. Under PolicyReplace it supersedes, in the
	// same atomic step, the queued jobs of its kind on its resource (see PolicyReplace).
	SubmitJob(ctx context.Context, p *SubmitParams) (*SubmitResult, error)
	// SubmitMany enqueues 1..MaxSubmitMany jobs in one atomic step, all or none: each job as
	// SubmitJob would have, one after the other in the order of ps (a job sees the jobs before it:
	// a second job on one resource queues behind the first, or is skipped or refused under its
	// policy; a repeated idempotency key returns the job of its first occurrence, Existing=true).
	// The result is aligned with ps. A bad job (*InvalidArgumentError on "jobs[i].field") or a
	// refused one (*SubmitManyError around *ResourceBusyError) fails them all.
	SubmitMany(ctx context.Context, ps []*SubmitParams) ([]*SubmitResult, error)
	// GetJob returns one job, or ErrNotFound.
	GetJob(ctx context.Context, id int64) (*Job, error)
	// ListJobs lists jobs by ID, after p.After, at most p.Limit.
	ListJobs(ctx context.Context, p *JobListParams) ([]*Job, error)

	// ClaimJobs starts up to p.Limit claimable jobs of p.Kinds for p.Worker: each becomes
	// running with a fresh fencing token (drawn in the claim, from the same store-wide sequence
	// as lease tokens) and a lease of p.TTL. A job whose kind's state guard refuses the
	// resource's state is not started: it is discarded with error code CodeInvalidResourceState
	// (in the same atomic step) and not returned.
	ClaimJobs(ctx context.Context, p *ClaimParams) ([]*Job, error)
	// HeartbeatJob extends the running attempt's lease by p.TTL. ErrNotHeld if (ID, Token) is
	// not the running attempt. It reports whether a cancel was requested.
	HeartbeatJob(ctx context.Context, p *HeartbeatParams) (*HeartbeatResult, error)
	// CompleteJob ends the running attempt (ID, Token) as succeeded (a cancel request that came
	// too late is ignored: the work is done); sets the resource's success state; promotes the
	// resource's next job.
	CompleteJob(ctx context.Context, p *CompleteParams) (*Job, error)
	// FailJob ends the running attempt (ID, Token) with an error: retryable after p.RetryAfter
	// while attempts remain, else discarded (dead letter, resource set to the failure state);
	// discarded at once if p.Permanent; cancelled if a cancel was requested.
	FailJob(ctx context.Context, p *FailParams) (*Job, error)

	// CancelJob cancels a job that is not running (it becomes cancelled at once) or requests
	// the cancellation of a running one (CancelRequested; it ends when its worker stops or its
	// lease expires). *JobStateError for a finished job.
	CancelJob(ctx context.Context, id int64) (*Job, error)
	// RetryJob makes a discarded, cancelled or skipped job (not a superseded one: its
	// replacement runs instead) available again at the back of its
	// resource's queue (a new Seq; MaxAttempts raised to Attempt+1 if exhausted), or a retryable
	// job claimable now. *JobStateError for other states.
	RetryJob(ctx context.Context, id int64) (*Job, error)
	// PurgeJobs deletes discarded jobs (the dead letters) matching p; returns how many.
	PurgeJobs(ctx context.Context, p *PurgeParams) (int, error)

	// ReapJobs ends the attempts of running jobs whose lease expired (CodeWorkerTimeout) or that
	// hold no lease (CodeLockStateLost): retryable if attempts remain, else discarded; cancelled
	// if a cancel was requested. At most p.Limit per call.
	ReapJobs(ctx context.Context, p *ReapParams) ([]*ReapedJob, error)
	// CleanJobs deletes succeeded, cancelled, skipped and superseded jobs finished more than p.Age ago (on
	// the store's clock), and discarded ones too if p.Discarded (finished more than
	// p.DeadLetterAge() ago); at most p.Limit per call. A store with a line also deletes up to
	// p.Limit expired tickets (waits that were abandoned, skipped by everyone), uncounted.
	CleanJobs(ctx context.Context, p *CleanParams) (int, error)
	// JobCounts counts jobs per kind and state (unfinished states only).
	JobCounts(ctx context.Context) ([]*JobCount, error)

	// GetResource returns a resource, or ErrNotFound if no job or state was ever recorded.
	GetResource(ctx context.Context, key string) (*Resource, error)
	// ListResources lists resources by key, after p.After.
	ListResources(ctx context.Context, p *ResourceListParams) ([]*Resource, error)
	// SetResourceState sets a resource's state (creating the resource if needed), bumping its
	// version; with p.IfVersion set, only if the version matches (else *VersionMismatchError).
	SetResourceState(ctx context.Context, p *SetResourceStateParams) (*Resource, error)
	// ClearResourceCooldown ends a resource's cooldown (Kind.ResourceCooldown) early, for an
	// operator, and returns what it was; ErrNotFound if the resource is not cooling down. A head
	// whose start the cooldown had postponed becomes claimable at once. A store with an audit log
	// records it (EventResourceCooldownCleared) in the same atomic step.
	ClearResourceCooldown(ctx context.Context, p *ClearCooldownParams) (*ResourceCooldown, error)

	// SubscribeJobs registers interest in jobs of any of kinds becoming claimable (a submit, a
	// promotion, a retry), on one channel. Wake-ups are hints, coalesced; the subscriber must
	// still poll. A store that wakes one subscriber per event counts one with a wake-up pending
	// as woken for all its kinds, so that the next event goes to another subscriber.
	SubscribeJobs(kinds ...string) (wake <-chan struct{}, cancel func())
}

// JobState is the state of a job.
type JobState string

// Job states. Unfinished: scheduled, available, running, retryable. Final: the rest.
const (
	JobScheduled JobState = "scheduled" // waiting for ScheduledAt
	JobAvailable JobState = "available" // claimable when it is its resource's head
	JobRunning   JobState = "running"   // an attempt holds the job's lease
	JobRetryable JobState = "retryable" // an attempt failed; claimable again at ScheduledAt
	JobSucceeded JobState = "succeeded"
	JobCancelled JobState = "cancelled"
	JobDiscarded JobState = "discarded" // the dead letter state
	JobSkipped   JobState = "skipped"   // submitted under the skip policy to a busy resource
	// JobSuperseded: replaced by a newer job of its kind on its resource (PolicyReplace) before
	// it ran, or while it ran (its attempt asked to stop, and it stopped); Job.SupersededBy
	// names the replacement.
	JobSuperseded JobState = "superseded"
)

// JobStates lists every state, unfinished first.
var JobStates = []JobState{JobScheduled, JobAvailable, JobRunning, JobRetryable,
	JobSucceeded, JobCancelled, JobDiscarded, JobSkipped, JobSuperseded}

// Final reports whether a job in state s will not run again unless retried by hand.
func (s JobState) Final() bool {
	return s == JobSucceeded || s == JobCancelled || s == JobDiscarded || s == JobSkipped || s == JobSuperseded
}

// Valid reports whether s is a known state.
func (s JobState) Valid() bool {
	for _, v := range JobStates {
		if s == v {
			return true
		}
	}
	return false
}

// BusyPolicy says what a submit does when its resource has unfinished jobs.
type BusyPolicy string

// Busy policies.
const (
	PolicyQueue  BusyPolicy = "queue"  // wait for its turn (the default)
	PolicySkip   BusyPolicy = "skip"   // record the job as skipped, "resource busy"
	PolicyReject BusyPolicy = "reject" // refuse: *ResourceBusyError, nothing written
	// PolicyReplace: latest wins (jobs_replace.go). In the submit's atomic step, the resource's
	// unfinished jobs of the same kind that are not running become JobSuperseded (SupersededBy:
	// the new job), and a running one of that kind is asked to stop (CancelRequested, as
	// CancelJob does; its attempt ends superseded when its worker reports or its lease expires,
	// or succeeded if it completes first). The new job queues behind whatever is left, so it
	// starts only after that attempt ended. Jobs of other kinds are never touched.
	PolicyReplace BusyPolicy = "replace"
)

// Error codes recorded in Job.Errors.
const (
	CodeHandlerError         = "handler_error"          // the handler returned an error
	CodePermanent            = "permanent"              // the handler returned baton.Permanent(err)
	CodeTimeout              = "timeout"                // the attempt exceeded the kind's timeout
	CodeWorkerTimeout        = "worker_timeout"         // the attempt's lease expired (reaper)
	CodeLockStateLost        = "lock_state_lost"        // a running job held no lease (reaper)
	CodeInvalidResourceState = "invalid_resource_state" // the kind's state guard refused
	CodeResourceBusy         = "resource_busy"          // skipped under the skip policy
	CodeCancelled            = "cancelled"              // cancelled while running
	CodeResourceCooldown     = "resource_cooldown"      // skipped: the resource is cooling down
	CodeUnknownLimit         = "unknown_limit"          // discarded: a limit it names was deleted
)

// Kind is a job kind's definition, stored in the database so that every process (and the
// server, for remote submitters and workers) applies the same rules.
type Kind struct {
	Name        string     `json:"name"`
	Policy      BusyPolicy `json:"policy,omitempty"`       // default PolicyQueue
	MaxAttempts int        `json:"max_attempts,omitempty"` // default DefaultMaxAttempts
	// Timeout bounds one attempt (the handler's context); 0 means none.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Cooldown: after a job of this kind finishes on a resource, the next job of this kind on
	// that resource does not start before this much time has passed.
	Cooldown time.Duration `json:"cooldown,omitempty"`
	// ResourceCooldown: after a job of this kind ends on a resource after an attempt (succeeded,
	// or discarded or cancelled), the resource is cooling down ("recently remediated") for this
	// long, for every kind: a job submitted to it meanwhile is skipped (CodeResourceCooldown,
	// with JobError.Until), not queued; a job already queued there starts after the cooldown.
	// It survives restarts (it is in the database) and ClearResourceCooldown ends it early.
	ResourceCooldown time.Duration `json:"resource_cooldown,omitempty"`
	// State guard (optional). FromStates lists the resource states from which a job of this kind
	// may start ("" is the state of a resource never set); empty means any. RunningState is set
	// when an attempt starts; SuccessState when the job succeeds; FailureState when it ends
	// discarded or cancelled after an attempt. "" leaves the state alone. A retry of a job
	// whose earlier attempt set RunningState may start from RunningState.
	FromStates   []string `json:"from_states,omitempty"`
	RunningState string   `json:"running_state,omitempty"`
	SuccessState string   `json:"success_state,omitempty"`
	FailureState string   `json:"failure_state,omitempty"`
	// Mode is how its jobs hold their resource: "exclusive" (the default, also "") or "shared"
	// (SubmitParams.Mode overrides it per job).
	Mode string `json:"mode,omitempty"`
	// Limits are limit names, or templates such as "zone/{args.zone}" whose {args.NAME} parts
	// take the value of the job's top-level argument NAME (a string or a number): each job of the
	// kind takes a unit of each (store/jobs_holds.go).
	Limits []string `json:"limits,omitempty"`
	// Debounce, only with Policy replace: each job of the kind is scheduled at its submit's
	// time plus Debounce (store clock), so that a burst of submits, each superseding the one
	// before, runs once, the last, after the submits have been quiet for Debounce. 0 means
	// none; else MinDebounce..MaxDebounce. SubmitParams.Debounce overrides it.
	Debounce time.Duration `json:"debounce,omitempty"`
	// Rate (optional): at most Rate.Max attempts of this kind start on one resource in any
	// window of Rate.Window (store clock), counted in the database (store/rate.go). A job whose
	// rate is reached stays its resource's head, scheduled for when the window frees; under the
	// skip policy a submit while it is reached is skipped (CodeRateLimited, JobError.Until).
	Rate *Rate `json:"rate,omitempty"`
}

// JobError is one failed attempt in a job's history.
type JobError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	// Until is set on a CodeResourceCooldown skip: when the resource's cooldown ends, and on a
	// CodeRateLimited skip: when the rate's window frees (store clock, like At).
	Until time.Time `json:"until,omitzero"`
}

// Job is a job as the store sees it. Times are on the store's clock; zero when not set.
type Job struct {
	ID             int64
	Seq            int64 // queue position within its resource (smaller runs first)
	Kind           string
	Resource       string
	Args           json.RawMessage // a JSON object
	State          JobState
	Attempt        int // attempts started
	MaxAttempts    int
	Priority       int // across resources, smaller is claimed first
	IdempotencyKey string
	Errors         []JobError
	CreatedAt      time.Time
	ScheduledAt    time.Time // claimable from (with Head)
	AttemptedAt    time.Time // start of the latest attempt
	FinishedAt     time.Time
	// Head: the oldest unfinished job of its resource, the only one that may be claimed.
	Head bool
	// The latest attempt's lease: who runs it, its fencing token, when the lease expires.
	Worker string
	// Owner is the principal the latest attempt belongs to (ClaimParams.Owner); empty if none.
	Owner           string
	Token           uint64
	LeaseExpiresAt  time.Time
	CancelRequested bool
	// Timeout of one attempt (from the kind at claim time); 0 means none.
	Timeout time.Duration
	// ClaimWaited is set on jobs returned by ClaimJobs of a store that waits itself (the HTTP
	// client, whose server long-polls): how long the claim waited, on the store side's monotonic
	// clock, before the attempt that claimed the job began. The worker bounds the claim time from
	// below with start_of_call + ClaimWaited*(1-drift), as Locker does with Lease.Waited.
	ClaimWaited time.Duration
	// Beyond one key (store/jobs_holds.go): an attempt holds its resource shared with other shared
	// holders, holds Resources too, and takes a unit of each of Limits, all granted at once.
	Shared    bool
	Resources []string
	Limits    []string
	// Tree is set when the job's resource is a key of a tree (Treer): its attempts hold it by
	// the tree's rules (trees.go), through the same grant as Shared, Resources and Limits.
	Tree bool
	// Holds is set when the store grants the job's attempts through holds although it asks for
	// no more than one exclusive key: a key of it is under a rated prefix (rate_prefix.go), on a
	// store that counts such rates there (PostgreSQL).
	Holds bool
	// Slots is set on a claimed job: the slot of each of Limits its attempt holds (Lease.Slots).
	Slots map[string]int
	// SupersededBy is the job that replaced this one under PolicyReplace: set when it became
	// JobSuperseded, and on a running job asked to stop by a replace (the newest such; if that
	// attempt succeeds anyway, the job stays succeeded and keeps it). 0 otherwise.
	SupersededBy int64
	// TraceParent is the W3C traceparent of the submitter's span (SubmitParams.TraceParent):
	// the job's attempts join that trace. Empty if none.
	TraceParent string
}

// SubmitParams are the inputs of JobStore.SubmitJob.
type SubmitParams struct {
	Kind     string
	Resource string
	// Args is a JSON object; empty means {}.
	Args           json.RawMessage
	IdempotencyKey string
	Policy         BusyPolicy // "" means the kind's
	MaxAttempts    int        // 0 means the kind's
	Priority       int        // 0..MaxPriority; smaller is claimed first across resources
	// ScheduledAt delays the job (zero: now). It is an absolute time on the submitter's clock;
	// Delay, relative to the store's clock, is preferred when both are possible.
	ScheduledAt time.Time
	Delay       time.Duration
	// Mode: "" (the kind's), "exclusive" or "shared". Resources: extra resources the job's
	// attempts hold too. Limits: limits the attempts take a unit of, besides the kind's.
	Mode      string
	Resources []string
	Limits    []string
	// Debounce, with policy replace (the submit's or its kind's) only, overrides the kind's
	// Debounce (Kind.Debounce): 0 means the kind's. The job starts no earlier than the store's
	// now plus the debounce (nor than Delay or ScheduledAt).
	Debounce time.Duration
	// TraceParent is the W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>") of the submitter's
	// span, kept with the job so that its attempts join the submitter's trace; empty for none.
	// Queue.Submit fills it from the context's span when empty. At most MaxTraceParent bytes.
	TraceParent string
}

// SubmitResult is what SubmitJob returns.
type SubmitResult struct {
	Job *Job
	// Existing is true when the idempotency key named a job submitted before.
	Existing bool
	// Superseded is how many queued jobs this submit (PolicyReplace) ended superseded in its own
	// step; a running job it asked to stop is not among them (its attempt ends superseded
	// later). 0 when Existing, and from a store that does not tell (the HTTP client).
	Superseded int
}

// JobListParams filter ListJobs. Zero fields match everything.
type JobListParams struct {
	State    JobState
	Kind     string
	Resource string
	After    int64 // only IDs greater than this (the cursor of the previous page)
	Limit    int   // 1..MaxListLimit; DefaultListSize if zero
}

// ClaimParams are the inputs of ClaimJobs.
type ClaimParams struct {
	Worker string // the holder name recorded on the job
	// Owner is the authenticated principal that claims (a server with authentication sets it to
	// the caller's token name; library workers leave it empty). An attempt belongs to its owner:
	// HeartbeatJob, CompleteJob and FailJob of another owner are refused with ErrNotHeld and
	// change nothing.
	Owner string
	Kinds []string      // claim only these kinds (at least one)
	Limit int           // 1..MaxClaimLimit
	TTL   time.Duration // the job lease's TTL
	// WaitDone, when closed, ends a claim's wait for a claimable job (the HTTP client's
	// long-poll in the server) without ending the call: it returns what it claimed, maybe
	// nothing. A worker passes its run context's Done here and keeps the call's ctx alive, so
	// that it stops promptly and no job claimed for it is left unanswered. Stores whose claims
	// do not wait ignore it.
	WaitDone <-chan struct{}
}

// HeartbeatParams are the inputs of HeartbeatJob.
type HeartbeatParams struct {
	ID    int64
	Token uint64
	Owner string // the attempt's owner (ClaimParams.Owner)
	TTL   time.Duration
}

// HeartbeatResult is what HeartbeatJob returns.
type HeartbeatResult struct {
	CancelRequested bool
	TTLLeft         time.Duration // on the store's clock
}

// CompleteParams are the inputs of CompleteJob.
type CompleteParams struct {
	ID    int64
	Token uint64
	Owner string // the attempt's owner (ClaimParams.Owner)
}

// FailParams are the inputs of FailJob.
type FailParams struct {
	ID         int64
	Token      uint64
	Owner      string // the attempt's owner (ClaimParams.Owner)
	Code       string // CodeHandlerError if empty
	Message    string
	Permanent  bool
	RetryAfter time.Duration // backoff before the next attempt, on the store's clock
}

// PurgeParams select dead letters to delete. Zero fields match everything.
type PurgeParams struct {
	IDs      []int64
	Kind     string
	Resource string
}

// ReapParams are the inputs of ReapJobs.
type ReapParams struct {
	Limit int // 1..MaxListLimit
	// RetryAfter is the backoff of a reaped job that will be retried.
	RetryAfter time.Duration
}

// ReapedJob is one job ReapJobs ended.
type ReapedJob struct {
	Job    *Job   // after the change
	Reason string // CodeWorkerTimeout or CodeLockStateLost
}

// CleanParams are the inputs of CleanJobs.
type CleanParams struct {
	Age       time.Duration
	Discarded bool
	// DiscardedAge, when Discarded, is how long ago a discarded job (a dead letter) must have
	// finished to be deleted, apart from Age for the other finished jobs; 0 means Age.
	DiscardedAge time.Duration
	Limit        int // 1..MaxCleanLimit
}

// DeadLetterAge is the age from which a clean deletes dead letters: DiscardedAge, or Age if 0.
func (p *CleanParams) DeadLetterAge() time.Duration {
	if p.DiscardedAge > 0 {
		return p.DiscardedAge
	}
	return p.Age
}

// JobCount is one row of JobCounts.
type JobCount struct {
	Kind  string
	State JobState
	Count int64
}

// Resource is a resource's recorded state.
type Resource struct {
	Key       string
	State     string
	Version   int64 // bumped by every state change
	UpdatedAt time.Time
	// RunningJob is the ID of its running job (the oldest, when shared jobs run together), 0 if
	// none; Unfinished counts its unfinished jobs.
	RunningJob int64
	Unfinished int64
	// Cooldown is the resource's cooldown (Kind.ResourceCooldown), nil if it is not cooling down.
	Cooldown *ResourceCooldown
}

// ResourceCooldown is a resource's cooldown after a job of a kind with a ResourceCooldown.
type ResourceCooldown struct {
	Resource string
	Until    time.Time     // store clock
	Left     time.Duration // Until minus the store's now when it was read
	Job      int64         // the job whose end started it
}

// ClearCooldownParams are the inputs of ClearResourceCooldown.
type ClearCooldownParams struct {
	Resource string
	Reason   string
	Actor    string // who, for the audit log; "unknown" if empty
	// Principal is the authenticated admin, recorded as the event's Principal (see
	// ForceReleaseParams.Principal).
	Principal string
}

// ResourceListParams filter ListResources.
type ResourceListParams struct {
	Prefix string
	After  string
	Limit  int
}

// SetResourceStateParams are the inputs of SetResourceState.
type SetResourceStateParams struct {
	Key       string
	State     string
	IfVersion *int64 // compare-and-set when not nil
}

// KindStats is one kind's row of KindStatsStore.KindStats: what alerts on stuck jobs and a
// growing dead-letter queue need.
type KindStats struct {
	Kind string
	// OldestRunningAge is how long the kind's oldest running attempt has run, on the store's
	// clock; 0 when none runs.
	OldestRunningAge time.Duration
	// DeadLetters counts the kind's discarded jobs.
	DeadLetters int64
	// RateReached counts the resources on which the kind's rate (Kind.Rate) is reached now: its
	// next job on each waits for the window to free (or is skipped, under the skip policy).
	RateReached int64
}
