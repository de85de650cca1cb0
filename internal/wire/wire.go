// Package wire holds the JSON shapes of the HTTP API (docs/http-api.md), shared by the server,
// the Go client and the CLI's -o json output, so the three cannot drift apart.
package wire

import (
	"encoding/json"
	"time"

	"github.com/batonhq/baton/store"
)

// Lease is the lease object. Its times, like every time of the API, are RFC 3339 in UTC with
// milliseconds (Time).
type Lease struct {
	Key string `json:"key"`
	// LeaseID is shown only to an admin and to the lease's owner: with it, one can renew and
	// release the lease.
	LeaseID string `json:"lease_id,omitempty"`
	Holder  string `json:"holder"`
	// Owner is the principal the lease belongs to (the token name that took it), if any.
	Owner      string          `json:"owner,omitempty"`
	Token      uint64          `json:"token"`
	AcquiredAt Time            `json:"acquired_at"`
	ExpiresAt  Time            `json:"expires_at"`
	TTLLeftMs  int64           `json:"ttl_left_ms"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	TookOver   bool            `json:"took_over,omitempty"`
	// WaitedMs (acquire only) is how long the server waited for the key, from receiving the
	// request to the start of the attempt that granted it, in whole milliseconds rounded down.
	WaitedMs int64 `json:"waited_ms,omitempty"`
	// Shared, Resources and Limits are what the lease holds beyond Key: its keys in shared mode,
	// the other keys it holds, and the limits of which it holds one unit each.
	Shared    bool     `json:"shared,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Limits    []string `json:"limits,omitempty"`
	// Slots numbers the unit held of each of Limits (0..N-1 for a limit of capacity N).
	Slots map[string]int `json:"slots,omitempty"`
}

// LeaseFrom converts a store lease.
func LeaseFrom(l *store.Lease) Lease {
	return Lease{Key: l.Key, LeaseID: l.ID, Holder: l.Holder, Owner: l.Owner, Token: l.Token,
		AcquiredAt: T(l.AcquiredAt), ExpiresAt: T(l.ExpiresAt), TTLLeftMs: l.TTLLeft.Milliseconds(),
		Metadata: l.Metadata, TookOver: l.TookOver, WaitedMs: l.Waited.Milliseconds(),
		Shared: l.Shared, Resources: l.Resources, Limits: l.Limits, Slots: l.Slots}
}

// Store converts back to a store lease.
func (l *Lease) Store() *store.Lease {
	md := l.Metadata
	if len(md) == 0 || string(md) == "null" {
		md = nil
	}
	return &store.Lease{Key: l.Key, ID: l.LeaseID, Holder: l.Holder, Owner: l.Owner, Token: l.Token,
		AcquiredAt: l.AcquiredAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
		TTLLeft: time.Duration(l.TTLLeftMs) * time.Millisecond, Metadata: md, TookOver: l.TookOver,
		Waited: time.Duration(max(l.WaitedMs, 0)) * time.Millisecond,
		Shared: l.Shared, Resources: l.Resources, Limits: l.Limits, Slots: l.Slots}
}

// LeaseResponse answers acquire, renew, get and force-release.
type LeaseResponse struct {
	Lease Lease `json:"lease"`
}

// ListResponse answers GET /v1/locks.
type ListResponse struct {
	Leases     []Lease `json:"leases"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// AcquireRequest is the body of POST /v1/locks/acquire. A nil TTLMs means the default.
type AcquireRequest struct {
	Key         string          `json:"key"`
	LeaseID     string          `json:"lease_id,omitempty"`
	Holder      string          `json:"holder,omitempty"`
	TTLMs       *int64          `json:"ttl_ms,omitempty"`
	WaitMs      int64           `json:"wait_ms,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	CooldownMs  int64           `json:"cooldown_ms,omitempty"`
	LockDelayMs int64           `json:"lock_delay_ms,omitempty"`
	// First puts the request before every other in the key's line (break-glass, admin only);
	// FirstReason, required with it, is recorded.
	First       bool   `json:"first,omitempty"`
	FirstReason string `json:"first_reason,omitempty"`
	// Shared holds the key (and Resources) in shared mode; Resources are more keys held with Key,
	// all or nothing; Limits are limits of which the grant takes one unit each.
	Shared    bool     `json:"shared,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Limits    []string `json:"limits,omitempty"`
}

// RenewRequest is the body of POST /v1/locks/renew. A nil TTLMs means the default.
type RenewRequest struct {
	Key     string `json:"key"`
	LeaseID string `json:"lease_id"`
	TTLMs   *int64 `json:"ttl_ms,omitempty"`
}

// RenewBatchRequest is the body of POST /v1/locks/renew-batch: up to store.MaxRenewMany
// renewals, renewed in one store call.
type RenewBatchRequest struct {
	Leases []RenewRequest `json:"leases"`
}

// RenewBatchResponse answers POST /v1/locks/renew-batch: one result per renewal, in order.
type RenewBatchResponse struct {
	Results []RenewBatchResult `json:"results"`
}

// RenewBatchResult is the renewed lease, or the problem that single renewal would have got
// (not_held, …).
type RenewBatchResult struct {
	Lease *Lease   `json:"lease,omitempty"`
	Error *Problem `json:"error,omitempty"`
}

// ReleaseRequest is the body of POST /v1/locks/release.
type ReleaseRequest struct {
	Key     string `json:"key"`
	LeaseID string `json:"lease_id"`
}

// LeaveRequest is the body of POST /v1/locks/leave: the caller gives up its waiting acquire of
// Key under LeaseID.
type LeaveRequest struct {
	Key     string `json:"key"`
	LeaseID string `json:"lease_id"`
}

// LeaveResponse answers POST /v1/locks/leave. Stopped is true when a request of that acquire was
// waiting on this server and has ended.
type LeaveResponse struct {
	Stopped bool `json:"stopped"`
}

// ReleaseResponse answers POST /v1/locks/release.
type ReleaseResponse struct {
	Released        bool  `json:"released"`
	AlreadyReleased bool  `json:"already_released"`
	HeldMs          int64 `json:"held_ms"`
}

// ForceReleaseRequest is the body of POST /v1/locks/force-release. Actor counts only on a
// server without auth; with auth the token's name is recorded.
type ForceReleaseRequest struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
	Actor  string `json:"actor,omitempty"`
}

// Rest is a cooldown or lock-delay that POST /v1/locks/clear-rest ended.
type Rest struct {
	Key         string `json:"key"`
	Reason      string `json:"reason"`       // cooldown or lock-delay
	RemainingMs int64  `json:"remaining_ms"` // what was left of it
}

// RestResponse answers POST /v1/locks/clear-rest.
type RestResponse struct {
	Rest Rest `json:"rest"`
}

// Event is one audit log entry.
type Event struct {
	ID      uint64 `json:"id"`
	At      Time   `json:"at"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	LeaseID string `json:"lease_id"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	Actor   string `json:"actor"`
	// Principal is the authenticated principal that made the change (store.Event.Principal).
	Principal string `json:"principal,omitempty"`
	Reason    string `json:"reason,omitempty"`
	JobID     int64  `json:"job_id,omitempty"`
	JobKind   string `json:"job_kind,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	// Limit names the limit of a unit's grant, release or ticket (store.Event.Limit).
	Limit string `json:"limit,omitempty"`
}

// EventFrom converts a store event.
func EventFrom(e *store.Event) Event {
	return Event{ID: e.ID, At: T(e.At), Kind: e.Kind, Key: e.Key, LeaseID: e.LeaseID, Holder: e.Holder,
		Token: e.Token, Actor: e.Actor, Principal: e.Principal, Reason: e.Reason, JobID: e.JobID, JobKind: e.JobKind, Attempt: e.Attempt,
		Outcome: e.Outcome, Limit: e.Limit}
}

// Store converts back to a store event.
func (e *Event) Store() *store.Event {
	return &store.Event{ID: e.ID, At: e.At.UTC(), Kind: e.Kind, Key: e.Key, LeaseID: e.LeaseID, Holder: e.Holder,
		Token: e.Token, Actor: e.Actor, Reason: e.Reason, JobID: e.JobID, JobKind: e.JobKind, Attempt: e.Attempt,
		Outcome: e.Outcome, Limit: e.Limit}
}

// EventsResponse answers GET /v1/events.
type EventsResponse struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// Ms returns a pointer to d in milliseconds, for the optional duration fields.
func Ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}

// Problem is an RFC 9457 problem document with Baton's stable code and extension members.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`

	Field        string `json:"field,omitempty"`
	Rule         string `json:"rule,omitempty"`
	RequiredRole string `json:"required_role,omitempty"`
	Key          string `json:"key,omitempty"`
	Holder       string `json:"holder,omitempty"`
	Token        uint64 `json:"token,omitempty"`
	ExpiresAt    *Time  `json:"expires_at,omitempty"`
	RetryAfterMs *int64 `json:"retry_after_ms,omitempty"`
	Reason       string `json:"reason,omitempty"`
	RemainingMs  *int64 `json:"remaining_ms,omitempty"`
	// Ahead is, in a lock_held refusal, how many wait before the caller in the key's line.
	Ahead int `json:"ahead,omitempty"`

	// Job queue members: resource_busy names the resource and its head job (and the head's
	// state); job_state the job, the operation and the state that forbade it;
	// version_mismatch the resource, the version asked for and the current one.
	Resource       string `json:"resource,omitempty"`
	HeadJob        int64  `json:"head_job,omitempty"`
	JobID          int64  `json:"job_id,omitempty"`
	Op             string `json:"op,omitempty"`
	State          string `json:"state,omitempty"`
	IfVersion      *int64 `json:"if_version,omitempty"`
	CurrentVersion *int64 `json:"current_version,omitempty"`
	// Index is the position (from 0) of the job that failed a batch submit.
	Index *int `json:"index,omitempty"`
	// CurrentToken is the greater token that made a stale_token refusal (with Resource and
	// Token, the one presented).
	CurrentToken uint64 `json:"current_token,omitempty"`

	// A lock_held refusal of a request beyond one key: Resource is the key of its resources that
	// refused it (with Shared when held shared); Limit a full limit, with InUse units of
	// Capacity held. limit_in_use: Limit and InUse. not_implemented: Store and Feature name the
	// store and what it lacks.
	Shared   bool   `json:"shared,omitempty"`
	Limit    string `json:"limit,omitempty"`
	InUse    *int   `json:"in_use,omitempty"`
	Capacity *int   `json:"capacity,omitempty"`
	Store    string `json:"store,omitempty"`
	Feature  string `json:"feature,omitempty"`

	// Trees. A lock_held refusal by a key related to the requested one in its tree (an ancestor
	// or a descendant): Related is that key, and Holder, Token and ExpiresAt are its holder's.
	// tree_in_use: Prefix is the tree, Key one of its live keys, and What what lives there
	// (lease, ticket or job).
	Related string `json:"related,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	What    string `json:"what,omitempty"`

	// Rates. A cooldown refusal of reason "rate": Rate is the rate reached ("20/1m"), of the
	// limit Limit or of the key prefix Prefix; RemainingMs until its window frees.
	Rate string `json:"rate,omitempty"`
}
