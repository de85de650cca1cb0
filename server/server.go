// Package server is Baton's HTTP API over any store.Store: the lease calls of package baton for
// any language, with bearer-token auth, Prometheus metrics and health endpoints. The API is
// documented in docs/http-api.md.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// DefaultMaxWait bounds how long one acquire request may wait for a key (a long-poll).
const DefaultMaxWait = 30 * time.Second

// Config configures a Server.
type Config struct {
	Store store.Store
	// Auth is nil for no authentication: every caller is admin. The serve command only allows
	// that on loopback addresses.
	Auth    *Auth
	Logger  *slog.Logger
	MaxWait time.Duration // DefaultMaxWait if zero
	// Version and StoreName are reported by GET /v1/info.
	Version   string
	StoreName string
}

// Server serves the HTTP API. Close it before closing its store.
type Server struct {
	cfg     Config
	log     *slog.Logger
	locker  *baton.Locker
	metrics *metrics
	handler http.Handler
	// ctx ends when the server closes, so that waiting acquires return at once.
	ctx    context.Context
	cancel context.CancelFunc
}

// New builds a server over cfg.Store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, &store.InvalidArgumentError{Field: "store", Rule: "must not be nil"}
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.MaxWait < 0 || cfg.MaxWait > 10*time.Minute {
		return nil, &store.InvalidArgumentError{Field: "max_wait", Rule: "must be between 0 and 10m"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	locker, err := baton.NewLocker(cfg.Store, &baton.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: cfg.Logger, locker: locker, metrics: newMetrics(cfg.Store), ctx: ctx, cancel: cancel}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API, metrics and health endpoints.
func (s *Server) Handler() http.Handler { return s.handler }

// Close makes waiting acquire requests return at once. It does not close the store.
func (s *Server) Close() error {
	s.cancel()
	return nil
}

// route declares one endpoint: its path, method, role and handler.
type route struct {
	path, method, name string
	role               Role
	h                  func(http.ResponseWriter, *http.Request, principal)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// Paths are registered without methods and the method is checked here, so that a wrong
	// method gets a problem document like every other error.
	byPath := map[string][]route{}
	for _, rt := range []route{
		{"/v1/locks/acquire", http.MethodPost, "acquire", RoleWrite, s.acquire},
		{"/v1/locks/renew", http.MethodPost, "renew", RoleWrite, s.renew},
		{"/v1/locks/release", http.MethodPost, "release", RoleWrite, s.release},
		{"/v1/locks/force-release", http.MethodPost, "force_release", RoleAdmin, s.forceRelease},
		{"/v1/locks/{key...}", http.MethodGet, "get", RoleRead, s.get},
		{"/v1/locks", http.MethodGet, "list", RoleRead, s.list},
		{"/v1/events", http.MethodGet, "events", RoleAdmin, s.events},
		{"/v1/info", http.MethodGet, "info", RoleRead, s.info},
		{"/healthz", http.MethodGet, "healthz", RoleNone, s.healthz},
		{"/readyz", http.MethodGet, "readyz", RoleNone, s.readyz},
		{"/metrics", http.MethodGet, "metrics", RoleNone, func(w http.ResponseWriter, r *http.Request, _ principal) {
			s.metrics.handler().ServeHTTP(w, r)
		}},
	} {
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for path, rts := range byPath {
		mux.HandleFunc(path, s.metrics.observeRoute(rts[0].name, func(w http.ResponseWriter, r *http.Request) {
			for _, rt := range rts {
				if r.Method == rt.method || (rt.method == http.MethodGet && r.Method == http.MethodHead) {
					if p, ok := s.authorize(w, r, rt.role); ok {
						rt.h(w, r, p)
					}
					return
				}
			}
			// GET /v1/locks/acquire and friends name keys called "acquire", "renew", …
			if r.Method == http.MethodGet && len(r.URL.Path) > len("/v1/locks/") && r.URL.Path[:len("/v1/locks/")] == "/v1/locks/" {
				if p, ok := s.authorize(w, r, RoleRead); ok {
					s.getKey(w, r, r.URL.Path[len("/v1/locks/"):], p)
				}
				return
			}
			w.Header().Set("Allow", rts[0].method)
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, rts[0].method)))
		}))
	}
	mux.HandleFunc("/", notFound)
	return s.recoverPanics(mux)
}

// recoverPanics turns a bug into a logged 500 instead of a dropped connection.
func (s *Server) recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeProblem(w, newProblem(http.StatusInternalServerError, "internal", "internal error; see the server log"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ principal) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz asks the store for a key nobody holds: any answer but an error means it is reachable.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.Get(ctx, "baton/readyz-probe"); err != nil && err != store.ErrNotFound {
		s.log.Warn("readyz: store unreachable", "err", err)
		writeProblem(w, newProblem(http.StatusServiceUnavailable, "unavailable", "the store did not answer"))
		return
	}
	s.healthz(w, r, principal{})
}

func (s *Server) info(w http.ResponseWriter, _ *http.Request, _ principal) {
	writeJSON(w, http.StatusOK, map[string]any{
		"version":        s.cfg.Version,
		"store":          s.cfg.StoreName,
		"fencing_tokens": s.cfg.Store.Capabilities().FencingTokens,
		"max_wait_ms":    s.cfg.MaxWait.Milliseconds(),
	})
}
