package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Limits: named capacities of which an acquire takes one unit each (store.Limiter, on SQLite and
// PostgreSQL). Setting and deleting one is an admin call; reading them needs the read role. A
// store without limits answers 501 not_implemented naming the store and the feature, as it does
// an acquire that asks for shared mode, several resources or limits.

// limiter is the server's store as a store.Limiter, or false after answering 501.
func (s *Server) limiter(w http.ResponseWriter) (store.Limiter, bool) {
	if s.limits == nil {
		writeProblem(w, unsupportedProblem(&store.UnsupportedError{Store: s.storeName(), Feature: "limits"}))
		return nil, false
	}
	return s.limits, true
}

// storeName is the store's name for problems: the configured one, or "this".
func (s *Server) storeName() string {
	if s.cfg.StoreName == "" {
		return "this"
	}
	return s.cfg.StoreName
}

// unsupportedProblem is the 501 of a request the store cannot serve: its members store and
// feature name them.
func unsupportedProblem(u *store.UnsupportedError) *problem {
	p := newProblem(http.StatusNotImplemented, "not_implemented", u.Error())
	p.Store, p.Feature = u.Store, u.Feature
	return p
}

// limitName is the {name} of the path, checked.
func limitName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	var inv *store.InvalidArgumentError
	if err := store.ValidateLimitName(name); errors.As(err, &inv) {
		writeProblem(w, invalidArg("name", inv.Rule))
		return "", false
	}
	return name, true
}

func noLimit(name string) *problem {
	p := newProblem(http.StatusNotFound, "not_found", fmt.Sprintf("no limit %q (create it with PUT /v1/limits/{name} or baton limits set)", name))
	p.Limit = name
	return p
}

// setLimit is PUT /v1/limits/{name} {"capacity": N} (admin): it creates the limit or changes its
// capacity, and answers the limit with its use. A capacity lowered below the use evicts nobody.
func (s *Server) setLimit(w http.ResponseWriter, r *http.Request, who principal) {
	lim, ok := s.limiter(w)
	if !ok {
		return
	}
	name, ok := limitName(w, r)
	if !ok {
		return
	}
	var req wire.SetLimitRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Actor) > store.MaxHolderLen {
		writeProblem(w, invalidArg("actor", fmt.Sprintf("must be at most %d bytes", store.MaxHolderLen)))
		return
	}
	rate, err := req.StoreRate()
	if err != nil {
		writeProblem(w, invalid(err))
		return
	}
	p := &store.SetLimitParams{Name: name, Capacity: req.Capacity, Rate: rate, Actor: s.adminActor(who, req.Actor)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	l, err := do(s.gate, r.Context(), classKeep, func() (*store.Limit, error) { return lim.SetLimit(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("limit set", "limit", name, "capacity", p.Capacity, "rate", req.Rate, "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.LimitResponse{Limit: wire.LimitFrom(l, func(l *store.Lease) wire.Lease { return s.leaseFor(l, who) })})
}

// getLimit is GET /v1/limits/{name}: the limit with its use, holders and waiting count; 404 if
// there is none.
func (s *Server) getLimit(w http.ResponseWriter, r *http.Request, who principal) {
	lim, ok := s.limiter(w)
	if !ok {
		return
	}
	name, ok := limitName(w, r)
	if !ok {
		return
	}
	p := &store.LimitsParams{Name: name, Limit: 1}
	ls, err := do(s.gate, r.Context(), classNew, func() ([]*store.Limit, error) { return lim.Limits(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(ls) == 0 {
		writeProblem(w, noLimit(name))
		return
	}
	writeJSON(w, http.StatusOK, wire.LimitResponse{Limit: wire.LimitFrom(ls[0], func(l *store.Lease) wire.Lease { return s.leaseFor(l, who) })})
}

// listLimits is GET /v1/limits?cursor=NAME&limit=N: limits in name order; next_cursor pages on.
func (s *Server) listLimits(w http.ResponseWriter, r *http.Request, who principal) {
	lim, ok := s.limiter(w)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "the limits list", "cursor", "limit")
	if !ok {
		return
	}
	n, ok := queryLimit(w, q.Get("limit"))
	if !ok {
		return
	}
	if n == 0 {
		n = store.DefaultListSize
	}
	p := &store.LimitsParams{After: q.Get("cursor"), Limit: n}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	ls, err := do(s.gate, r.Context(), classNew, func() ([]*store.Limit, error) { return lim.Limits(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.LimitsResponse{Limits: make([]wire.Limit, 0, len(ls))}
	for _, l := range ls {
		resp.Limits = append(resp.Limits, wire.LimitFrom(l, func(l *store.Lease) wire.Lease { return s.leaseFor(l, who) }))
	}
	if len(ls) == p.Limit {
		resp.NextCursor = ls[len(ls)-1].Name
	}
	writeJSON(w, http.StatusOK, resp)
}

// deleteLimit is DELETE /v1/limits/{name} (admin): 404 if there is no such limit, 409
// limit_in_use (limit, in_use) while live leases hold units of it.
func (s *Server) deleteLimit(w http.ResponseWriter, r *http.Request, who principal) {
	lim, ok := s.limiter(w)
	if !ok {
		return
	}
	name, ok := limitName(w, r)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "a limit's deletion", "actor")
	if !ok {
		return
	}
	p := &store.DeleteLimitParams{Name: name, Actor: s.adminActor(who, q.Get("actor"))}
	_, err := do(s.gate, r.Context(), classKeep, func() (struct{}, error) { return struct{}{}, lim.DeleteLimit(r.Context(), p) })
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, noLimit(name))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("limit deleted", "limit", name, "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.DeleteLimitResponse{Name: name, Deleted: true})
}
