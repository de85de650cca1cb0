package baton

import (
	"errors"

	"github.com/batonhq/baton/store"
)

// The job queue's types are the store's, so that a job read from a Queue, a store or the HTTP
// client is one type. See docs/jobs.md for their semantics.
type (
	// Job is a job as the store sees it. Times are on the store's clock.
	Job = store.Job
	// JobState is the state of a job.
	JobState = store.JobState
	// Kind is a job kind's definition (busy policy, attempts, timeout, cooldown, state guard).
	Kind = store.Kind
	// BusyPolicy says what a submit does when its resource has unfinished jobs.
	BusyPolicy = store.BusyPolicy
	// Rate bounds a kind's attempt starts per resource: at most Max in any sliding Window
	// (Kind.Rate; text form "3/1h", ParseRate).
	Rate = store.Rate
	// JobError is one failed attempt in a job's history.
	JobError = store.JobError
	// SubmitParams are the inputs of Queue.Submit.
	SubmitParams = store.SubmitParams
	// SubmitResult is what Queue.Submit returns; Existing is set when the idempotency key named
	// a job submitted before.
	SubmitResult = store.SubmitResult
	// JobListParams filter Queue.ListJobs.
	JobListParams = store.JobListParams
	// PurgeParams select the dead letters Queue.Purge deletes.
	PurgeParams = store.PurgeParams
	// JobCount is one row of Queue.Counts.
	JobCount = store.JobCount
	// Resource is a resource's recorded state.
	Resource = store.Resource
	// ResourceListParams filter Queue.ListResources.
	ResourceListParams = store.ResourceListParams
	// SetResourceStateParams are the inputs of Queue.SetResourceState.
	SetResourceStateParams = store.SetResourceStateParams
	// ReapedJob is one job the maintenance reaper ended.
	ReapedJob = store.ReapedJob

	// ResourceBusyError names the job a rejected submit would have waited for.
	ResourceBusyError = store.ResourceBusyError
	// JobStateError says why a job's state forbids an operation.
	JobStateError = store.JobStateError
	// VersionMismatchError reports the version a resource compare-and-set found.
	VersionMismatchError = store.VersionMismatchError
	// SubmitManyError places the error of one job of a Queue.SubmitMany call (Index, from 0), of
	// which nothing was written.
	SubmitManyError = store.SubmitManyError
)

// MaxSubmitMany bounds the jobs of one Queue.SubmitMany call.
const MaxSubmitMany = store.MaxSubmitMany

// BatchError is the former name of SubmitManyError.
//
// Deprecated: use SubmitManyError.
type BatchError = SubmitManyError

// MaxSubmitBatch is the former name of MaxSubmitMany.
//
// Deprecated: use MaxSubmitMany.
const MaxSubmitBatch = MaxSubmitMany

// Job states. Unfinished: scheduled, available, running, retryable. Final: the rest.
const (
	JobScheduled = store.JobScheduled
	JobAvailable = store.JobAvailable
	JobRunning   = store.JobRunning
	JobRetryable = store.JobRetryable
	JobSucceeded = store.JobSucceeded
	JobCancelled = store.JobCancelled
	JobDiscarded = store.JobDiscarded
	JobSkipped   = store.JobSkipped
	// JobSuperseded: replaced by a newer job of its kind on its resource (PolicyReplace).
	JobSuperseded = store.JobSuperseded
)

// Busy policies.
const (
	PolicyQueue  = store.PolicyQueue
	PolicySkip   = store.PolicySkip
	PolicyReject = store.PolicyReject
	// PolicyReplace: latest wins; see store.PolicyReplace.
	PolicyReplace = store.PolicyReplace
)

// CodeWorkerShutdown is the error code of an attempt a worker cancelled because it was shutting
// down and ShutdownTimeout passed. The job is retried at once, by another worker if need be.
const CodeWorkerShutdown = "worker_shutdown"

// Errors of the job queue. The first three are the store's sentinels.
var (
	// ErrResourceBusy: a submit under the reject policy found unfinished jobs on its resource.
	// errors.As gives a *ResourceBusyError.
	ErrResourceBusy = store.ErrResourceBusy
	// ErrJobState: the job's state forbids the operation. errors.As gives a *JobStateError.
	ErrJobState = store.ErrJobState
	// ErrVersionMismatch: a compare-and-set of a resource's state found another version.
	// errors.As gives a *VersionMismatchError.
	ErrVersionMismatch = store.ErrVersionMismatch

	// Causes of the cancellation of a handler's context (context.Cause). A lost job lease is
	// reported as ErrLeaseLost, as for any lease.

	// ErrJobCancelled: somebody asked to cancel the running job (Queue.Cancel).
	ErrJobCancelled = errors.New("baton: job cancelled")
	// ErrJobTimeout: the attempt ran longer than its kind's Timeout.
	ErrJobTimeout = errors.New("baton: job timed out")
	// ErrWorkerShutdown: the worker is shutting down and its ShutdownTimeout passed.
	ErrWorkerShutdown = errors.New("baton: worker shutting down")
)

// Permanent marks err as not worth retrying: a worker whose handler returns it discards the job
// at once (the dead letter state) with error code "permanent". errors.Is and errors.As still see
// err through it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was made by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
