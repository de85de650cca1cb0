package wire

import (
	"encoding/json"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// PeriodicJob is one periodic job of GET /v1/periodic, and one entry of serve's
// --periodic-file (without next_run).
type PeriodicJob struct {
	Name     string           `json:"name"`
	Schedule string           `json:"schedule"`
	Kind     string           `json:"kind"`
	Resource string           `json:"resource"`
	Args     json.RawMessage  `json:"args,omitempty"`
	Policy   store.BusyPolicy `json:"policy,omitempty"`
	Priority int              `json:"priority,omitempty"`
	// NextRun is when the next period starts (the server's clock); absent if the schedule never
	// fires again.
	NextRun *time.Time `json:"next_run,omitempty"`
}

// PeriodicResponse answers GET /v1/periodic.
type PeriodicResponse struct {
	Periodic []PeriodicJob `json:"periodic"`
}

// PeriodicFrom converts a periodic job; next is the start of its next period (zero: never).
func PeriodicFrom(p *baton.PeriodicJob, next time.Time) PeriodicJob {
	j := PeriodicJob{Name: p.Name, Schedule: p.Schedule, Kind: p.Kind, Resource: p.Resource, Args: p.Args,
		Policy: p.Policy, Priority: p.Priority}
	if !next.IsZero() {
		next = next.UTC()
		j.NextRun = &next
	}
	return j
}

// Periodic converts back to a periodic job (NextRun is left out).
func (j *PeriodicJob) Periodic() baton.PeriodicJob {
	return baton.PeriodicJob{Name: j.Name, Schedule: j.Schedule, Kind: j.Kind, Resource: j.Resource, Args: j.Args,
		Policy: j.Policy, Priority: j.Priority}
}
