package store

import (
	"errors"
	"fmt"
	"time"
)

// Latest wins (PolicyReplace). What a replace submit of job N (kind K, resource R) does, in the
// atomic step that inserts N, the same on every store:
//
//   - every unfinished job of K on R that is not running (scheduled, available, retryable)
//     becomes JobSuperseded: SupersededBy N, FinishedAt the store's now; a store with an audit
//     log records it (EventJobSuperseded);
//   - a running job of K on R is asked to stop (CancelRequested, as CancelJob does) and its
//     SupersededBy set to N: its attempt ends JobSuperseded when its worker reports a failure or
//     its lease expires (ReapJobs), or JobSucceeded if it completes first. N is queued behind it
//     (a running job stays its resource's head), so N starts only after that attempt ended, with
//     a greater fencing token, which fences a late write of the old attempt;
//   - jobs of other kinds on R are left as they are: N queues behind them;
//   - with a debounce D (SubmitParams.Debounce, else Kind.Debounce), N is scheduled at the
//     store's now plus D: each later replace submit supersedes it and is scheduled D after
//     itself, so a burst runs once, the last job, D after the burst ended.
//
// A submit whose idempotency key names a superseded job returns the job that replaced it (the
// end of the chain of replacements, at most MaxSupersedeChain steps), Existing=true.
//
// Refused, with *InvalidArgumentError and nothing written: a debounce outside
// MinDebounce..MaxDebounce; a debounce with a policy other than replace (of the submit, or of the
// kind when the submit names none); a per-submit replace for a kind registered with policy skip
// or reject (those kinds protect the work in progress; replace would cancel it); a kind with a
// debounce but a policy other than replace.

// Bounds of a debounce (Kind.Debounce, SubmitParams.Debounce); 0 means none.
const (
	MinDebounce = 10 * time.Millisecond
	MaxDebounce = 24 * time.Hour
)

// MaxSupersedeChain bounds the replacements an idempotent submit follows from the job its key
// names to the job that replaced it last.
const MaxSupersedeChain = 1000

// EventJobSuperseded: a job that was not running was superseded by a replace submit (a running
// one's attempt ends as an EventJobComplete with Outcome superseded). Key is the resource, JobID
// the superseded job, Reason "superseded by job N".
const EventJobSuperseded = "job_superseded"

// validateDebounce checks a debounce of field: 0, or MinDebounce..MaxDebounce.
func validateDebounce(field string, d time.Duration) error {
	if d != 0 && (d < MinDebounce || d > MaxDebounce) {
		return invalid(field, "must be 0 (none) or between %s and %s (got %s)", MinDebounce, MaxDebounce, d)
	}
	return nil
}

// errDebouncePolicy is the refusal of a debounce with a policy other than replace.
func errDebouncePolicy(p BusyPolicy) error {
	return invalid("debounce", "applies only to policy replace (the policy is %q)", string(p))
}

// validateReplace checks a kind's debounce against its policy.
func (k *Kind) validateReplace() error {
	if err := validateDebounce("debounce", k.Debounce); err != nil {
		return err
	}
	if k.Debounce != 0 && k.Policy != PolicyReplace {
		return errDebouncePolicy(k.Policy)
	}
	return nil
}

// validateReplace checks what a submit's own fields say of replace and debounce.
func (p *SubmitParams) validateReplace() error {
	if err := validateDebounce("debounce", p.Debounce); err != nil {
		return err
	}
	if p.Debounce != 0 && p.Policy != "" && p.Policy != PolicyReplace {
		return errDebouncePolicy(p.Policy)
	}
	return nil
}

// SubmitPolicy resolves the policy and the debounce of submit p of kind k (registered), and
// refuses the combinations the kind forbids: a per-submit replace for a kind of policy skip or
// reject, a debounce with a policy other than replace. Every store calls it before its first
// write.
func SubmitPolicy(k *Kind, p *SubmitParams) (BusyPolicy, time.Duration, error) {
	policy := p.Policy
	if policy == "" {
		policy = k.Policy
	}
	if policy == "" {
		policy = PolicyQueue
	}
	if p.Policy == PolicyReplace && (k.Policy == PolicySkip || k.Policy == PolicyReject) {
		return "", 0, invalid("policy", "kind %s is registered with policy %s; replace would cancel the work that policy protects", k.Name, k.Policy)
	}
	if policy != PolicyReplace {
		if p.Debounce != 0 {
			return "", 0, errDebouncePolicy(policy)
		}
		return policy, 0, nil
	}
	d := p.Debounce
	if d == 0 {
		d = k.Debounce
	}
	return policy, d, nil
}

// SupersededReason is the Reason of an EventJobSuperseded.
func SupersededReason(by int64) string { return fmt.Sprintf("superseded by job %d", by) }

// FollowReplacements returns the job that replaced j, transitively (the end of its chain of
// replacements, at most MaxSupersedeChain steps), or j itself if it was not superseded. get reads
// a job by ID; a replacement that is gone (cleaned) ends the walk at the last one found.
func FollowReplacements(j *Job, get func(id int64) (*Job, error)) (*Job, error) {
	for i := 0; i < MaxSupersedeChain && j.State == JobSuperseded && j.SupersededBy != 0; i++ {
		next, err := get(j.SupersededBy)
		if errors.Is(err, ErrNotFound) {
			return j, nil
		}
		if err != nil {
			return nil, err
		}
		j = next
	}
	return j, nil
}
