package store

import (
	"errors"
	"fmt"
)

// MaxSubmitMany bounds the jobs of one SubmitMany call (and of POST /v1/jobs/batch).
const MaxSubmitMany = 10000

// SubmitManyError places the error of one job of a SubmitMany call, of which nothing was
// written. Refusals under the reject policy come as a SubmitManyError around a
// *ResourceBusyError (errors.As and errors.Is see through it); bad input comes as an
// *InvalidArgumentError whose field names the job, as in "jobs[3].kind".
type SubmitManyError struct {
	Index int // the job's position in ps, from 0
	Err   error
}

func (e *SubmitManyError) Error() string {
	return fmt.Sprintf("baton: batch job %d: %v", e.Index, e.Err)
}

// Unwrap returns the job's own error.
func (e *SubmitManyError) Unwrap() error { return e.Err }

// JobField is the name of a field of job i of a SubmitMany call: jobs[i].field, or jobs[i]
// for the job itself.
func JobField(i int, field string) string {
	if field == "" {
		return fmt.Sprintf("jobs[%d]", i)
	}
	return fmt.Sprintf("jobs[%d].%s", i, field)
}

// AtJob places err, the error of job i of a SubmitMany call: an *InvalidArgumentError gets its
// field prefixed with jobs[i]; a *ResourceBusyError is wrapped in a *SubmitManyError; other
// errors (of the store as a whole) pass unchanged.
func AtJob(i int, err error) error {
	var inv *InvalidArgumentError
	if errors.As(err, &inv) {
		return &InvalidArgumentError{Field: JobField(i, inv.Field), Rule: inv.Rule}
	}
	var busy *ResourceBusyError
	if errors.As(err, &busy) {
		return &SubmitManyError{Index: i, Err: busy}
	}
	return err
}

// ValidateSubmitMany checks the size of a SubmitMany call and every job in it (as
// SubmitParams.Validate does); the first bad job's error names its index.
func ValidateSubmitMany(ps []*SubmitParams) error {
	if len(ps) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	if len(ps) > MaxSubmitMany {
		return invalid("jobs", "must hold at most %d jobs (got %d)", MaxSubmitMany, len(ps))
	}
	for i, p := range ps {
		if p == nil {
			return invalid(JobField(i, ""), "must not be null")
		}
		if err := p.Validate(); err != nil {
			return AtJob(i, err)
		}
	}
	return nil
}
