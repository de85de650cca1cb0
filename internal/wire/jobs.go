package wire

import (
	"encoding/json"
	"time"

	"github.com/batonhq/baton/store"
)

// timeLayout is RFC 3339 in UTC with milliseconds, the API's time format.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is a time of the job API: RFC 3339 in UTC with milliseconds. Fields of this type are
// tagged omitzero, so a time that is not set is left out.
type Time struct{ time.Time }

// T converts a time, truncated to the millisecond the API carries, in UTC.
func T(t time.Time) Time {
	if t.IsZero() {
		return Time{}
	}
	return Time{t.UTC().Truncate(time.Millisecond)}
}

// MarshalJSON writes the time as an RFC 3339 string with milliseconds.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return t.appendJSON(make([]byte, 0, len(timeLayout)+2)), nil
}

// UnmarshalJSON reads an RFC 3339 string (any fraction of a second) or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		s = string(b[1 : len(b)-1]) // the usual case, without a second decoder
	}
	if !plain(s) || s == "" {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return err
	}
	*t = Time{v.UTC()}
	return nil
}

// ms is d in whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }

func dur(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// JobError is one failed attempt in a job's history.
type JobError struct {
	Attempt int    `json:"attempt"`
	At      Time   `json:"at,omitzero"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Until and RemainingMs are set on a resource_cooldown skip: when the resource's cooldown
	// ends, and how much of it was left at the submit (Until minus At).
	Until       Time  `json:"until,omitzero"`
	RemainingMs int64 `json:"remaining_ms,omitempty"`
}

func jobErrorFrom(e store.JobError) JobError {
	out := JobError{Attempt: e.Attempt, At: T(e.At), Code: e.Code, Message: e.Message, Until: T(e.Until)}
	if !e.Until.IsZero() {
		out.RemainingMs = max(e.Until.Sub(e.At), 0).Milliseconds()
	}
	return out
}

// Job is the job object: the answer of submit, get, cancel, retry, complete and fail.
type Job struct {
	ID             int64           `json:"id"`
	Seq            int64           `json:"seq"`
	Kind           string          `json:"kind"`
	Resource       string          `json:"resource"`
	Args           json.RawMessage `json:"args"`
	State          store.JobState  `json:"state"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Priority       int             `json:"priority"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Errors         []JobError      `json:"errors"`
	// LastError is the latest attempt's error, if that attempt failed: it belongs to the attempt,
	// not to a later cancel (see Cancel).
	LastError   *JobError `json:"last_error,omitempty"`
	CreatedAt   Time      `json:"created_at,omitzero"`
	ScheduledAt Time      `json:"scheduled_at,omitzero"`
	AttemptedAt Time      `json:"attempted_at,omitzero"`
	FinishedAt  Time      `json:"finished_at,omitzero"`
	Head        bool      `json:"head"`
	Worker      string    `json:"worker,omitempty"`
	// Owner is the principal the latest attempt belongs to (the token name that claimed it).
	Owner           string `json:"owner,omitempty"`
	Token           uint64 `json:"token"`
	LeaseExpiresAt  Time   `json:"lease_expires_at,omitzero"`
	CancelRequested bool   `json:"cancel_requested"`
	// Cancel is set on a cancelled job.
	Cancel    *JobCancel `json:"cancel,omitempty"`
	TimeoutMs int64      `json:"timeout_ms"`
	// Shared, Resources and Limits are what the job's attempts hold beyond Resource, as the lease
	// object's: the resource (and Resources) in shared mode, the other resources they hold, and
	// the limits of which they take one unit each (the submit's, then the kind's, filled in).
	Shared    bool     `json:"shared,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Limits    []string `json:"limits,omitempty"`
	// Tree is set when Resource is a key of a tree: the job's attempts hold it by the tree's
	// rules (GET /v1/trees).
	Tree bool `json:"tree,omitempty"`
	// Slots (a claimed job's) numbers the unit its attempt holds of each of Limits.
	Slots map[string]int `json:"slots,omitempty"`
	// SupersededBy is the job that replaced this one under the replace policy (a superseded
	// job's, or a running one's that a replace asked to stop).
	SupersededBy int64 `json:"superseded_by,omitempty"`
	// TraceParent is the W3C traceparent of the submitter's span (the submit request's
	// traceparent header): the job's attempts join that trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// JobCancel says when a job was cancelled and which attempt the cancel stopped: DuringAttempt
// is 0 if no attempt was running (cancelled before its first attempt or between two).
type JobCancel struct {
	At            Time `json:"at"`
	DuringAttempt int  `json:"during_attempt"`
}

// JobOutcome derives a job's last_error and cancel from its error history and state: the latest
// attempt's error if it failed, and, for a cancelled job, when and during which attempt.
func JobOutcome(j *store.Job) (*JobError, *JobCancel) {
	var last *JobError
	if n := len(j.Errors); n > 0 && j.Errors[n-1].Attempt == j.Attempt && j.Attempt > 0 {
		e := j.Errors[n-1]
		last = &JobError{Attempt: e.Attempt, At: T(e.At), Code: e.Code, Message: e.Message}
	}
	if j.State != store.JobCancelled {
		return last, nil
	}
	c := &JobCancel{At: T(j.FinishedAt)}
	// A cancel of a running job is a request its attempt's end honours (whatever that attempt
	// reports), and the request stays recorded; a job not running is cancelled at once.
	if j.CancelRequested || (last != nil && last.Code == store.CodeCancelled) {
		c.DuringAttempt = j.Attempt
	}
	return last, c
}

// JobFrom converts a store job.
func JobFrom(j *store.Job) Job {
	args := j.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	errs := make([]JobError, len(j.Errors))
	for i, e := range j.Errors {
		errs[i] = jobErrorFrom(e)
	}
	lastErr, cancel := JobOutcome(j)
	return Job{ID: j.ID, Seq: j.Seq, Kind: j.Kind, Resource: j.Resource, Args: args, State: j.State,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Priority: j.Priority, IdempotencyKey: j.IdempotencyKey,
		Errors: errs, CreatedAt: T(j.CreatedAt), ScheduledAt: T(j.ScheduledAt), AttemptedAt: T(j.AttemptedAt),
		FinishedAt: T(j.FinishedAt), Head: j.Head, Worker: j.Worker, Owner: j.Owner, Token: j.Token,
		LeaseExpiresAt: T(j.LeaseExpiresAt), CancelRequested: j.CancelRequested, TimeoutMs: ms(j.Timeout),
		LastError: lastErr, Cancel: cancel, Shared: j.Shared, Resources: j.Resources, Limits: j.Limits, Tree: j.Tree, Slots: j.Slots,
		SupersededBy: j.SupersededBy, TraceParent: j.TraceParent}
}

// JobsFrom converts store jobs; never nil, so that it encodes as [].
func JobsFrom(jobs []*store.Job) []Job {
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		out[i] = JobFrom(j)
	}
	return out
}

// Store converts back to a store job.
func (j *Job) Store() *store.Job {
	var errs []store.JobError
	for _, e := range j.Errors {
		errs = append(errs, store.JobError{Attempt: e.Attempt, At: e.At.Time, Code: e.Code, Message: e.Message, Until: e.Until.Time})
	}
	args := j.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	return &store.Job{ID: j.ID, Seq: j.Seq, Kind: j.Kind, Resource: j.Resource, Args: args, State: j.State,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Priority: j.Priority, IdempotencyKey: j.IdempotencyKey,
		Errors: errs, CreatedAt: j.CreatedAt.Time, ScheduledAt: j.ScheduledAt.Time, AttemptedAt: j.AttemptedAt.Time,
		FinishedAt: j.FinishedAt.Time, Head: j.Head, Worker: j.Worker, Owner: j.Owner, Token: j.Token,
		LeaseExpiresAt: j.LeaseExpiresAt.Time, CancelRequested: j.CancelRequested, Timeout: dur(j.TimeoutMs),
		Shared: j.Shared, Resources: j.Resources, Limits: j.Limits, Tree: j.Tree, Slots: j.Slots,
		SupersededBy: j.SupersededBy, TraceParent: j.TraceParent}
}

// StoreJobs converts a list back to store jobs.
func StoreJobs(jobs []Job) []*store.Job {
	out := make([]*store.Job, len(jobs))
	for i := range jobs {
		out[i] = jobs[i].Store()
	}
	return out
}

// JobsResponse answers GET /v1/jobs (NextAfter is set when the page is full: pass it as after)
// and POST /v1/jobs/claim (no NextAfter).
type JobsResponse struct {
	Jobs      []Job `json:"jobs"`
	NextAfter int64 `json:"next_after,omitempty"`
	// WaitedMs (claim only) is how long the server waited, from receiving the request to the
	// start of the claim that returned these jobs, in whole milliseconds rounded down.
	WaitedMs int64 `json:"waited_ms,omitempty"`
}

// SubmitRequest is the body of POST /v1/jobs. ScheduledAt is RFC 3339; the idempotency key may
// also come in the Idempotency-Key header.
type SubmitRequest struct {
	Kind           string           `json:"kind"`
	Resource       string           `json:"resource"`
	Args           json.RawMessage  `json:"args,omitempty"`
	Policy         store.BusyPolicy `json:"policy,omitempty"`
	MaxAttempts    int              `json:"max_attempts,omitempty"`
	Priority       int              `json:"priority,omitempty"`
	ScheduledAt    string           `json:"scheduled_at,omitempty"`
	DelayMs        int64            `json:"delay_ms,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	// Mode is how the job's attempts hold Resource (and Resources): "exclusive" or "shared";
	// empty means the kind's. Shared is a shorthand for Mode "shared". Resources are more
	// resources each attempt holds with Resource, all or nothing; Limits are limits of which each
	// attempt takes one unit, besides the kind's.
	Mode      string   `json:"mode,omitempty"`
	Shared    bool     `json:"shared,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Limits    []string `json:"limits,omitempty"`
	// DebounceMs, with policy replace only, overrides the kind's debounce: the job starts no
	// earlier than this long after the submit (store.SubmitParams.Debounce).
	DebounceMs int64 `json:"debounce_ms,omitempty"`
	// TraceParent is the W3C traceparent the job keeps (its attempts join that trace); empty:
	// the request's traceparent header, if any. In a batch, each job may carry its own.
	TraceParent string `json:"traceparent,omitempty"`
}

// SubmitMode is the submit's mode, Shared read as Mode "shared"; ok is false when Shared
// contradicts Mode ("exclusive"). Other values of Mode are left for the store to refuse.
func (r *SubmitRequest) SubmitMode() (mode string, ok bool) {
	if !r.Shared {
		return r.Mode, true
	}
	return store.ModeShared, r.Mode != store.ModeExclusive
}

// SubmitBatchRequest is the body of POST /v1/jobs/batch: 1..store.MaxSubmitMany jobs, each with
// the members of a single submit (the idempotency key in idempotency_key).
type SubmitBatchRequest struct {
	Jobs []*SubmitRequest `json:"jobs"`
}

// SubmitBatchResponse answers POST /v1/jobs/batch: one result per job, in the request's order.
type SubmitBatchResponse struct {
	Results []SubmitResult `json:"results"`
}

// SubmitResult is one job of a batch submit: the job, and whether its idempotency key named a
// job submitted before (by an earlier request, or earlier in the same batch).
type SubmitResult struct {
	Existing bool `json:"existing"`
	Job      Job  `json:"job"`
}

// ClaimRequest is the body of POST /v1/jobs/claim. A nil TTLMs means the default (30 s), a zero
// Limit 1; WaitMs > 0 makes the server wait for a claimable job (a long-poll).
//
// Limit is at most MaxClaimLimit: lower than the store's bound (store.MaxClaimLimit, for
// in-process workers batching at high concurrency) so that one answer, at up to 32 KiB of args
// per job, stays a few megabytes. The Go client claims at most that many per request.
type ClaimRequest struct {
	Worker string   `json:"worker"`
	Kinds  []string `json:"kinds"`
	Limit  int      `json:"limit,omitempty"`
	TTLMs  *int64   `json:"ttl_ms,omitempty"`
	WaitMs int64    `json:"wait_ms,omitempty"`
	// WaitID names the wait (1-64 of A-Z a-z 0-9 _ -, random per request), so that POST
	// /v1/jobs/claim/stop can end it without ending the request: the claim then answers what
	// it claimed, maybe nothing, and no claimed job is lost with an abandoned request.
	WaitID string `json:"wait_id,omitempty"`
}

// MaxClaimLimit bounds ClaimRequest.Limit.
const MaxClaimLimit = 100

// MaxWaitIDLen bounds ClaimRequest.WaitID.
const MaxWaitIDLen = 64

// ClaimStopRequest is the body of POST /v1/jobs/claim/stop: end the wait of the caller's claim
// named WaitID on this server.
type ClaimStopRequest struct {
	WaitID string `json:"wait_id"`
}

// ClaimStopResponse answers POST /v1/jobs/claim/stop. Stopped is false when no claim of that
// name waits on this server: it has answered already, it is waiting on another replica, or it
// has not arrived yet (then it will not wait when it does, for up to the server's --max-wait).
type ClaimStopResponse struct {
	Stopped bool `json:"stopped"`
}

// HeartbeatRequest is the body of POST /v1/jobs/{id}/heartbeat. A nil TTLMs means 30 s.
type HeartbeatRequest struct {
	Token uint64 `json:"token"`
	TTLMs *int64 `json:"ttl_ms,omitempty"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	CancelRequested bool  `json:"cancel_requested"`
	TTLLeftMs       int64 `json:"ttl_left_ms"`
}

// CompleteRequest is the body of POST /v1/jobs/{id}/complete.
type CompleteRequest struct {
	Token uint64 `json:"token"`
}

// CompleteManyRequest is the body of POST /v1/jobs/complete: up to MaxClaimLimit running
// attempts to complete as succeeded, and, if Claim is set, a claim run after them in the same
// transaction (a ClaimRequest without a wait: it never waits).
type CompleteManyRequest struct {
	Completions []CompleteItem `json:"completions"`
	Claim       *CompleteClaim `json:"claim,omitempty"`
}

// CompleteClaim is the claim of a CompleteManyRequest.
type CompleteClaim struct {
	Worker string   `json:"worker"`
	Kinds  []string `json:"kinds"`
	Limit  int      `json:"limit,omitempty"`
	TTLMs  *int64   `json:"ttl_ms,omitempty"`
}

// CompleteItem is one attempt of a CompleteManyRequest.
type CompleteItem struct {
	ID    int64  `json:"id"`
	Token uint64 `json:"token"`
}

// CompleteManyResponse answers POST /v1/jobs/complete. Completed is aligned with the request's
// completions: null where that attempt is not running with that token or is another owner's
// (where POST /v1/jobs/{id}/complete would answer 409 or 404). Claimed holds the jobs the claim
// started (empty without a claim).
type CompleteManyResponse struct {
	Completed []*Job `json:"completed"`
	Claimed   []Job  `json:"claimed"`
}

// FailRequest is the body of POST /v1/jobs/{id}/fail.
type FailRequest struct {
	Token        uint64 `json:"token"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
	Permanent    bool   `json:"permanent,omitempty"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
}

// PurgeRequest is the body of POST /v1/dlq/purge. Empty fields match every dead letter.
type PurgeRequest struct {
	IDs      []int64 `json:"ids,omitempty"`
	Kind     string  `json:"kind,omitempty"`
	Resource string  `json:"resource,omitempty"`
}

// PurgeResponse answers a purge.
type PurgeResponse struct {
	Purged int `json:"purged"`
}

// ReapRequest is the body of POST /v1/jobs/reap.
type ReapRequest struct {
	Limit        int   `json:"limit,omitempty"`
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// ReapedJob is one job a reap ended.
type ReapedJob struct {
	Job    Job    `json:"job"`
	Reason string `json:"reason"`
}

// ReapResponse answers a reap.
type ReapResponse struct {
	Reaped []ReapedJob `json:"reaped"`
}

// CleanRequest is the body of POST /v1/jobs/clean.
type CleanRequest struct {
	AgeMs     int64 `json:"age_ms,omitempty"`
	Discarded bool  `json:"discarded,omitempty"`
	// DiscardedAgeMs, with Discarded, is the age of the dead letters to delete (default AgeMs).
	DiscardedAgeMs int64 `json:"discarded_age_ms,omitempty"`
	Limit          int   `json:"limit,omitempty"`
}

// CleanResponse answers a clean.
type CleanResponse struct {
	Deleted int `json:"deleted"`
}

// JobCount is one row of GET /v1/jobs/counts.
type JobCount struct {
	Kind  string         `json:"kind"`
	State store.JobState `json:"state"`
	Count int64          `json:"count"`
}

// JobCountsResponse answers GET /v1/jobs/counts.
type JobCountsResponse struct {
	Counts []JobCount `json:"counts"`
}

// Kind is the kind object (the answer of PUT /v1/kinds/{name}), and that request's body (where
// name may be left out).
type Kind struct {
	Name        string           `json:"name,omitempty"`
	Policy      store.BusyPolicy `json:"policy,omitempty"`
	MaxAttempts int              `json:"max_attempts,omitempty"`
	TimeoutMs   int64            `json:"timeout_ms"`
	CooldownMs  int64            `json:"cooldown_ms"`
	// ResourceCooldownMs: the resource's cooldown, for every kind, after a job of this kind ends
	// on it (store.Kind.ResourceCooldown).
	ResourceCooldownMs int64    `json:"resource_cooldown_ms"`
	FromStates         []string `json:"from_states,omitempty"`
	RunningState       string   `json:"running_state,omitempty"`
	SuccessState       string   `json:"success_state,omitempty"`
	FailureState       string   `json:"failure_state,omitempty"`
	// Mode is how the kind's jobs hold their resource, "exclusive" (also empty) or "shared"
	// (a submit's mode overrides it); Limits are limit names or templates such as
	// "zone/{args.zone}", filled from each job's args, of which each job takes one unit.
	Mode   string   `json:"mode,omitempty"`
	Limits []string `json:"limits,omitempty"`
	// DebounceMs, with policy replace only: each job starts no earlier than this long after its
	// submit, so that a burst of replacing submits runs once (store.Kind.Debounce).
	DebounceMs int64 `json:"debounce_ms,omitempty"`
	// Rate is the kind's rate per resource in its text form, "MAX/WINDOW" such as "3/1h"
	// (store.Rate); absent: none.
	Rate string `json:"rate,omitempty"`
}

// KindFrom converts a store kind.
func KindFrom(k *store.Kind) Kind {
	return Kind{Name: k.Name, Policy: k.Policy, MaxAttempts: k.MaxAttempts, TimeoutMs: ms(k.Timeout),
		CooldownMs: ms(k.Cooldown), FromStates: k.FromStates, RunningState: k.RunningState,
		SuccessState: k.SuccessState, FailureState: k.FailureState, ResourceCooldownMs: ms(k.ResourceCooldown),
		Mode: k.Mode, Limits: k.Limits, DebounceMs: ms(k.Debounce), Rate: rateText(k.Rate)}
}

func rateText(r *store.Rate) string {
	if r == nil {
		return ""
	}
	return r.String()
}

// StoreRate reads the kind's rate (nil if none); a bad one is an *InvalidArgumentError naming
// "rate", "rate.max" or "rate.window".
func (k *Kind) StoreRate() (*store.Rate, error) {
	if k.Rate == "" {
		return nil, nil
	}
	r, err := store.ParseRate("rate", k.Rate)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Store converts back to a store kind. The caller checks the millisecond fields' range.
func (k *Kind) Store() store.Kind {
	return store.Kind{Name: k.Name, Policy: k.Policy, MaxAttempts: k.MaxAttempts, Timeout: dur(k.TimeoutMs),
		Cooldown: dur(k.CooldownMs), FromStates: k.FromStates, RunningState: k.RunningState,
		SuccessState: k.SuccessState, FailureState: k.FailureState, ResourceCooldown: dur(k.ResourceCooldownMs),
		Mode: k.Mode, Limits: k.Limits, Debounce: dur(k.DebounceMs)}
}

// KindsRequest is the body of POST /v1/kinds: kinds created or replaced, all or none.
type KindsRequest struct {
	Kinds []Kind `json:"kinds"`
}

// KindsResponse answers GET and POST /v1/kinds.
type KindsResponse struct {
	Kinds []Kind `json:"kinds"`
}

// Resource is the resource object: the answer of GET /v1/resources/{key} and
// PUT /v1/resources/{key}/state.
type Resource struct {
	Key        string `json:"key"`
	State      string `json:"state"`
	Version    int64  `json:"version"`
	UpdatedAt  Time   `json:"updated_at,omitzero"`
	RunningJob int64  `json:"running_job"`
	Unfinished int64  `json:"unfinished"`
	// Cooldown is set while the resource is cooling down (store.Kind.ResourceCooldown).
	Cooldown *ResourceCooldown `json:"cooldown,omitempty"`
	// Holder, Rest and Line are set by GET /v1/resources/{key} when the server's store keeps
	// one line per key (line.go): who holds the resource, whether it rests, and who waits, in
	// order. Line is then present, [] if nobody waits; absent from other servers' answers.
	Holder *Holder `json:"holder,omitempty"`
	// Holders are every holder of a resource held through holds (shared holders, leases on
	// several keys), in token order; Holder is then the latest, with no lease ID.
	Holders []Holder `json:"holders,omitempty"`
	// Tree is the prefix of the tree the key is a key of; absent if none.
	Tree string `json:"tree,omitempty"`
	// Related are, for a key of a tree, the live holders of its ancestors and descendants, in
	// token order, each with the Key it holds.
	Related []Holder      `json:"related,omitempty"`
	Rest    *ResourceRest `json:"rest,omitempty"`
	Line    []Ticket      `json:"line,omitzero"`
	// Rates are the rates reached on the resource (its kinds', its rated prefix's): the grants
	// they count wait until next.
	Rates []RateWait `json:"rates,omitempty"`
}

// RateWait is a rate reached on a resource (store.RateWait): a kind's (Kind), a limit's (Limit)
// or the rate of the key prefix the resource is under (Prefix).
type RateWait struct {
	Kind   string `json:"kind,omitempty"`
	Limit  string `json:"limit,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Rate   string `json:"rate"`
	Next   Time   `json:"next"`
}

// ResourceCooldown is a resource's cooldown: the answer of POST
// /v1/resources/{key}/clear-cooldown (what was cleared) and a field of the resource object.
type ResourceCooldown struct {
	Resource    string `json:"resource"`
	Until       Time   `json:"until"`
	RemainingMs int64  `json:"remaining_ms"`
	Job         int64  `json:"job"` // the job whose end started it
}

// ResourceCooldownFrom converts a store cooldown; nil stays nil.
func ResourceCooldownFrom(c *store.ResourceCooldown) *ResourceCooldown {
	if c == nil {
		return nil
	}
	return &ResourceCooldown{Resource: c.Resource, Until: T(c.Until), RemainingMs: c.Left.Milliseconds(), Job: c.Job}
}

// Store converts back to a store cooldown; nil stays nil.
func (c *ResourceCooldown) Store() *store.ResourceCooldown {
	if c == nil {
		return nil
	}
	return &store.ResourceCooldown{Resource: c.Resource, Until: c.Until.Time, Left: dur(c.RemainingMs), Job: c.Job}
}

// ClearCooldownRequest is the body of POST /v1/resources/{key}/clear-cooldown. Actor counts
// only on a server without auth; with auth the token's name is recorded.
type ClearCooldownRequest struct {
	Reason string `json:"reason"`
	Actor  string `json:"actor,omitempty"`
}

// ResourceFrom converts a store resource.
func ResourceFrom(r *store.Resource) Resource {
	return Resource{Key: r.Key, State: r.State, Version: r.Version, UpdatedAt: T(r.UpdatedAt),
		RunningJob: r.RunningJob, Unfinished: r.Unfinished, Cooldown: ResourceCooldownFrom(r.Cooldown)}
}

// Store converts back to a store resource.
func (r *Resource) Store() *store.Resource {
	return &store.Resource{Key: r.Key, State: r.State, Version: r.Version, UpdatedAt: r.UpdatedAt.Time,
		RunningJob: r.RunningJob, Unfinished: r.Unfinished, Cooldown: r.Cooldown.Store()}
}

// ResourcesResponse answers GET /v1/resources; NextAfter (the last key) is set when the page is
// full.
type ResourcesResponse struct {
	Resources []Resource `json:"resources"`
	NextAfter string     `json:"next_after,omitempty"`
}

// SetResourceStateRequest is the body of PUT /v1/resources/{key}/state.
type SetResourceStateRequest struct {
	State     string `json:"state"`
	IfVersion *int64 `json:"if_version,omitempty"`
}
