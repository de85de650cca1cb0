package store

import (
	"fmt"
	"time"
)

// CooldownSkipError is the error entry of a job skipped because its resource is cooling down
// until until (store clock) after job, recorded at now (store clock).
func CooldownSkipError(resource string, until time.Time, job int64, now time.Time) JobError {
	return JobError{At: now, Code: CodeResourceCooldown, Until: until,
		Message: fmt.Sprintf("resource %q recently remediated (job %d): cooling down until %s; skipped",
			resource, job, until.UTC().Format(time.RFC3339))}
}

// CooldownSkip reports whether j was skipped because its resource was cooling down, and when
// that cooldown ends and how much of it was left at the submit (both on the store's clock).
func (j *Job) CooldownSkip() (until time.Time, left time.Duration, ok bool) {
	if j.State != JobSkipped || len(j.Errors) == 0 {
		return time.Time{}, 0, false
	}
	e := j.Errors[len(j.Errors)-1]
	if e.Code != CodeResourceCooldown {
		return time.Time{}, 0, false
	}
	return e.Until, max(e.Until.Sub(e.At), 0), true
}
