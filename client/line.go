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

// *Store reads a key's line through GET /v1/resources/{key} (store.LineReader), when the
// server's store keeps one (Capabilities().Line).
var _ store.LineReader = (*Store)(nil)

// *Store is a store.LineWaiter, so that a baton.Locker waiting through it keeps its place in the
// key's line across its long-polls and leaves the line when it gives up.
var _ store.LineWaiter = (*Store)(nil)

// SubscribeAs is Subscribe: the server wakes the front of the line itself, by ending its
// long-poll with the lease.
func (s *Store) SubscribeAs(key, leaseID string) (<-chan struct{}, func()) {
	return s.hub.Subscribe(key)
}

// LeaveLine gives up the waiting acquire of key under leaseID (POST /v1/locks/leave): its
// long-poll on the server ends, if one is still there, and its ticket leaves the key's line, so
// that the next in line does not wait for it to expire. The server takes the owner from the
// caller's token; owner is ignored. A server without the route (an older version) answers
// ErrNoSuchRoute; it removed the ticket when the long-poll was abandoned.
func (s *Store) LeaveLine(ctx context.Context, key, leaseID, owner string) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	if err := store.ValidateKey(key); err != nil {
		return err
	}
	if err := store.ValidateLeaseID(leaseID); err != nil {
		return err
	}
	var resp wire.LeaveResponse
	return s.do(ctx, http.MethodPost, "/v1/locks/leave", nil, wire.LeaveRequest{Key: key, LeaseID: leaseID}, &resp)
}

// ErrNoLine: the server's store keeps no line per key (its GET /v1/info says line false), so
// ResourceLine cannot be answered.
var ErrNoLine = errors.New("baton client: the server's store keeps no line of waiters")

// ResourceLine returns key's holder, rest and line (at most limit tickets, 1..MaxListLimit),
// read by the server's store at one instant. A key nobody holds, waits for or rests is returned
// empty. Lease IDs of the holder and of lock tickets are empty unless the token may see them
// (an admin, or their owner).
func (s *Store) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	_, l, err := s.GetResourceLine(ctx, key, limit)
	if errors.Is(err, store.ErrNotFound) {
		// Nothing at all on the key, or a server that keeps no line: the server says which.
		info, ierr := s.serverInfo(ctx)
		if ierr != nil {
			return nil, ierr
		}
		if info.Line {
			return &store.ResourceLine{Key: key}, nil
		}
		err = ErrNoLine
	}
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, ErrNoLine
	}
	return l, nil
}

// GetResourceLine is GetResource with the resource's holder, rest and line (at most limit
// tickets, 1..MaxListLimit), in one request. The line is nil if the server's store keeps none.
// A key with no job or state recorded is a resource (state "", version 0) while someone holds
// it, waits for it or it rests; a key with nothing at all is store.ErrNotFound.
func (s *Store) GetResourceLine(ctx context.Context, key string, limit int) (*store.Resource, *store.ResourceLine, error) {
	if err := s.closed.Check(); err != nil {
		return nil, nil, err
	}
	if err := store.ValidateResource(key); err != nil {
		return nil, nil, err
	}
	if err := store.ValidateListLimit(limit); err != nil {
		return nil, nil, err
	}
	var resp wire.Resource
	q := url.Values{"line_limit": {strconv.Itoa(limit)}}
	if err := s.do(ctx, http.MethodGet, "/v1/resources/"+keyPath(key), q, nil, &resp); err != nil {
		return nil, nil, err
	}
	return resp.Store(), resp.StoreLine(), nil
}
