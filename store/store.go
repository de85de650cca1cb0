// Package store is the seam between Baton's lock API and the databases that hold leases.
//
// # Glossary
//
// One word per idea, in this package, in package baton and in every backend:
//
//   - key: the name of a lock. resource: what a job (and a fence) names; jobs on one resource
//     run one at a time. Both follow the rules of ValidateKey.
//   - lease: one acquisition of a key (its ID), until released, expired or force-released. A
//     running job's attempt holds a lease on the job's row.
//   - holder: who holds a lease, a name the caller chooses (a worker, a job); two acquisitions
//     with the same holder share the lease. owner: the authenticated principal a lease or an
//     attempt belongs to, set by a server with authentication; empty otherwise.
//   - token: the fencing token of a grant or an attempt, greater than every token before it for
//     the key or resource. fence: a resource's greatest token seen, refusing smaller ones
//     (Fencer, package fence).
//   - rest: the time a key stays unavailable although no lease holds it, for one of two
//     reasons: cooldown, after a clean release (AcquireParams.Cooldown), and lock-delay, after
//     an expiry or a force-release (AcquireParams.LockDelay). Refused as *RestingError
//     (ErrResting) with its Reason; ended early by ClearRest; at most MaxRest. The job queue's
//     cooldowns (Kind.Cooldown, Kind.ResourceCooldown) are a resource's waits after a job,
//     which delay or skip later jobs rather than refuse an acquire; MaxRest bounds them too.
//   - job: work of one Kind on one resource, queued behind the resource's earlier jobs. attempt:
//     one run of a job, with its own lease and token. head: a resource's oldest unfinished job,
//     the only one that can be claimed. kind: a job kind's stored definition (policy,
//     attempts, timeout, cooldowns, state guard).
//   - Many: a Go call that does many of one thing in one round trip (JobStore.SubmitMany,
//     ManyRenewer.RenewMany, ManyCompleter.CompleteMany), bounded by MaxSubmitMany and
//     MaxRenewMany. batch: the HTTP API's and the CLI's word for the same, kept in the URLs
//     (POST /v1/jobs/batch, /v1/locks/renew-batch) and in the wire types, handlers and client
//     code named after them; and, in a group commit (internal/combine, SQLite's renewals), the
//     single calls it runs together.
//   - Page: one answer of a list. A list takes After (the last key or ID of the previous page)
//     and Limit and returns a slice here; package baton returns an XxxPage of the items and
//     Next, the After of the following page, set when the page is full.
//
// A Store offers a handful of atomic primitives. Each is one atomic step in the backend (a SQL
// statement or transaction, a Redis Lua script, an etcd Txn), so that every backend can implement it
// without exposing SQL or transactions here. Keepalive, waiting, holder-side safety and option
// handling live above the seam, in package baton.
//
// Time: every expiry decision is made with the store's clock. Durations returned by a store
// (RetryAfter, Remaining, TTLLeft) are measured on that clock, so callers never compare clocks.
//
// A backend builds on the helpers here rather than writing its own: Closed (its closed flag and
// the ErrClosed checks), NoAudit (the Events of a store without an audit log), the Validate
// methods of the params, and storetest to prove itself.
package store

import (
	"context"
	"encoding/json"
	"time"
)

// Store is implemented by every backend and checked by the conformance suite in storetest.
//
// Errors: methods return *InvalidArgumentError for bad input (before writing anything),
// *LockHeldError and *RestingError from Acquire, ErrNotHeld from Renew and Release, ErrNotFound
// from Get and ForceRelease, and ErrClosed after Close. Anything else is a transient store error.
//
// Optional capabilities, declared in optional.go and found by type assertion (callers fall back
// without them): JobStore (the job queue, jobs.go), Parallelism (how many calls it serves at
// once), ManyRenewer (many renewals in one round trip), Fencer (fences for outside resources),
// ManyCompleter and CompleteClaimer (many completions, and the next claim, in one round trip),
// KindStatsStore (per-kind alert figures), TxSubmitter (a submit inside the caller's transaction).
// Errors may say when to retry: RetryAfterHinter (how long to wait) and RetryableError (whether
// waiting helps), found with errors.As.
type Store interface {
	// Acquire grants the key to p.LeaseID if the key is free, or renews the caller's existing
	// lease if p.Holder already holds the key (then the existing lease ID and token are kept).
	// The fencing token is assigned in the same atomic step that grants the key.
	Acquire(ctx context.Context, p *AcquireParams) (*Lease, error)

	// Renew extends the lease named by (Key, LeaseID) by p.TTL from now on the store's clock.
	// It returns ErrNotHeld if that lease has ended or expired.
	Renew(ctx context.Context, p *RenewParams) (*Lease, error)

	// Release ends the lease named by (Key, LeaseID). Releasing a lease that this ID already
	// released returns AlreadyReleased=true and no error; any other miss is ErrNotHeld.
	Release(ctx context.Context, p *ReleaseParams) (*ReleaseResult, error)

	// Get returns the live lease on key, or ErrNotFound.
	Get(ctx context.Context, key string) (*Lease, error)

	// List returns live leases in key order, after p.After, at most p.Limit of them.
	List(ctx context.Context, p *ListParams) ([]*Lease, error)

	// ForceRelease ends whatever live lease holds the key, whoever holds it, and returns it.
	// The key then stays unavailable for that lease's lock-delay. ErrNotFound if none is live.
	ForceRelease(ctx context.Context, p *ForceReleaseParams) (*Lease, error)

	// ClearRest ends the cooldown or lock-delay of a key that no live lease holds, so that the
	// next Acquire is granted at once, and returns what was left of it. It returns ErrNotFound
	// if the key is not resting (it is free, or held: ForceRelease that lease first, which
	// starts its lock-delay). A store with an audit log records it as EventClearRest with
	// p.Actor and p.Reason, in the same atomic step.
	ClearRest(ctx context.Context, p *ClearRestParams) (*Rest, error)

	// Events lists the audit log: every grant, release, expiry takeover and force-release, in
	// the order of their IDs (increasing, or decreasing with NewestFirst), recorded in the same
	// atomic step as the change itself.
	Events(ctx context.Context, p *EventsParams) ([]*Event, error)

	// Subscribe registers interest in key becoming free. The returned channel receives (without
	// blocking the store, coalesced) when a lease on key is released or force-released. Wake-ups
	// are hints: the subscriber must retry Acquire, and must still poll as a fallback, because a
	// lease that simply expires sends nothing. cancel must be called to unsubscribe.
	Subscribe(key string) (wake <-chan struct{}, cancel func())

	// Capabilities describes what this backend can promise.
	Capabilities() Capabilities

	// Close releases the store's resources and stops its goroutines. Leases stay in the database.
	Close() error
}

// Capabilities states a backend's guarantees; the conformance suite reads it to mark cases not
// applicable instead of passing them.
type Capabilities struct {
	// FencingTokens is true when tokens strictly increase per key across every kind of handover
	// and restarts of the store.
	FencingTokens bool
	// PushWakeup is true when Subscribe delivers wake-ups across processes, not only in-process.
	PushWakeup bool
	// Audit is true when the store records the audit log (Events).
	Audit bool
	// Owners is true when the store keeps each lease's owner and enforces it (AcquireParams.Owner,
	// RenewParams.Owner, ReleaseParams.Owner; for a JobStore, the attempt's owner too). Every
	// database backend does; the HTTP client does not take an owner from its caller: its server
	// sets it from the caller's token.
	Owners bool
	// OneResource is true when a key is one resource for leases and jobs alike: a live lease and
	// a running job attempt on the same key exclude each other, whichever path took the key, and
	// tokens per key strictly increase across both (SQLite and PostgreSQL, whose leases and jobs
	// share one database).
	OneResource bool
	// Line is true when a key's waiting lock requests and its jobs wait in one FIFO line
	// (LineWaiter; served by a server over such a store): a free key goes to the front of its
	// line, and nobody overtakes it.
	Line bool
	// Limits is true when the store grants shared holds, leases on several keys and units of
	// limits (Limiter, holds.go); a store without it refuses them with *UnsupportedError.
	Limits bool
}

// Lease is a lease as the store sees it. Times are on the store's clock.
type Lease struct {
	Key    string
	ID     string
	Holder string
	// Owner is the principal the lease belongs to (see AcquireParams.Owner); empty if none.
	Owner      string
	Token      uint64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	// TTLLeft is ExpiresAt minus the store's now at the moment of the operation: a duration the
	// caller may use without comparing clocks.
	TTLLeft  time.Duration
	Metadata json.RawMessage
	// TookOver is set on a grant that took the key over from a lease that had expired without
	// being released (a crashed or stalled holder).
	TookOver bool
	// Waited is how long the store waited for the key, within this Acquire call, before the
	// attempt that granted it began, measured on the store side's monotonic clock (floored).
	// It is zero for a store that makes one attempt per call; a store that waits itself (the
	// HTTP client, whose server long-polls) sets it so that the holder can bound the grant time
	// from below: start_of_call + Waited*(1-drift), not the start of the call alone.
	Waited time.Duration
	// Shared, Resources and Limits are what the lease holds beyond its key (AcquireParams).
	Shared    bool
	Resources []string
	Limits    []string
	// Slots numbers the unit the lease holds of each of Limits: a limit of capacity N has the
	// slots 0..N-1, and a grant takes the lowest one free. A later holder of the same slot has a
	// greater token, so a resource that fences each slot as a key (fence.LimitSlotKey) refuses a
	// late call from a holder that lost its unit: never more than N callers at once, fenced.
	Slots map[string]int
}

// AcquireParams are the inputs of Store.Acquire.
type AcquireParams struct {
	Key     string
	LeaseID string // chosen by the caller, unique per acquisition
	Holder  string
	// Owner is the authenticated principal that takes the lease: a server with authentication
	// sets it to the caller's token name; library callers leave it empty. A lease belongs to its
	// owner: the idempotent re-acquire applies only to a lease of the same Holder and the same
	// Owner (a live lease of the same holder and another owner refuses the key with
	// *LockHeldError, unchanged), and Renew and Release name the owner too.
	Owner string
	TTL   time.Duration
	// Metadata is a JSON object (or empty) stored with the lease.
	Metadata json.RawMessage
	// Cooldown keeps the key unavailable for this long after this lease is cleanly released.
	Cooldown time.Duration
	// LockDelay keeps the key unavailable for this long after this lease expires or is
	// force-released, so that a stalled former holder's in-flight writes can drain.
	LockDelay time.Duration
	// Wait says the caller will wait for the key if refused. A store whose wake-up costs
	// something on every release (PostgreSQL's NOTIFY serialises commits) records the waiter in
	// the same atomic step as the refusal, and pushes on release only to keys with waiters. A
	// store with a line (LineWaiter) also keeps the caller's ticket: the refusal enqueues it (or
	// keeps it alive), and the grant ends it.
	Wait bool
	// First puts the caller's ticket before every other waiting ticket and job of the key
	// (break-glass), on a store with a line; it still waits for the current holder. FirstReason
	// says why and is required with First (ignored without it); both are recorded with the
	// ticket. A server lets only admins set First.
	First       bool
	FirstReason string
	// Shared holds the keys in shared mode: with other shared holders, never with an exclusive
	// one (holds.go). Exclusive, the default, holds them alone.
	Shared bool
	// Resources are keys held together with Key, all or nothing (at most MaxResources).
	Resources []string
	// Limits are the names of limits of which the grant takes one unit each (at most MaxLimits).
	Limits []string
}

// RenewParams are the inputs of Store.Renew.
type RenewParams struct {
	Key     string
	LeaseID string
	// Owner must be the lease's owner (AcquireParams.Owner): a live lease of another owner is
	// not renewed (ErrNotHeld, nothing changed).
	Owner string
	TTL   time.Duration
	// Holds says the lease was granted beyond one exclusive key (Lease.Shared, Resources or
	// Limits), a hint that lets a store with holds go there first; without it the store finds
	// such a lease anyway.
	Holds bool
}

// ReleaseParams are the inputs of Store.Release.
type ReleaseParams struct {
	Key     string
	LeaseID string
	// Owner must be the lease's owner (AcquireParams.Owner): a live lease of another owner is
	// not released (ErrNotHeld, nothing changed).
	Owner string
	// Holds: see RenewParams.Holds.
	Holds bool
}

// ReleaseResult reports what Release did.
type ReleaseResult struct {
	// AlreadyReleased is true when this lease had been released before; nothing changed.
	AlreadyReleased bool
	// Held is how long the released lease was held, on the store's clock (zero if
	// AlreadyReleased).
	Held time.Duration
}

// ListParams are the inputs of Store.List.
type ListParams struct {
	Prefix string // only keys with this prefix
	Holder string // only leases held by this holder, if set
	After  string // only keys greater than this one (the cursor of the previous page)
	Limit  int    // at most this many; 1..MaxListLimit
}

// ForceReleaseParams are the inputs of Store.ForceRelease.
type ForceReleaseParams struct {
	Key    string
	Reason string
	Actor  string // who forced it, for the audit log; "unknown" if empty
	// Principal is the authenticated principal that forced it (a server with authentication
	// sets it to the admin's token name), recorded as the event's Principal; empty without
	// authentication, when Actor is only the caller's word.
	Principal string
}

// ClearRestParams are the inputs of Store.ClearRest.
type ClearRestParams struct {
	Key    string
	Reason string
	Actor  string // who cleared it, for the audit log; "unknown" if empty
	// Principal is the authenticated admin, recorded as the event's Principal (see
	// ForceReleaseParams.Principal).
	Principal string
}

// Rest is a cooldown or lock-delay that ClearRest ended.
type Rest struct {
	Key string
	// Reason is ReasonCooldown (after a clean release) or ReasonLockDelay (after an expiry or
	// a force-release).
	Reason string
	// Remaining is what was left of it, on the store's clock.
	Remaining time.Duration
}

// Event kinds.
const (
	EventAcquire        = "acquire"
	EventRelease        = "release"
	EventExpiryTakeover = "expiry_takeover" // a grant that took over an expired, unreleased lease
	EventForceRelease   = "force_release"
	// Job events: a worker claimed an attempt, renewed its lease for the first time (later
	// heartbeats of the attempt are not recorded), and the attempt ended (Outcome: the state it
	// ended in). Key is the job's resource; Holder and Actor the worker; Token the attempt's.
	EventJobClaim    = "job_claim"
	EventJobRenew    = "job_renew"
	EventJobComplete = "job_complete"
	EventClearRest   = "clear_rest" // an admin ended a key's cooldown or lock-delay early
	// EventResourceCooldownCleared: an admin ended a job resource's cooldown early; Key is the
	// resource, Token the job whose end had started the cooldown.
	EventResourceCooldownCleared = "resource_cooldown_cleared"
	// Ticket events (a store with a line): a waiting lock request joined the key's line, or
	// rejoined it after its ticket expired (EventTicketEnqueue), or a break-glass request was put
	// at its front (EventTicketFirst; Actor its holder, Reason its reason). Token is 0; the
	// ticket's grant is the lease's EventAcquire. An expired ticket is skipped, not recorded.
	EventTicketEnqueue = "ticket_enqueue"
	EventTicketFirst   = "ticket_first"
	// EventFenceReset: an admin deleted a resource's fence (Fencer.ResetFence); Key is the
	// resource, Token the fence's token before the reset.
	EventFenceReset = "fence_reset"
)

// Event is one entry of the audit log.
type Event struct {
	ID      uint64
	At      time.Time // store clock
	Kind    string
	Key     string
	LeaseID string
	Holder  string
	Token   uint64
	Actor   string // the holder, or the admin who forced a release
	// Principal is the authenticated principal that made the change, apart from the holder
	// string that anyone may choose: the owner of the lease or job attempt (Lease.Owner,
	// Job.Owner) for a grant, release, takeover or an attempt's claim, renewal and end; the
	// admin (ForceReleaseParams.Principal, ...) for an admin's change. Empty without
	// authentication and for the store's own changes (a reaped attempt).
	Principal string
	Reason    string // of a force-release; of a failed job attempt, its error code
	// Job events only (zero for lease events).
	JobID   int64
	JobKind string
	Attempt int
	Outcome string // of job_complete: succeeded, retryable, discarded or cancelled
	// Limit names the limit of a unit's grant, release or ticket (Key is then the lease's
	// first key); empty for every other event.
	Limit string
}

// EventsParams filter Store.Events.
type EventsParams struct {
	Key string // only this key, if set
	// After is the cursor of the previous page: only events after it in the listing's order,
	// that is with a greater ID, or with NewestFirst a smaller one. 0: from the start.
	After uint64
	Limit int // 1..MaxListLimit; DefaultListSize if zero
	// NewestFirst lists by decreasing ID (the most recent event first) instead of increasing.
	NewestFirst bool
}
