package sqlite

import (
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// The transitions several operations share: a resource's heads (the jobs that may be claimed),
// the end of a job, the end of a failed attempt. They run inside the caller's write transaction
// and change the in-memory job as they write it.
//
// A resource's heads are its oldest unfinished job and, if that one holds the resource shared
// (store.Job.Shared), the shared jobs directly behind it: a prefix of its line, never more than
// one job unless all of them are shared. Which of them run together, and when, the holds decide
// (jobs_beyond.go), as for shared leases. A job that is not shared becomes head only as the
// oldest unfinished job, so it never runs beside another job of its resource, and no job runs
// before an older one of its resource that is not shared.

// headOf returns the resource's oldest unfinished job, or nil if it has none.
func (x *jobTx) headOf(resource string) (*store.Job, error) {
	j, err := scanJob(x.q.QueryRowContext(x.ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE resource = ? AND state IN `+sqlUnfinished+` ORDER BY seq LIMIT 1`, resource))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return j, err
}

// makeHead marks j as its resource's head, in memory (the caller writes it): its scheduled_at is
// raised to the end of its kind's cooldown on the resource, a job not yet attempted is
// "scheduled" or "available" by that time, and this process's workers of its kind are woken once
// the transaction commits.
func (x *jobTx) makeHead(j *store.Job, r *resourceRow) {
	j.Head = true
	if until, ok := r.cooldowns[j.Kind]; ok && until > j.ScheduledAt.UnixNano() {
		j.ScheduledAt = time.Unix(0, until)
	}
	if r.coolUntil > j.ScheduledAt.UnixNano() {
		j.ScheduledAt = time.Unix(0, r.coolUntil) // queued before the resource's cooldown began
	}
	if j.State == store.JobAvailable || j.State == store.JobScheduled {
		j.State = store.JobAvailable
		if j.ScheduledAt.After(x.now) {
			j.State = store.JobScheduled
		}
	}
	x.wake[j.Kind] = true
}

// promote makes the resource's oldest unfinished job its head, if it is not already, and, if it
// is shared, the shared jobs directly behind it. While the oldest is head, the heads are left as
// they are: a shared head that ended leaves the others heads.
func (x *jobTx) promote(resource string) error {
	j, err := x.headOf(resource)
	if err != nil || j == nil || j.Head {
		return err
	}
	r, err := x.resource(resource)
	if err != nil {
		return err
	}
	x.makeHead(j, r)
	if err := x.saveJob(j); err != nil || !j.Shared {
		return err
	}
	return x.promoteShared(j, r)
}

// sharedBatch bounds the jobs promoteShared reads at once.
const sharedBatch = 64

// promoteShared makes heads the shared jobs directly behind the shared head h, up to the
// resource's first job that is not shared.
func (x *jobTx) promoteShared(h *store.Job, r *resourceRow) error {
	after := h.Seq
	for {
		js, err := scanJobs(x.q.QueryContext(x.ctx, `SELECT `+jobColumns+` FROM jobs
			WHERE resource = ? AND state IN `+sqlUnfinished+` AND seq > ? ORDER BY seq LIMIT ?`,
			h.Resource, after, sharedBatch))
		if err != nil {
			return err
		}
		for _, j := range js {
			if !j.Shared {
				return nil
			}
			after = j.Seq
			if j.Head {
				continue
			}
			x.makeHead(j, r)
			if err := x.saveJob(j); err != nil {
				return err
			}
		}
		if len(js) < sharedBatch {
			return nil
		}
	}
}

// joinsShared reports whether a shared job submitted now to resource joins its heads: the
// resource's newest unfinished job is a shared head (so all of its unfinished jobs are).
func (x *jobTx) joinsShared(resource string) (bool, error) {
	j, err := scanJob(x.q.QueryRowContext(x.ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE resource = ? AND state IN `+sqlUnfinished+` ORDER BY seq DESC LIMIT 1`, resource))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return j.Head && j.Shared, nil
}

// end finishes j in the final state st; if j was its resource's head, the next job of the
// resource becomes head. With settle, if j was head and had an attempt, the resource takes the
// kind's success state (st succeeded) or failure state (cancelled, discarded), and the kind's
// cooldown starts. (A head its guard refused is not settled: it did not start.)
func (x *jobTx) end(j *store.Job, st store.JobState, settle bool) error {
	wasHead := j.Head
	if j.State == store.JobRunning {
		x.freed[j.Resource] = true
		if j.Beyond() {
			if err := x.endHolds(j); err != nil {
				return err
			}
		}
	} else if j.Beyond() {
		if err := x.leaveLines(j); err != nil {
			return err
		}
	}
	j.State, j.Head, j.FinishedAt = st, false, x.now
	if settle && wasHead && j.Attempt > 0 {
		k, err := x.kind(j.Kind)
		if err != nil {
			return err
		}
		r, err := x.resource(j.Resource)
		if err != nil {
			return err
		}
		changed := false
		next := k.FailureState
		if st == store.JobSucceeded {
			next = k.SuccessState
		}
		if next != "" && next != r.state {
			r.state, r.version, r.updatedAt = next, r.version+1, x.now.UnixNano()
			changed = true
		}
		if k.Cooldown > 0 {
			r.cooldowns[k.Name] = x.now.Add(k.Cooldown).UnixNano()
			changed = true
		}
		if until := x.now.Add(k.ResourceCooldown).UnixNano(); k.ResourceCooldown > 0 && until > r.coolUntil {
			r.coolUntil, r.coolJob = until, j.ID
			changed = true
		}
		if changed {
			if err := x.saveResource(r); err != nil {
				return err
			}
		}
	}
	if err := x.saveJob(j); err != nil {
		return err
	}
	if wasHead {
		return x.promote(j.Resource)
	}
	return nil
}

// endAttempt ends j's running attempt with an error (code, msg) appended to its history:
// superseded if a replace asked it to stop (jobs_replace.go), else cancelled if a cancel was
// requested; discarded if permanent or its attempts are exhausted;
// else retryable after backoff, still its resource's head.
func (x *jobTx) endAttempt(j *store.Job, code, msg string, permanent bool, backoff time.Duration) error {
	x.addError(j, code, msg)
	j.LeaseExpiresAt = time.Time{}
	x.freed[j.Resource] = true
	switch {
	case j.CancelRequested && j.SupersededBy != 0:
		return x.end(j, store.JobSuperseded, true) // asked to stop by a replace (jobs_replace.go)
	case j.CancelRequested:
		return x.end(j, store.JobCancelled, true)
	case permanent || j.Attempt >= j.MaxAttempts:
		return x.end(j, store.JobDiscarded, true)
	}
	if j.Beyond() && j.State == store.JobRunning {
		if err := x.endHolds(j); err != nil {
			return err
		}
	}
	j.State, j.ScheduledAt = store.JobRetryable, x.now.Add(backoff)
	x.wake[j.Kind] = true
	return x.saveJob(j)
}
