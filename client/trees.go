package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Trees over HTTP (store.Treer): PUT, GET and DELETE /v1/trees/{prefix}, GET /v1/trees. Setting
// and deleting a tree are admin calls. A server whose store keeps no trees answers
// *store.UnsupportedError (GET /v1/info says so beforehand: "trees").

var _ store.Treer = (*Store)(nil)

// SetTree opts p.Prefix into a tree, or returns the tree it is already. p.Actor is recorded
// only by a server without auth; with auth the token's name is.
func (s *Store) SetTree(ctx context.Context, p *store.SetTreeParams) (*store.Tree, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.TreeResponse
	if err := s.do(ctx, http.MethodPut, "/v1/trees/"+keyPath(p.Prefix), nil,
		wire.SetTreeRequest{Actor: p.Actor}, &resp); err != nil {
		return nil, err
	}
	return resp.Tree.Store(), nil
}

// DeleteTree returns the keys of p.Prefix to the rules of flat keys: store.ErrNotFound if it is
// no tree, *store.TreeInUseError while a key of it is live.
func (s *Store) DeleteTree(ctx context.Context, p *store.DeleteTreeParams) error {
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
	var resp wire.DeleteTreeResponse
	return s.do(ctx, http.MethodDelete, "/v1/trees/"+keyPath(p.Prefix), q, nil, &resp)
}

// Trees lists trees in prefix order after p.After, at most p.Limit.
func (s *Store) Trees(ctx context.Context, p *store.TreesParams) ([]*store.Tree, error) {
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
	var resp wire.TreesResponse
	if err := s.do(ctx, http.MethodGet, "/v1/trees", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.Tree, 0, len(resp.Trees))
	for i := range resp.Trees {
		out = append(out, resp.Trees[i].Store())
	}
	return out, nil
}

// Tree returns the tree of prefix (GET /v1/trees/{prefix}): store.ErrNotFound if there is none.
func (s *Store) Tree(ctx context.Context, prefix string) (*store.Tree, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateTreePrefix(prefix); err != nil {
		return nil, err
	}
	var resp wire.TreeResponse
	err := s.do(ctx, http.MethodGet, "/v1/trees/"+keyPath(prefix), nil, nil, &resp)
	if err != nil {
		return nil, err
	}
	return resp.Tree.Store(), nil
}
