package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Trees: key prefixes under which "/" separates levels, so that a holder of a key holds its
// subtree and takes intention on its ancestors (store.Treer, on SQLite and PostgreSQL). The
// prefix is the rest of the path after /v1/trees/, its trailing "/" included
// (PUT /v1/trees/cluster/). Setting and deleting a tree is an admin call; reading them needs the
// read role. A store without trees answers 501 not_implemented naming the store and the feature,
// as it does the limit routes.

// treer is the server's store as a store.Treer, or false after answering 501.
func (s *Server) treer(w http.ResponseWriter) (store.Treer, bool) {
	if s.trees == nil {
		writeProblem(w, unsupportedProblem(&store.UnsupportedError{Store: s.storeName(), Feature: "trees"}))
		return nil, false
	}
	return s.trees, true
}

// treePrefix is the {prefix} of the path, checked: 400 naming prefix if it breaks a rule of tree
// prefixes; with write, 403 if it lies under the server's reserved keys.
func treePrefix(w http.ResponseWriter, r *http.Request, write bool) (string, bool) {
	prefix := r.PathValue("prefix")
	var inv *store.InvalidArgumentError
	if err := store.ValidateTreePrefix(prefix); errors.As(err, &inv) {
		writeProblem(w, invalidArg("prefix", inv.Rule))
		return "", false
	}
	if write && reserved(w, "prefix", prefix) {
		return "", false
	}
	return prefix, true
}

func noTree(prefix string) *problem {
	p := newProblem(http.StatusNotFound, "not_found", fmt.Sprintf("no tree %q (set it with PUT /v1/trees/{prefix} or baton resources set-tree)", prefix))
	p.Prefix = prefix
	return p
}

// treeInUseProblem is the 409 of a tree set or deleted while a key of it is live: it names the
// tree, the key and what lives there.
func treeInUseProblem(e *store.TreeInUseError) *problem {
	p := newProblem(http.StatusConflict, "tree_in_use", e.Error())
	p.Prefix, p.Key, p.What = e.Prefix, e.Key, e.What
	return p
}

// setTree is PUT /v1/trees/{prefix} with an optional body {"actor": A} (admin): it opts the
// prefix into a tree, or answers the tree it is already.
func (s *Server) setTree(w http.ResponseWriter, r *http.Request, who principal) {
	tr, ok := s.treer(w)
	if !ok {
		return
	}
	prefix, ok := treePrefix(w, r, true)
	if !ok {
		return
	}
	var req wire.SetTreeRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	p := &store.SetTreeParams{Prefix: prefix, Actor: s.adminActor(who, req.Actor), Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	t, err := do(s.gate, r.Context(), classKeep, func() (*store.Tree, error) { return tr.SetTree(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("tree set", "prefix", prefix, "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.TreeResponse{Tree: wire.TreeFrom(t)})
}

// getTree is GET /v1/trees/{prefix}: the tree; 404 if the prefix is none.
func (s *Server) getTree(w http.ResponseWriter, r *http.Request, _ principal) {
	tr, ok := s.treer(w)
	if !ok {
		return
	}
	prefix, ok := treePrefix(w, r, false)
	if !ok {
		return
	}
	t, err := do(s.gate, r.Context(), classNew, func() (*store.Tree, error) { return findTree(r, tr, prefix) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if t == nil {
		writeProblem(w, noTree(prefix))
		return
	}
	writeJSON(w, http.StatusOK, wire.TreeResponse{Tree: wire.TreeFrom(t)})
}

// findTree returns the tree of prefix, nil if there is none. Trees lists prefixes greater than a
// cursor; the root (the prefix without its "/") sorts before the prefix, and only trees whose
// prefix is the root followed by a byte below "/" ("cluster-a/") lie between the two.
func findTree(r *http.Request, tr store.Treer, prefix string) (*store.Tree, error) {
	p := &store.TreesParams{After: store.TreeRoot(prefix), Limit: store.DefaultListSize}
	for {
		ts, err := tr.Trees(r.Context(), p)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Prefix >= prefix {
				if t.Prefix == prefix {
					return t, nil
				}
				return nil, nil
			}
		}
		if len(ts) < p.Limit {
			return nil, nil
		}
		p.After = ts[len(ts)-1].Prefix
	}
}

// listTrees is GET /v1/trees?cursor=PREFIX&limit=N: trees in prefix order; next_cursor pages on.
func (s *Server) listTrees(w http.ResponseWriter, r *http.Request, _ principal) {
	tr, ok := s.treer(w)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "the trees list", "cursor", "limit")
	if !ok {
		return
	}
	n, ok := queryLimit(w, q.Get("limit"))
	if !ok {
		return
	}
	p := &store.TreesParams{After: q.Get("cursor"), Limit: n}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	ts, err := do(s.gate, r.Context(), classNew, func() ([]*store.Tree, error) { return tr.Trees(r.Context(), p) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.TreesResponse{Trees: make([]wire.Tree, 0, len(ts))}
	for _, t := range ts {
		resp.Trees = append(resp.Trees, wire.TreeFrom(t))
	}
	if len(ts) == p.Limit {
		resp.NextCursor = ts[len(ts)-1].Prefix
	}
	writeJSON(w, http.StatusOK, resp)
}

// deleteTree is DELETE /v1/trees/{prefix}?actor=A (admin): 404 if the prefix is no tree, 409
// tree_in_use (prefix, key, what) while a key of it is live.
func (s *Server) deleteTree(w http.ResponseWriter, r *http.Request, who principal) {
	tr, ok := s.treer(w)
	if !ok {
		return
	}
	prefix, ok := treePrefix(w, r, true)
	if !ok {
		return
	}
	q, ok := queryOnly(w, r, "a tree's deletion", "actor")
	if !ok {
		return
	}
	p := &store.DeleteTreeParams{Prefix: prefix, Actor: s.adminActor(who, q.Get("actor")), Principal: s.owner(who)}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	_, err := do(s.gate, r.Context(), classKeep, func() (struct{}, error) { return struct{}{}, tr.DeleteTree(r.Context(), p) })
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, noTree(prefix))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("tree deleted", "prefix", prefix, "actor", p.Actor)
	writeJSON(w, http.StatusOK, wire.DeleteTreeResponse{Prefix: prefix, Deleted: true})
}
