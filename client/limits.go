package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Limits over HTTP (store.Limiter): PUT, GET and DELETE /v1/limits/{name}, GET /v1/limits.
// Setting and deleting a limit are admin calls. A server whose store keeps no limits answers
// *store.UnsupportedError; Capabilities().Limits says so beforehand.

var _ store.Limiter = (*Store)(nil)

// SetLimit creates the limit p.Name or changes its capacity. p.Actor is recorded only by a
// server without auth; with auth the token's name is.
func (s *Store) SetLimit(ctx context.Context, p *store.SetLimitParams) (*store.Limit, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	req := wire.SetLimitRequest{Capacity: p.Capacity, Actor: p.Actor}
	if p.Rate != nil {
		req.Rate = p.Rate.String()
	}
	var resp wire.LimitResponse
	if err := s.do(ctx, http.MethodPut, "/v1/limits/"+keyPath(p.Name), nil, req, &resp); err != nil {
		return nil, err
	}
	return resp.Limit.Store(), nil
}

// DeleteLimit deletes a limit no live lease holds: store.ErrNotFound if there is none,
// *store.LimitInUseError while it is held.
func (s *Store) DeleteLimit(ctx context.Context, p *store.DeleteLimitParams) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	var q url.Values
	if p.Actor != "" {
		q = url.Values{"actor": {p.Actor}}
	}
	var resp wire.DeleteLimitResponse
	return s.do(ctx, http.MethodDelete, "/v1/limits/"+keyPath(p.Name), q, nil, &resp)
}

// Limits lists limits in name order after p.After, at most p.Limit; with p.Name, that limit
// alone (none if it does not exist).
func (s *Store) Limits(ctx context.Context, p *store.LimitsParams) ([]*store.Limit, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Name != "" {
		if p.After != "" && p.Name <= p.After {
			return nil, nil
		}
		var resp wire.LimitResponse
		err := s.do(ctx, http.MethodGet, "/v1/limits/"+keyPath(p.Name), nil, nil, &resp)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*store.Limit{resp.Limit.Store()}, nil
	}
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.After != "" {
		q.Set("cursor", p.After)
	}
	var resp wire.LimitsResponse
	if err := s.do(ctx, http.MethodGet, "/v1/limits", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.Limit, 0, len(resp.Limits))
	for i := range resp.Limits {
		out = append(out, resp.Limits[i].Store())
	}
	return out, nil
}
