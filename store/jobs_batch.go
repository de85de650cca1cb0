package store

import (
	"errors"
	"fmt"
)

// MaxSubmitBatch bounds the jobs of one SubmitJobs call (and of POST /v1/jobs/batch).
const MaxSubmitBatch = 10000

// BatchError places the error of one job of a SubmitJobs batch, of which nothing was written.
// Refusals under the reject policy come as a BatchError around a *ResourceBusyError (errors.As
// and errors.Is see through it); bad input comes as an *InvalidArgumentError whose field names
// the job, as in "jobs[3].kind".
type BatchError struct {
	Index int // the job's position in the batch, from 0
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("baton: batch job %d: %v", e.Index, e.Err) }

// Unwrap returns the job's own error.
func (e *BatchError) Unwrap() error { return e.Err }

// BatchField is the field name of job i's field in a batch: jobs[i].field.
func BatchField(i int, field string) string {
	if field == "" {
		return fmt.Sprintf("jobs[%d]", i)
	}
	return fmt.Sprintf("jobs[%d].%s", i, field)
}

// InBatch places err, the error of job i of a batch: an *InvalidArgumentError gets its field
// prefixed with jobs[i]; a *ResourceBusyError is wrapped in a *BatchError; other errors (of the
// store as a whole) pass unchanged.
func InBatch(i int, err error) error {
	var inv *InvalidArgumentError
	if errors.As(err, &inv) {
		return &InvalidArgumentError{Field: BatchField(i, inv.Field), Rule: inv.Rule}
	}
	var busy *ResourceBusyError
	if errors.As(err, &busy) {
		return &BatchError{Index: i, Err: busy}
	}
	return err
}

// ValidateBatch checks the size of a batch and every job in it (as SubmitParams.Validate does);
// the first bad job's error names its index.
func ValidateBatch(ps []*SubmitParams) error {
	if len(ps) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	if len(ps) > MaxSubmitBatch {
		return invalid("jobs", "must hold at most %d jobs (got %d)", MaxSubmitBatch, len(ps))
	}
	for i, p := range ps {
		if p == nil {
			return invalid(BatchField(i, ""), "must not be null")
		}
		if err := p.Validate(); err != nil {
			return InBatch(i, err)
		}
	}
	return nil
}
