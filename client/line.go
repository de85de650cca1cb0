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

// ErrNoLine: the server's store keeps no line per key (its GET /v1/info says line false), so
// ResourceLine cannot be answered.
var ErrNoLine = errors.New("baton client: the server's store keeps no line of waiters")

// ResourceLine returns key's holder, rest and line (at most limit tickets, 1..MaxListLimit),
// read by the server's store at one instant. A key nobody holds, waits for or rests is returned
// empty. Lease IDs of the holder and of lock tickets are empty unless the token may see them
// (an admin, or their owner).
func (s *Store) ResourceLine(ctx context.Context, key string, limit int) (*store.ResourceLine, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := store.ValidateListLimit(limit); err != nil {
		return nil, err
	}
	var resp wire.Resource
	q := url.Values{"line_limit": {strconv.Itoa(limit)}}
	err := s.do(ctx, http.MethodGet, "/v1/resources/"+keyPath(key), q, nil, &resp)
	if errors.Is(err, store.ErrNotFound) {
		// Nothing at all on the key, or a server that keeps no line: the server says which.
		info, ierr := s.serverInfo(ctx)
		if ierr != nil {
			return nil, ierr
		}
		if !info.Line {
			return nil, ErrNoLine
		}
		return &store.ResourceLine{Key: key}, nil
	}
	if err != nil {
		return nil, err
	}
	l := resp.StoreLine()
	if l == nil {
		return nil, ErrNoLine
	}
	return l, nil
}
