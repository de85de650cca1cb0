package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// PeriodicJob is a periodic job of the server's configuration (baton serve --periodic-file).
type PeriodicJob struct {
	Name     string
	Schedule string
	Kind     string
	Resource string
	Args     json.RawMessage
	Policy   store.BusyPolicy
	Priority int
	// NextRun is when its next period starts, on the server's clock (zero if never).
	NextRun time.Time
}

// PeriodicJobs lists the periodic jobs the server submits when it is the maintenance leader.
func (s *Store) PeriodicJobs(ctx context.Context) ([]PeriodicJob, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var resp wire.PeriodicResponse
	if err := s.do(ctx, http.MethodGet, "/v1/periodic", nil, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]PeriodicJob, len(resp.Periodic))
	for i, p := range resp.Periodic {
		out[i] = PeriodicJob{Name: p.Name, Schedule: p.Schedule, Kind: p.Kind, Resource: p.Resource, Args: p.Args,
			Policy: p.Policy, Priority: p.Priority}
		if p.NextRun != nil {
			out[i].NextRun = p.NextRun.UTC()
		}
	}
	return out, nil
}
