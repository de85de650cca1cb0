package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// events lists the audit log (admin: it names every holder and every operator's reasons), oldest
// first, or newest first with order=desc; next_cursor pages on in the same order. A store
// that keeps no audit log (Redis, or one opened without it) answers 501 rather than an empty list,
// which would read as "nothing happened".
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ principal) {
	if !s.cfg.Store.Capabilities().Audit {
		writeProblem(w, newProblem(http.StatusNotImplemented, "not_implemented",
			fmt.Sprintf("this server's store (%s) keeps no audit log: events are recorded only on SQLite and PostgreSQL stores", s.cfg.StoreName)))
		return
	}
	q, ok := query(w, r)
	if !ok {
		return
	}
	p := &store.EventsParams{Key: q.Get("key")}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		p.NewestFirst = true
	default:
		writeProblem(w, invalidArg("order", "must be asc (oldest first, the default) or desc (newest first)"))
		return
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeProblem(w, invalidArg("cursor", "must be the next_cursor of a previous page"))
			return
		}
		p.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeProblem(w, invalidArg("limit", "must be an integer between 1 and "+strconv.Itoa(store.MaxListLimit)))
			return
		}
		p.Limit = n
	}
	evs, err := s.st.Events(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.EventsResponse{Events: make([]wire.Event, 0, len(evs))}
	for _, e := range evs {
		resp.Events = append(resp.Events, wire.EventFrom(e))
	}
	if len(evs) == p.Limit {
		resp.NextCursor = strconv.FormatUint(evs[len(evs)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, resp)
}
