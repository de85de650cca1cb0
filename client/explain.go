package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// ExplainResource asks the server why key would not be granted to a newcomer now
// (GET /v1/resources/{key}/explain).
func (s *Store) ExplainResource(ctx context.Context, key string) (*baton.Explanation, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	var resp wire.Explanation
	if err := s.do(ctx, http.MethodGet, "/v1/resources/"+keyPath(key)+"/explain", nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Baton(), nil
}

// ExplainJob asks the server why job id does not run now (GET /v1/jobs/{id}/explain).
func (s *Store) ExplainJob(ctx context.Context, id int64) (*baton.Explanation, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := checkJobID(id); err != nil {
		return nil, err
	}
	var resp wire.Explanation
	if err := s.do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatInt(id, 10)+"/explain", nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Baton(), nil
}
