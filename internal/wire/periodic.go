package wire

import (
	"encoding/json"
	"time"

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
