package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Resources: what jobs run on. A resource's state is what kinds' guards check and set; setting
// it by hand overrides them, so it is an admin call.

func (s *Server) listResources(w http.ResponseWriter, r *http.Request, _ principal) {
	q, ok := query(w, r)
	if !ok {
		return
	}
	p := &store.ResourceListParams{Prefix: q.Get("prefix"), After: q.Get("after")}
	limit, ok := queryLimit(w, q.Get("limit"))
	if !ok {
		return
	}
	p.Limit = limit
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	rs, err := s.jobs.ListResources(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.ResourcesResponse{Resources: make([]wire.Resource, len(rs))}
	for i, res := range rs {
		resp.Resources[i] = wire.ResourceFrom(res)
	}
	if len(rs) == p.Limit {
		resp.NextAfter = rs[len(rs)-1].Key
	}
	writeJSON(w, http.StatusOK, resp)
}

func noResource(key string) string {
	return fmt.Sprintf("no resource %q: no job or state was ever recorded for it", key)
}

// DefaultLineLimit is how many tickets of a resource's line GET /v1/resources/{key} returns
// without line_limit.
const DefaultLineLimit = 100

// getResource answers the resource object; on a store with a line (store.LineReader), with its
// holder, rest and line. A key without a resources row (a lock-only key) is a resource too while
// someone holds it, waits for it or it rests.
func (s *Server) getResource(w http.ResponseWriter, r *http.Request, who principal) {
	key := r.PathValue("key")
	if k, ok := strings.CutSuffix(key, "/explain"); ok {
		s.explainResource(w, r, k)
		return
	}
	if err := store.ValidateResource(key); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	q, ok := query(w, r)
	if !ok {
		return
	}
	lineLimit, ok := queryBound(w, "line_limit", q.Get("line_limit"))
	if !ok {
		return
	}
	if lineLimit == 0 {
		lineLimit = DefaultLineLimit
	}
	res, err := s.jobs.GetResource(r.Context(), key)
	if err != nil && (s.line == nil || !errors.Is(err, store.ErrNotFound)) {
		s.writeJobError(w, r, err, noResource(key))
		return
	}
	if s.line == nil {
		writeJSON(w, http.StatusOK, wire.ResourceFrom(res))
		return
	}
	l, err := s.line.ResourceLine(r.Context(), key, lineLimit)
	if err != nil {
		s.writeJobError(w, r, err, noResource(key))
		return
	}
	if res == nil {
		if l.Holder == nil && l.Rest == nil && len(l.Tickets) == 0 && l.Tree == "" {
			writeProblem(w, newProblem(http.StatusNotFound, "not_found",
				fmt.Sprintf("no resource %q: no job or state was ever recorded for it, and nobody holds it, waits for it or rests it", key)))
			return
		}
		res = &store.Resource{Key: key}
	}
	out := wire.ResourceFrom(res)
	out.LineFrom(l, time.Now())
	if out.Holder != nil && !s.seesLeaseID(l.Holder.Owner, who) {
		out.Holder.LeaseID = ""
	}
	for _, hs := range [][]wire.Holder{out.Holders, out.Related} {
		for i := range hs {
			if !s.seesLeaseID(hs[i].Owner, who) {
				hs[i].LeaseID = ""
			}
		}
	}
	for i := range out.Line {
		if !s.seesLeaseID(out.Line[i].Owner, who) {
			out.Line[i].LeaseID = ""
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// resourceKey is the key of a /v1/resources/{key}/ACTION route: the path between the prefix and
// the last suffix (a wildcard cannot be followed by more of the pattern). Without the suffix it
// answers 404, naming the route (hint).
func resourceKey(w http.ResponseWriter, r *http.Request, suffix, hint string) (string, bool) {
	key, ok := strings.CutSuffix(r.PathValue("key"), suffix)
	if !ok {
		writeProblem(w, newProblem(http.StatusNotFound, "not_found",
			fmt.Sprintf("no such endpoint: %s %s (%s)", r.Method, r.URL.Path, hint)))
	}
	return key, ok
}

// setResourceState is PUT /v1/resources/{key}/state: the key is the path between the prefix and
// the last "/state" (a wildcard cannot be followed by more of the pattern).
func (s *Server) setResourceState(w http.ResponseWriter, r *http.Request, _ principal) {
	key, ok := resourceKey(w, r, "/state", "set a resource's state with PUT /v1/resources/{key}/state")
	if !ok {
		return
	}
	var req wire.SetResourceStateRequest
	if !decode(w, r, &req) || reserved(w, "key", key) {
		return
	}
	p := &store.SetResourceStateParams{Key: key, State: req.State, IfVersion: req.IfVersion}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	res, err := s.jobs.SetResourceState(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, noResource(key))
		return
	}
	writeJSON(w, http.StatusOK, wire.ResourceFrom(res))
}
