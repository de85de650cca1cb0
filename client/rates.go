package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Rates of key prefixes over HTTP (store.RatePrefixer): PUT, GET and DELETE /v1/rates/{prefix},
// GET /v1/rates. Setting and deleting a rate are admin calls. A server whose store keeps none
// answers *store.UnsupportedError (GET /v1/info says so beforehand: "prefix_rates").

var _ store.RatePrefixer = (*Store)(nil)

// SetPrefixRate sets or changes the rate of p.Prefix. p.Actor is recorded only by a server
// without auth; with auth the token's name is.
func (s *Store) SetPrefixRate(ctx context.Context, p *store.SetPrefixRateParams) (*store.PrefixRate, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.PrefixRateResponse
	if err := s.do(ctx, http.MethodPut, "/v1/rates/"+keyPath(p.Prefix), nil,
		wire.SetPrefixRateRequest{Rate: p.Rate.String(), Actor: p.Actor}, &resp); err != nil {
		return nil, err
	}
	return resp.PrefixRate.Store(), nil
}

// DeletePrefixRate removes the rate of p.Prefix: store.ErrNotFound if it has none.
func (s *Store) DeletePrefixRate(ctx context.Context, p *store.DeletePrefixRateParams) error {
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
	var resp wire.DeletePrefixRateResponse
	return s.do(ctx, http.MethodDelete, "/v1/rates/"+keyPath(p.Prefix), q, nil, &resp)
}

// PrefixRates lists the rated prefixes in prefix order after p.After, at most p.Limit.
func (s *Store) PrefixRates(ctx context.Context, p *store.PrefixRatesParams) ([]*store.PrefixRate, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.After != "" {
		q.Set("cursor", p.After)
	}
	var resp wire.PrefixRatesResponse
	if err := s.do(ctx, http.MethodGet, "/v1/rates", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.PrefixRate, 0, len(resp.Rates))
	for i := range resp.Rates {
		out = append(out, resp.Rates[i].Store())
	}
	return out, nil
}

// PrefixRate returns the rate of prefix (GET /v1/rates/{prefix}): store.ErrNotFound if it has
// none.
func (s *Store) PrefixRate(ctx context.Context, prefix string) (*store.PrefixRate, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateRatePrefix(prefix); err != nil {
		return nil, err
	}
	var resp wire.PrefixRateResponse
	if err := s.do(ctx, http.MethodGet, "/v1/rates/"+keyPath(prefix), nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.PrefixRate.Store(), nil
}
