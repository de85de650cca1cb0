package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

var _ store.Fencer = (*Store)(nil)

// CheckFence implements store.Fencer with POST /v1/fences/check: the server's store raises the
// resource's fence to token, or answers stale_token with the greater one it keeps (returned
// here, with a nil error). A server whose store keeps no fences answers a *ProblemError with
// code not_implemented.
func (s *Store) CheckFence(ctx context.Context, resource string, token uint64) (uint64, error) {
	if err := store.ValidateFence(resource, token); err != nil {
		return 0, err
	}
	var resp wire.FenceCheckResponse
	err := s.do(ctx, http.MethodPost, "/v1/fences/check", nil, wire.FenceCheckRequest{Resource: resource, Token: token}, &resp)
	var stale *staleFenceError
	switch {
	case errors.As(err, &stale):
		if stale.current <= token {
			return 0, fmt.Errorf("baton client: stale_token answer with current token %d for token %d", stale.current, token)
		}
		return stale.current, nil
	case err != nil:
		return 0, err
	case resp.Token != token:
		return 0, fmt.Errorf("baton client: the server passed token %d as %d", token, resp.Token)
	}
	return token, nil
}

// ResetFence implements store.Fencer with DELETE /v1/fences/{resource} (admin role). Without
// auth on the server, p.Actor is the actor the audit log names; with auth, the token's name is.
func (s *Store) ResetFence(ctx context.Context, p *store.ResetFenceParams) (uint64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	q := url.Values{"reason": {p.Reason}, "actor": {p.Actor}}
	var resp wire.FenceResetResponse
	if err := s.do(ctx, http.MethodDelete, "/v1/fences/"+keyPath(p.Resource), q, nil, &resp); err != nil {
		return 0, err
	}
	return resp.Token, nil
}

// staleFenceError carries a stale_token answer's current token to CheckFence.
type staleFenceError struct{ current uint64 }

func (e *staleFenceError) Error() string {
	return fmt.Sprintf("stale fencing token: token %d has been seen", e.current)
}
