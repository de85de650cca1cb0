package wire

import (
	"time"

	"github.com/batonhq/baton/store"
)

// The line of a resource (store.LineReader): the members holder, rest and line of the resource
// object that GET /v1/resources/{key} answers when the server's store keeps one line per key.

// Ticket types.
const (
	TicketLock = "lock" // a waiting lock request
	TicketJob  = "job"  // an unfinished job that is not running
)

// Holder is who holds a resource: a live lease, or the running job attempt Job.
type Holder struct {
	// Key is the key it holds when that is not the resource's own: a related key of a tree (one
	// of Related).
	Key string `json:"key,omitempty"`
	// LeaseID is shown only to an admin and to the lease's owner, like a lease's; a job attempt
	// has none.
	LeaseID string `json:"lease_id,omitempty"`
	Holder  string `json:"holder"`
	Owner   string `json:"owner,omitempty"`
	// Job is the job whose attempt holds the resource; absent for a lease.
	Job        int64  `json:"job,omitempty"`
	Token      uint64 `json:"token"`
	AcquiredAt Time   `json:"acquired_at,omitzero"`
	ExpiresAt  Time   `json:"expires_at"`
	TTLLeftMs  int64  `json:"ttl_left_ms"`
	// Shared marks a shared holder (one of Holders).
	Shared bool `json:"shared,omitempty"`
}

// ResourceRest is a resource's rest: no one is granted it until Until.
type ResourceRest struct {
	// Reason is store.ReasonCooldown, store.ReasonLockDelay or store.ReasonResourceCooldown.
	Reason      string `json:"reason"`
	RemainingMs int64  `json:"remaining_ms"`
	// Until is the server's now plus RemainingMs.
	Until Time `json:"until"`
}

// Ticket is one waiting request in a resource's line.
type Ticket struct {
	Position int `json:"position"` // 1 for the front
	// Type is TicketLock or TicketJob.
	Type string `json:"type"`
	// LeaseID (shown only to an admin and to the ticket's owner), Holder and Owner are a lock
	// ticket's; Holder is "job:<id>" for a job.
	LeaseID string `json:"lease_id,omitempty"`
	Holder  string `json:"holder"`
	Owner   string `json:"owner,omitempty"`
	// Job and Kind are a job ticket's.
	Job  int64  `json:"job,omitempty"`
	Kind string `json:"kind,omitempty"`
	// Since is its arrival: a lock request's first refusal, a job's submit.
	Since Time `json:"since"`
	// ExpiresAt is when a lock ticket expires unless its waiter keeps waiting.
	ExpiresAt Time `json:"expires_at,omitzero"`
	// NotBefore is when a job that is not ready (scheduled, or backing off) becomes ready.
	NotBefore Time `json:"not_before,omitzero"`
	// First marks a break-glass ticket, put before every other; FirstReason is why.
	First       bool   `json:"first,omitempty"`
	FirstReason string `json:"first_reason,omitempty"`
	// Shared marks a shared request's ticket.
	Shared bool `json:"shared,omitempty"`
}

// HolderFrom converts a store line's holder; nil stays nil.
func HolderFrom(l *store.Lease, job int64) *Holder {
	if l == nil {
		return nil
	}
	return &Holder{LeaseID: l.ID, Holder: l.Holder, Owner: l.Owner, Job: job, Token: l.Token,
		AcquiredAt: T(l.AcquiredAt), ExpiresAt: T(l.ExpiresAt), TTLLeftMs: l.TTLLeft.Milliseconds(), Shared: l.Shared}
}

// RestFrom converts a store line's rest, read at now; nil stays nil.
func RestFrom(r *store.Rest, now time.Time) *ResourceRest {
	if r == nil {
		return nil
	}
	return &ResourceRest{Reason: r.Reason, RemainingMs: r.Remaining.Milliseconds(), Until: T(now.Add(r.Remaining))}
}

// TicketFrom converts a store ticket.
func TicketFrom(t *store.Ticket) Ticket {
	out := Ticket{Position: t.Position, Type: TicketLock, LeaseID: t.LeaseID, Holder: t.Holder, Owner: t.Owner,
		Job: t.Job, Kind: t.JobKind, Since: T(t.Since), ExpiresAt: T(t.ExpiresAt), NotBefore: T(t.NotBefore),
		First: t.First, FirstReason: t.FirstReason, Shared: t.Shared}
	if t.Job != 0 {
		out.Type = TicketJob
	}
	return out
}

// LineFrom converts a store line: its holder, rest and tickets set on r.
func (r *Resource) LineFrom(l *store.ResourceLine, now time.Time) {
	r.Holder = HolderFrom(l.Holder, l.HolderJob)
	for _, h := range l.Holders {
		r.Holders = append(r.Holders, *HolderFrom(h, 0))
	}
	r.Tree = l.Tree
	for _, h := range l.Related {
		job, _ := store.JobOfLeaseID(h.ID)
		rh := HolderFrom(h, job)
		if job != 0 {
			rh.LeaseID = ""
		}
		rh.Key = h.Key
		r.Related = append(r.Related, *rh)
	}
	r.Rest = RestFrom(l.Rest, now)
	r.Line = make([]Ticket, len(l.Tickets))
	for i, t := range l.Tickets {
		r.Line[i] = TicketFrom(t)
	}
	for _, w := range l.Rates {
		r.Rates = append(r.Rates, RateWait{Kind: w.Kind, Limit: w.Limit, Prefix: w.Prefix, Rate: w.Rate.String(), Next: T(w.Next)})
	}
}

// StoreLine converts back to a store line; nil if the answer has no line (the server's store
// keeps none).
func (r *Resource) StoreLine() *store.ResourceLine {
	if r.Line == nil {
		return nil
	}
	out := &store.ResourceLine{Key: r.Key, Tree: r.Tree, Tickets: make([]*store.Ticket, len(r.Line))}
	if h := r.Holder; h != nil {
		out.HolderJob = h.Job
		out.Holder = &store.Lease{Key: r.Key, ID: h.LeaseID, Holder: h.Holder, Owner: h.Owner, Token: h.Token,
			AcquiredAt: h.AcquiredAt.UTC(), ExpiresAt: h.ExpiresAt.UTC(), TTLLeft: dur(h.TTLLeftMs)}
	}
	for _, h := range r.Holders {
		out.Holders = append(out.Holders, &store.Lease{Key: r.Key, ID: h.LeaseID, Holder: h.Holder, Owner: h.Owner,
			Token: h.Token, AcquiredAt: h.AcquiredAt.UTC(), ExpiresAt: h.ExpiresAt.UTC(), TTLLeft: dur(h.TTLLeftMs), Shared: h.Shared})
	}
	for _, h := range r.Related {
		id := h.LeaseID
		if h.Job != 0 {
			id = store.JobLeaseID(h.Job)
		}
		out.Related = append(out.Related, &store.Lease{Key: h.Key, ID: id, Holder: h.Holder, Owner: h.Owner,
			Token: h.Token, AcquiredAt: h.AcquiredAt.UTC(), ExpiresAt: h.ExpiresAt.UTC(), TTLLeft: dur(h.TTLLeftMs), Shared: h.Shared})
	}
	if rs := r.Rest; rs != nil {
		out.Rest = &store.Rest{Key: r.Key, Reason: rs.Reason, Remaining: dur(rs.RemainingMs)}
	}
	for _, w := range r.Rates {
		if rate, err := store.ParseRate("rate", w.Rate); err == nil {
			out.Rates = append(out.Rates, &store.RateWait{Kind: w.Kind, Limit: w.Limit, Prefix: w.Prefix, Rate: rate, Next: w.Next.UTC()})
		}
	}
	for i, t := range r.Line {
		out.Tickets[i] = &store.Ticket{Position: t.Position, Job: t.Job, JobKind: t.Kind, LeaseID: t.LeaseID,
			Holder: t.Holder, Owner: t.Owner, Since: t.Since.UTC(), ExpiresAt: t.ExpiresAt.UTC(),
			NotBefore: t.NotBefore.UTC(), First: t.First, FirstReason: t.FirstReason, Shared: t.Shared}
	}
	return out
}
