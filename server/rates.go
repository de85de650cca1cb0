package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Rates of key prefixes (store.RatePrefixer, on SQLite and PostgreSQL): every grant of a key
// under a rated prefix, lease or job attempt, counts against its rate. The prefix is the rest of
// the path after /v1/rates/ (PUT /v1/rates/cluster/ {"rate": "20/1m"}). Setting and deleting a
// rate is an admin call; reading them needs the read role. A store without them answers 501
// not_implemented naming the store and the feature, as the tree routes do.

// prefixRater is the server's store as a store.RatePrefixer, or false after answering 501.
func (s *Server) prefixRater(w http.ResponseWriter) (store.RatePrefixer, bool) {
	if s.rates == nil {
		writeProblem(w, unsupportedProblem(&store.UnsupportedError{Store: s.storeName(), Feature: "prefix rates"}))
		return nil, false
	}
	return s.rates, true
}

// ratePrefix is the {prefix} of the path, checked: 400 naming prefix if it breaks the rules of a
// key; with write, 403 if it lies under the server's reserved keys.
func ratePrefix(w http.ResponseWriter, r *http.Request, write bool) (string, bool) {
	prefix := r.PathValue("prefix")
	var inv *store.InvalidArgumentError
	if err := store.ValidateRatePrefix(prefix); errors.As(err, &inv) {
		writeProblem(w, invalidArg("prefix", inv.Rule))
		return "", false
	}
	if write && reserved(w, "prefix", prefix) {
		return "", false
	}
	return prefix, true
}

func noPrefixRate(prefix string) *problem {
	p := newProblem(http.StatusNotFound, "not_found", fmt.Sprintf("no rate on prefix %q (set it with PUT /v1/rates/{prefix} or baton rates set)", prefix))
	p.Prefix = prefix
	return p
}

// setPrefixRate is PUT /v1/rates/{prefix} {"rate": "20/1m"} (admin): it sets or changes the
// prefix's rate and answers it.
func (s *Server) setPrefixRate(w http.ResponseWriter, r *http.Request, who principal) {
	rp, ok := s.prefixRater(w)
	if !ok {
		return
	}
	prefix, ok := ratePrefix(w, r, true)
	if !ok {
		return
	}
	var req wire.SetPrefixRateRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Rate == "" {
		writeProblem(w, invalidArg("rate", `is required: "MAX/WINDOW", such as "20/1m"`))
		return
	}
	rate, err := store.ParseRate("rate", req.Rate)
	if err != nil {
		writeProblem(w, invalid(err))
		return
	}
	p := &store.SetPrefixRateParams{Prefix: prefix, Rate: rate, Actor: s.adminActor(who, req.Actor), Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	pr, err := do(s.gate, r.Context(), classKeep, func() (*store.PrefixRate, error) { return rp.SetPrefixRate(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("prefix rate set", "prefix", prefix, "rate", rate.String(), "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.PrefixRateResponse{PrefixRate: wire.PrefixRateFrom(pr)})
}

// getPrefixRate is GET /v1/rates/{prefix}: the prefix's rate; 404 if it has none.
func (s *Server) getPrefixRate(w http.ResponseWriter, r *http.Request, _ principal) {
	rp, ok := s.prefixRater(w)
	if !ok {
		return
	}
	prefix, ok := ratePrefix(w, r, false)
	if !ok {
		return
	}
	pr, err := do(s.gate, r.Context(), classNew, func() (*store.PrefixRate, error) { return findPrefixRate(r, rp, prefix) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if pr == nil {
		writeProblem(w, noPrefixRate(prefix))
		return
	}
	writeJSON(w, http.StatusOK, wire.PrefixRateResponse{PrefixRate: wire.PrefixRateFrom(pr)})
}

// findPrefixRate returns the rate of prefix, nil if it has none: the first listed at or after it.
func findPrefixRate(r *http.Request, rp store.RatePrefixer, prefix string) (*store.PrefixRate, error) {
	// The greatest string below prefix is not expressible; list from prefix minus its last byte
	// (which sorts before it) and read on until past it.
	p := &store.PrefixRatesParams{After: prefix[:len(prefix)-1], Limit: store.DefaultListSize}
	for {
		rs, err := rp.PrefixRates(r.Context(), p)
		if err != nil {
			return nil, err
		}
		for _, x := range rs {
			if x.Prefix == prefix {
				return x, nil
			}
			if x.Prefix > prefix {
				return nil, nil
			}
		}
		if len(rs) < p.Limit {
			return nil, nil
		}
		p.After = rs[len(rs)-1].Prefix
	}
}

// listPrefixRates is GET /v1/rates?cursor=PREFIX&limit=N: rated prefixes in prefix order;
// next_cursor pages on.
func (s *Server) listPrefixRates(w http.ResponseWriter, r *http.Request, _ principal) {
	rp, ok := s.prefixRater(w)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "the rates list", "cursor", "limit")
	if !ok {
		return
	}
	n, ok := queryLimit(w, q.Get("limit"))
	if !ok {
		return
	}
	p := &store.PrefixRatesParams{After: q.Get("cursor"), Limit: n}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	rs, err := do(s.gate, r.Context(), classNew, func() ([]*store.PrefixRate, error) { return rp.PrefixRates(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.PrefixRatesResponse{Rates: make([]wire.PrefixRate, 0, len(rs))}
	for _, x := range rs {
		resp.Rates = append(resp.Rates, wire.PrefixRateFrom(x))
	}
	if len(rs) == p.Limit {
		resp.NextCursor = rs[len(rs)-1].Prefix
	}
	writeJSON(w, http.StatusOK, resp)
}

// deletePrefixRate is DELETE /v1/rates/{prefix}?actor=A (admin): 404 if the prefix has no rate.
func (s *Server) deletePrefixRate(w http.ResponseWriter, r *http.Request, who principal) {
	rp, ok := s.prefixRater(w)
	if !ok {
		return
	}
	prefix, ok := ratePrefix(w, r, true)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "a rate's deletion", "actor")
	if !ok {
		return
	}
	p := &store.DeletePrefixRateParams{Prefix: prefix, Actor: s.adminActor(who, q.Get("actor")), Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	_, err := do(s.gate, r.Context(), classKeep, func() (struct{}, error) { return struct{}{}, rp.DeletePrefixRate(r.Context(), p) })
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, noPrefixRate(prefix))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("prefix rate deleted", "prefix", prefix, "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.DeletePrefixRateResponse{Prefix: prefix, Deleted: true})
}
