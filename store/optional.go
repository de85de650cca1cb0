package store

import (
	"context"
	"time"
)

// The optional capabilities of a store: interfaces a backend implements when it can do more than
// the Store (or JobStore) contract asks. Callers find them with a type assertion and fall back
// when a store lacks one, so that every backend is usable without them.

// Parallelism is implemented by stores that serve only so many calls at once (the connections
// of their pool: one for SQLite). A server then admits about that many store calls at a time,
// so that its own queue, which serves renewals and releases first, orders the rest, instead of
// the pool's, which does not know a renewal from a listing.
type Parallelism interface {
	Parallelism() int
}

// ManyRenewer is a Store that renews many leases in one round trip and one commit (the SQL
// stores). Each renewal keeps its own answer: one not held does not fail the others. An error
// of the whole call (the store did not answer) is returned as such, and then no result is
// known. RenewMany (renew_many.go) uses it, or renews one lease at a time without it.
type ManyRenewer interface {
	RenewMany(ctx context.Context, ps []*RenewParams) ([]RenewResult, error)
}

// Fencer is a store that keeps fences for resources outside it: per resource, the greatest
// fencing token a holder has presented (`baton fence check`, POST /v1/fences/check). It lets a
// script check its token against the same server that granted it, when the resource itself
// cannot (see package fence for checks inside the resource's own database).
type Fencer interface {
	// CheckFence raises resource's fence to token unless a greater token is stored, atomically,
	// and returns the token stored afterwards: token if the check passed (equal tokens pass),
	// a greater one if token is stale. An empty or over-long resource (MaxKeyLen), or a token of
	// 0 or above 2^63-1, is an *InvalidArgumentError naming the field.
	//
	// A token greater than every token the store has drawn so far for a lease or a job attempt
	// is refused with an *InvalidArgumentError naming "token" (UnissuedToken), and the fence
	// is left as it was: such a token belongs to no holder, and once stored it would refuse
	// every real holder. The comparison is with what has been drawn, committed or not, in the
	// same atomic step as the raise, so a holder that presents its token at once after the
	// grant is never refused.
	CheckFence(ctx context.Context, resource string, token uint64) (stored uint64, err error)

	// ResetFence deletes resource's fence and returns the token it held, so that the next
	// CheckFence accepts any token the store has issued: the way out for a fence raised by a
	// token that no holder should have had. ErrNotFound if the resource has no fence. A store
	// with an audit log records it as EventFenceReset (key: the resource, token: the fence's
	// token before the reset) with p.Actor and p.Reason, in the same atomic step.
	ResetFence(ctx context.Context, p *ResetFenceParams) (token uint64, err error)
}

// ManyCompleter is implemented by job stores that can complete many attempts in one round
// trip. The result is aligned with ps: nil where CompleteJob would have returned ErrNotHeld.
type ManyCompleter interface {
	CompleteMany(ctx context.Context, ps []*CompleteParams) ([]*Job, error)
}

// CompleteClaimer is implemented by job stores that can complete many attempts and claim jobs in
// one round trip. The claim runs after the completions and the promotion of their successors, so
// it may start the next job of a resource whose job just completed: a worker hands one
// resource's consecutive jobs on without a wake-up or a round trip of its own. completed is as
// CompleteMany's result; claimed as ClaimJobs's, except that a claim finding fewer jobs than
// claim.Limit does not mark the kinds as awaited (the worker's own claim loop does). Either both
// happen or, on error, neither.
type CompleteClaimer interface {
	ManyCompleter
	CompleteManyAndClaim(ctx context.Context, ps []*CompleteParams, claim *ClaimParams) (completed, claimed []*Job, err error)
}

// KindStatsStore is implemented by job stores that report KindStats (SQLite, PostgreSQL). Its
// cost grows with the running jobs and the dead letters, through indexes on those states.
type KindStatsStore interface {
	// KindStats returns a row for each kind with a running job or a dead letter.
	KindStats(ctx context.Context) ([]*KindStats, error)
}

// TxSubmitter is implemented by job stores that enqueue a job inside the caller's own database
// transaction, so that the job exists if and only if that transaction commits
// (baton.Queue.SubmitTx). tx is of the backend's driver, which this package cannot name:
//
//   - sqlite: a *sql.Tx on the store's database file (see sqlite.Store.SubmitJobTx)
//   - postgres: a pgx.Tx, or a *sql.Tx opened with pgx's stdlib driver, on the store's database
//     (see postgres.Store.SubmitJobTx and SubmitJobSQLTx)
//
// A tx of another type is an *InvalidArgumentError on field "tx"; otherwise the rules and errors
// are SubmitJob's. Workers are woken when the job becomes claimable, at the latest by their poll.
type TxSubmitter interface {
	SubmitJobTxAny(ctx context.Context, tx any, p *SubmitParams) (*SubmitResult, error)
}

// The optional capabilities of a store's errors, for the errors the Store contract does not name
// (a transient failure, an HTTP server's refusal). The store's callers (package baton's waits,
// keepalive and workers) find them with errors.As.

// RetryAfterHinter is an error that says how long to wait before trying again (the HTTP client's
// *client.ProblemError for a 503 or 429 with Retry-After). A waiting Acquire and a worker's claim
// loop wait at least that long, and a release is sent again after it while the lease's local
// deadline allows; keepalive does not wait: it retries quickly until that deadline, since losing
// a held lease is worse than adding load.
type RetryAfterHinter interface {
	error
	RetryAfterHint() time.Duration
}

// RetryableError is an error that says whether it may go away by itself. Without it, an error
// the Store contract does not name is taken for a transient one; with Retryable false (the HTTP
// client's unauthorized or forbidden answers), waits and retries give up on it at once.
type RetryableError interface {
	error
	Retryable() bool
}
