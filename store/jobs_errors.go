package store

import (
	"errors"
	"fmt"
)

var (
	// ErrResourceBusy: a submit under the reject policy found unfinished jobs on its resource.
	// The concrete error is *ResourceBusyError.
	ErrResourceBusy = errors.New("baton: resource busy")
	// ErrJobState: the job's state forbids the operation. The concrete error is *JobStateError.
	ErrJobState = errors.New("baton: job state forbids this")
	// ErrVersionMismatch: a compare-and-set of a resource's state found another version. The
	// concrete error is *VersionMismatchError.
	ErrVersionMismatch = errors.New("baton: resource version mismatch")
)

// ResourceBusyError names the job a rejected submit would have waited for. It matches
// ErrResourceBusy.
type ResourceBusyError struct {
	Resource string
	HeadJob  int64 // the resource's oldest unfinished job
	State    JobState
}

func (e *ResourceBusyError) Error() string {
	return fmt.Sprintf("baton: resource %q busy: job %d is %s", e.Resource, e.HeadJob, e.State)
}

// Is reports whether target is ErrResourceBusy.
func (e *ResourceBusyError) Is(target error) bool { return target == ErrResourceBusy }

// JobStateError says why a job's state forbids an operation. It matches ErrJobState.
type JobStateError struct {
	ID    int64
	Op    string // "cancel", "retry"
	State JobState
}

func (e *JobStateError) Error() string {
	return fmt.Sprintf("baton: cannot %s job %d: it is %s", e.Op, e.ID, e.State)
}

// Is reports whether target is ErrJobState.
func (e *JobStateError) Is(target error) bool { return target == ErrJobState }

// VersionMismatchError reports the version a compare-and-set found. It matches
// ErrVersionMismatch.
type VersionMismatchError struct {
	Key     string
	Want    int64
	Current int64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("baton: resource %q is at version %d, not %d", e.Key, e.Current, e.Want)
}

// Is reports whether target is ErrVersionMismatch.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }
