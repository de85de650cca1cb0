package client

import (
	"context"
	"net/http"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
)

// PeriodicJob is a periodic job of the server's configuration (baton serve --periodic-file),
// with when its next period starts on the server's clock (zero if never).
type PeriodicJob struct {
	baton.PeriodicJob
	NextRun time.Time
}

// PeriodicJobs lists the periodic jobs the server submits when it is the maintenance leader.
func (s *Store) PeriodicJobs(ctx context.Context) ([]PeriodicJob, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var resp wire.PeriodicResponse
	if err := s.do(ctx, http.MethodGet, "/v1/periodic", nil, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]PeriodicJob, len(resp.Periodic))
	for i, p := range resp.Periodic {
		out[i].PeriodicJob = p.Periodic()
		if p.NextRun != nil {
			out[i].NextRun = p.NextRun.UTC()
		}
	}
	return out, nil
}
