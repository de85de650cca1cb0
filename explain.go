package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/store"
)

// Why a resource is not granted now, or a job does not run now: the codes of a WaitReason.
const (
	WaitHeld        = "held"         // a lease or a job attempt holds the resource
	WaitAhead       = "ahead"        // tickets wait before it in the resource's line
	WaitResting     = "resting"      // the resource rests: cooldown, lock-delay or resource cooldown
	WaitGuard       = "guard"        // the resource's state fails the job kind's guard
	WaitScheduled   = "scheduled"    // the job is scheduled for later
	WaitBackingOff  = "backing_off"  // the job failed and waits before its next attempt
	WaitNoWorker    = "no_worker"    // no worker of the job's kind has asked for work in the last minute
	WaitUnknownKind = "unknown_kind" // the job's kind is not registered
	WaitLimit       = "limit"        // a limit the job takes a unit of is full
	WaitRate        = "rate"         // a rate the job counts in is reached: its kind's on its resource, its prefix's or a limit's
)

// NoWorkerAfter is how long since a worker of a kind last asked for jobs before an explanation
// says that none does.
const NoWorkerAfter = time.Minute

// WaitReason is one reason why a resource is not granted now or a job does not run now. Message
// says it in a sentence; the other fields carry its parts, those of other codes being zero.
type WaitReason struct {
	Code    string
	Message string
	// held: who holds the resource (a lease's holder, or JobHolder of a job attempt), the job,
	// the token, and until when (the holder's lease expiry unless renewed).
	Holder string
	Job    int64
	Token  uint64
	// Until is when the rest, the schedule or the backoff ends, or the holder's lease expires.
	Until time.Time
	// ahead: how many wait before it, and the first of them (as Holder).
	Ahead int
	// resting: cooldown, lock-delay or resource-cooldown.
	Rest string
	// guard: the resource's state and the states the kind starts from.
	State   string
	Allowed []string
	// held: the resource that holds it back (one of a job's extra resources, or a related key
	// of a tree: an ancestor or a descendant), and whether its holder holds it shared.
	Resource string
	Shared   bool
	// limit: the full limit, its units in use and its capacity (Holder: the holders, listed).
	Limit    string
	InUse    int
	Capacity int
	// rate: the rate reached, in its text form ("3/1h"); Until is when its window frees.
	Rate string
}

// Explanation answers "why isn't this running now?" for a resource (Key) or a job (Job, with its
// State). No Reasons means nothing holds it back: a resource would be granted to a newcomer, a
// job would be claimed by the next worker that asks. A job that is not waiting (running or
// finished) has State set and no Reasons.
type Explanation struct {
	Key      string
	Job      int64
	JobState store.JobState
	Reasons  []WaitReason
}

// ErrNoLine is returned by Explain on a store that keeps no line per resource (only SQLite and
// PostgreSQL do).
var ErrNoLine = store.ErrNoLine

// Explain says why key would not be granted to a newcomer now: who holds it, how many wait
// before it in the line (a newcomer goes to the back), and whether it rests.
func (l *Locker) Explain(ctx context.Context, key string) (*Explanation, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	lr, ok := l.store.(store.LineReader)
	if !ok {
		return nil, ErrNoLine
	}
	rl, err := lr.ResourceLine(ctx, key, store.MaxListLimit)
	if err != nil {
		return nil, err
	}
	e := &Explanation{Key: key}
	e.Reasons = resourceReasons(rl, false)
	if n, front := store.Place(rl.Tickets, "", false); n > 0 {
		e.Reasons = append(e.Reasons, aheadReason(n, front))
	}
	return e, nil
}

// Explain says why job id does not run now: its resource is held, others wait before it in the
// resource's line, the resource rests, its state fails the kind's guard, the job is scheduled for
// later or backing off, no worker of its kind asks for work, or its kind is unknown.
func (q *Queue) Explain(ctx context.Context, id int64) (*Explanation, error) {
	return ExplainJob(ctx, q.st, id)
}

// ExplainJob is Queue.Explain over a job store, for a server that holds no Queue.
func ExplainJob(ctx context.Context, st store.JobStore, id int64) (*Explanation, error) {
	lr, ok := st.(store.LineReader)
	if !ok {
		return nil, ErrNoLine
	}
	j, err := st.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	e := &Explanation{Key: j.Resource, Job: j.ID, JobState: j.State}
	switch j.State {
	case store.JobScheduled, store.JobAvailable, store.JobRetryable:
	default:
		return e, nil // running or finished: not waiting
	}
	rl, err := lr.ResourceLine(ctx, j.Resource, store.MaxListLimit)
	if err != nil {
		return nil, err
	}
	e.Reasons = resourceReasons(rl, j.Shared)
	if n, front := jobPlace(rl.Tickets, j.ID, j.Shared); n > 0 {
		e.Reasons = append(e.Reasons, aheadReason(n, front))
	}
	more, err := beyondReasons(ctx, st, lr, j)
	if err != nil {
		return nil, err
	}
	e.Reasons = append(e.Reasons, more...)
	var rated time.Time
	for _, w := range rl.Rates {
		// The kind's rate on the resource, the rate of the prefix it is under, a rate of a limit
		// the job takes.
		if w.Kind == j.Kind || w.Prefix != "" || w.Limit != "" && slices.Contains(j.Limits, w.Limit) {
			rated = w.Next
			e.Reasons = append(e.Reasons, WaitReason{Code: WaitRate, Rate: w.Rate.String(), Until: w.Next, Message: w.Message()})
		}
	}
	for _, t := range rl.Tickets {
		// A job its rate postponed is scheduled for when the window frees: said once, as the rate.
		if t.Job == j.ID && !t.NotBefore.IsZero() && !(!rated.IsZero() && !t.NotBefore.After(rated)) {
			r := WaitReason{Code: WaitScheduled, Until: t.NotBefore,
				Message: "scheduled for " + t.NotBefore.UTC().Format(time.RFC3339)}
			if j.Attempt > 0 {
				r.Code = WaitBackingOff
				r.Message = fmt.Sprintf("backing off after attempt %d until %s", j.Attempt, t.NotBefore.UTC().Format(time.RFC3339))
			}
			e.Reasons = append(e.Reasons, r)
		}
	}
	kinds, err := st.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == j.Kind })
	if i < 0 {
		e.Reasons = append(e.Reasons, WaitReason{Code: WaitUnknownKind,
			Message: fmt.Sprintf("kind %q is not registered: no worker can run it", j.Kind)})
		return e, nil
	}
	if k := kinds[i]; len(k.FromStates) > 0 {
		res, err := st.GetResource(ctx, j.Resource)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		state := ""
		if res != nil {
			state = res.State
		}
		if !slices.Contains(k.FromStates, state) && !(j.Attempt > 0 && k.RunningState != "" && state == k.RunningState) {
			e.Reasons = append(e.Reasons, WaitReason{Code: WaitGuard, State: state, Allowed: k.FromStates,
				Message: fmt.Sprintf("resource state %q fails kind %q's guard (starts only from %s): it will be discarded when claimed",
					state, k.Name, strings.Join(k.FromStates, ", "))})
		}
	}
	if wa, ok := st.(store.WorkerActivity); ok {
		last, err := wa.LastClaim(ctx, j.Kind)
		if err != nil {
			return nil, err
		}
		if time.Since(last) > NoWorkerAfter {
			msg := fmt.Sprintf("no worker of kind %q has asked for work in the last %s", j.Kind, NoWorkerAfter)
			if !last.IsZero() {
				msg += " (last " + last.UTC().Format(time.RFC3339) + ")"
			}
			e.Reasons = append(e.Reasons, WaitReason{Code: WaitNoWorker, Until: last, Message: msg})
		}
	}
	return e, nil
}

// resourceReasons: the holder of the resource, or its rest. For a shared request (shared),
// shared holders hold nothing back.
func resourceReasons(rl *store.ResourceLine, shared bool) []WaitReason {
	var out []WaitReason
	if len(rl.Holders) > 0 {
		if r, ok := holdersReason(rl.Holders, shared); ok {
			out = append(out, r)
		}
	} else if h := rl.Holder; h != nil {
		what := "lease"
		if rl.HolderJob != 0 {
			what = "job attempt"
		}
		out = append(out, WaitReason{Code: WaitHeld, Holder: h.Holder, Job: rl.HolderJob, Token: h.Token, Until: h.ExpiresAt,
			Message: fmt.Sprintf("held by %s (%s, token %d) until %s unless renewed", h.Holder, what, h.Token,
				h.ExpiresAt.UTC().Format(time.RFC3339))})
	}
	out = append(out, relatedReasons(rl, shared)...)
	if r := rl.Rest; r != nil {
		until := time.Now().Add(r.Remaining)
		out = append(out, WaitReason{Code: WaitResting, Rest: r.Reason, Until: until,
			Message: fmt.Sprintf("resting until %s (%s)", until.UTC().Format(time.RFC3339), r.Reason)})
	}
	return out
}

// relatedReasons names the holders of a tree key's ancestors and descendants that hold it back
// by the compatibility matrix (store/trees.go): every one of them, unless both are shared.
func relatedReasons(rl *store.ResourceLine, shared bool) []WaitReason {
	var out []WaitReason
	for _, h := range rl.Related {
		if shared && h.Shared {
			continue
		}
		where := "below it"
		if strings.HasPrefix(rl.Key, h.Key+"/") {
			where = "an ancestor"
		}
		mode := "exclusive"
		if h.Shared {
			mode = "shared"
		}
		job, _ := store.JobOfLeaseID(h.ID)
		what := "lease"
		if job != 0 {
			what = fmt.Sprintf("job %d", job)
		}
		out = append(out, WaitReason{Code: WaitHeld, Holder: h.Holder, Job: job, Token: h.Token, Until: h.ExpiresAt,
			Resource: h.Key, Shared: h.Shared,
			Message: fmt.Sprintf("%q (%s) held %s by %s (%s, token %d) until %s unless renewed", h.Key, where, mode,
				h.Holder, what, h.Token, h.ExpiresAt.UTC().Format(time.RFC3339))})
	}
	return out
}

// holdersReason names the holders of a key held through holds: the exclusive one, or the shared
// ones (which hold back only an exclusive request).
func holdersReason(hs []*store.Lease, shared bool) (WaitReason, bool) {
	for _, h := range hs {
		if !h.Shared {
			return WaitReason{Code: WaitHeld, Holder: h.Holder, Token: h.Token, Until: h.ExpiresAt,
				Message: fmt.Sprintf("held exclusive by %s (token %d) until %s unless renewed", h.Holder, h.Token,
					h.ExpiresAt.UTC().Format(time.RFC3339))}, true
		}
	}
	if shared {
		return WaitReason{}, false
	}
	last := hs[len(hs)-1]
	return WaitReason{Code: WaitHeld, Holder: last.Holder, Token: last.Token, Until: last.ExpiresAt, Shared: true,
		Message: fmt.Sprintf("held shared by %s", holderList(hs))}, true
}

// holderList is "a (token 3), b (token 5)", at most 5 of them, then how many more.
func holderList(hs []*store.Lease) string {
	var parts []string
	for i, h := range hs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(hs)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (token %d)", h.Holder, h.Token))
	}
	return strings.Join(parts, ", ")
}

// beyondReasons: the holders of a waiting job's extra resources, and its full limits.
func beyondReasons(ctx context.Context, st store.JobStore, lr store.LineReader, j *store.Job) ([]WaitReason, error) {
	var out []WaitReason
	for _, key := range j.Resources {
		rl, err := lr.ResourceLine(ctx, key, store.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for _, r := range resourceReasons(rl, j.Shared) {
			r.Resource, r.Message = key, fmt.Sprintf("resource %q %s", key, r.Message)
			out = append(out, r)
		}
	}
	lim, ok := st.(store.Limiter)
	if !ok {
		return out, nil
	}
	for _, name := range j.Limits {
		ls, err := lim.Limits(ctx, &store.LimitsParams{Name: name, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			out = append(out, WaitReason{Code: WaitLimit, Limit: name,
				Message: fmt.Sprintf("limit %q no longer exists: the job will be discarded when claimed", name)})
			continue
		}
		l := ls[0]
		if l.InUse < l.Capacity {
			continue
		}
		r := WaitReason{Code: WaitLimit, Limit: name, InUse: l.InUse, Capacity: l.Capacity,
			Message: fmt.Sprintf("limit %q full: %d of %d", name, l.InUse, l.Capacity)}
		if len(l.Holders) > 0 {
			r.Holder = l.Holders[0].Holder
			r.Message += ", held by " + holderList(l.Holders)
		}
		out = append(out, r)
	}
	return out, nil
}

func aheadReason(n int, front *store.Ticket) WaitReason {
	what := "lock request of " + front.Holder
	if front.Job != 0 {
		what = fmt.Sprintf("job %d (%s)", front.Job, front.JobKind)
	}
	return WaitReason{Code: WaitAhead, Ahead: n, Holder: front.Holder, Job: front.Job,
		Message: fmt.Sprintf("%d ahead in the line, first the %s", n, what)}
}

// jobPlace counts the entries before job id in its resource's line: the lock tickets that arrived
// before it and the resource's earlier jobs, which run first whether ready or not. For a shared
// job (shared), only the exclusive ones: shared ones before it run together with it.
func jobPlace(line []*store.Ticket, id int64, shared bool) (int, *store.Ticket) {
	n := 0
	var front *store.Ticket
	for _, t := range line {
		if t.Job == id {
			break
		}
		if shared && t.Shared {
			continue
		}
		if front == nil {
			front = t
		}
		n++
	}
	return n, front
}
