package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LineWaiter is implemented by stores whose keys have one FIFO line (SQLite, PostgreSQL): a
// waiting lock request is a ticket in the same line as the key's unfinished jobs, ordered by
// arrival, and a free key is granted only to the front of its line.
//
//   - An Acquire with Wait that is refused enqueues a ticket named by its LeaseID, or keeps it
//     alive: it expires TTL after the latest refused attempt, and an expired ticket is skipped
//     (its waiter's next refusal puts it at the back). The grant ends the ticket.
//   - An Acquire is refused (*LockHeldError with Ahead) while a live ticket or a ready job that
//     arrived before it waits, even if the key is free: nobody overtakes the line, TryAcquire
//     included. A job's arrival is its submit; a head job that is not ready (scheduled for later,
//     or backing off) lets tickets behind it go first.
//   - A claim skips a head job while a live ticket that arrived before the job waits.
//   - A break-glass ticket (AcquireParams.First) is before every other ticket and job.
//
// When a key frees, the store wakes the front of its line: the subscriber named by the front
// ticket's lease ID (SubscribeAs), or the workers of the front job's kind.
type LineWaiter interface {
	// SubscribeAs is Store.Subscribe for the waiter whose ticket is leaseID.
	SubscribeAs(key, leaseID string) (wake <-chan struct{}, cancel func())
	// LeaveLine removes the ticket of (key, leaseID, owner), if any, and wakes the next in line:
	// for a waiter that gives up, so that it does not hold the line until its ticket expires.
	LeaveLine(ctx context.Context, key, leaseID, owner string) error
}

// Ticket is a waiting request in a key's line.
type Ticket struct {
	// Position is 1 for the front of the line.
	Position int
	// Job is the waiting job's ID; zero for a lock ticket.
	Job     int64
	JobKind string
	// LeaseID, Holder and Owner are a lock ticket's; Holder is JobHolder(Job) for a job.
	LeaseID string
	Holder  string
	Owner   string
	// Since is its arrival: a lock ticket's first refusal, a job's submit.
	Since time.Time
	// ExpiresAt is when a lock ticket expires unless its waiter keeps it alive; for a job, zero.
	ExpiresAt time.Time
	// NotBefore is when a job that is not ready (scheduled, or backing off) becomes ready;
	// zero if it is ready. Until then tickets behind it may go first.
	NotBefore time.Time
	// First marks a break-glass ticket; FirstReason is why it was put first.
	First       bool
	FirstReason string
	// Shared marks a shared request's ticket. LeaseKey is the first key of the request a ticket
	// belongs to (the key its waiter subscribes by), when it names several keys or limits.
	Shared   bool
	LeaseKey string
}

// ErrNoLine: the store keeps no line per resource (only SQLite and PostgreSQL do).
var ErrNoLine = errors.New("baton: this store keeps no line per resource")

// LineReader is implemented by stores with a line (LineWaiter): it reads one resource as its
// holders and its line see it.
type LineReader interface {
	// ResourceLine returns key's holder, rest and line (at most limit tickets, 1..MaxListLimit),
	// read at one instant of the store's clock. A key nobody holds, waits for or rests is
	// returned empty, not ErrNotFound.
	ResourceLine(ctx context.Context, key string, limit int) (*ResourceLine, error)
}

// ResourceLine is a resource's holder, rest and line.
type ResourceLine struct {
	Key string
	// Holder is the live lease on the key, or the running job attempt that holds it (Holder
	// JobHolder(HolderJob), its token and lease expiry); nil if none.
	Holder    *Lease
	HolderJob int64
	// Holders are the live leases that hold the key through holds (shared holders, or leases on
	// several keys; store.Limiter), in token order: Holder is then the latest of them, with no
	// ID. Empty otherwise.
	Holders []*Lease
	// Rest is the key's rest if it rests (no holder): ReasonCooldown, ReasonLockDelay or
	// ReasonResourceCooldown, and what is left of it; nil otherwise.
	Rest *Rest
	// Tickets are the waiting lock requests and the unfinished jobs that are not running, in
	// line order (Position 1 first).
	Tickets []*Ticket
	// Tree is the prefix of the tree the key is a key of (trees.go); "" if none.
	Tree string
	// Related are, for a key of a tree (trees.go), the live holders of its ancestors and of its
	// descendants, in token order, at most the line's limit: each a Lease whose Key is the
	// related key it holds and Shared its mode (a job attempt's ID is JobLeaseID of the job, its
	// Holder the worker).
	// They hold this key back as the compatibility matrix says. Empty for a key in no tree.
	Related []*Lease
	// Rates are the kinds' rates reached on the key now (Kind.Rate): their jobs wait until Next.
	Rates []*RateWait
}

// Place finds a request's place in a line read in order: how many wait before the lock ticket
// leaseID (before a newcomer, if it has none) and the first of them. Jobs that are not ready do
// not count; a break-glass request (first) has only break-glass tickets before it.
func Place(line []*Ticket, leaseID string, first bool) (ahead int, front *Ticket) {
	for _, t := range line {
		if t.Job == 0 && t.LeaseID == leaseID {
			break
		}
		if first && !t.First || t.Job != 0 && !t.NotBefore.IsZero() {
			continue
		}
		if front == nil {
			front = t
		}
		ahead++
	}
	return ahead, front
}

// WorkerActivity is implemented by job stores that can say when a worker last asked for jobs of
// a kind, for explaining why a job waits.
type WorkerActivity interface {
	// LastClaim is the latest time, on this process's clock, that a worker asked for jobs of
	// kind (a claim, whether it found any) or was running one, as far as the store can tell:
	// claims made through this store value, and on PostgreSQL the marks of waiting workers and
	// the running jobs of every process. Zero if none is known.
	LastClaim(ctx context.Context, kind string) (time.Time, error)
}

// ClaimClock records, per kind, when a worker last asked this process's store for jobs.
type ClaimClock struct{ m sync.Map } // kind -> time.Time

// Saw records a claim for kinds at now.
func (c *ClaimClock) Saw(kinds []string, now time.Time) {
	for _, k := range kinds {
		c.m.Store(k, now)
	}
}

// Last is the latest recorded claim for kind; zero if none.
func (c *ClaimClock) Last(kind string) time.Time {
	if v, ok := c.m.Load(kind); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// ValidateLineRead checks the arguments of LineReader.ResourceLine.
func ValidateLineRead(key string, limit int) error {
	return firstError(ValidateKey(key), ValidateListLimit(limit))
}
