package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/batonhq/baton/store"
)

type eventJSON struct {
	ID      uint64    `json:"id"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Key     string    `json:"key"`
	LeaseID string    `json:"lease_id"`
	Holder  string    `json:"holder"`
	Token   uint64    `json:"token"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason,omitempty"`
}

type eventsResponse struct {
	Events     []eventJSON `json:"events"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// events lists the audit log (admin: it names every holder and every operator's reasons).
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ principal) {
	q := r.URL.Query()
	p := &store.EventsParams{Key: q.Get("key")}
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
	evs, err := s.cfg.Store.Events(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := eventsResponse{Events: make([]eventJSON, 0, len(evs))}
	for _, e := range evs {
		resp.Events = append(resp.Events, eventJSON{ID: e.ID, At: e.At.UTC(), Kind: e.Kind, Key: e.Key, LeaseID: e.LeaseID,
			Holder: e.Holder, Token: e.Token, Actor: e.Actor, Reason: e.Reason})
	}
	if len(evs) == p.Limit {
		resp.NextCursor = strconv.FormatUint(evs[len(evs)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, resp)
}
