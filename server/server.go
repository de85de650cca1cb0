// Package server is Baton's HTTP API over any store.Store: the lease calls of package baton for
// any language, with bearer-token auth, Prometheus metrics and health endpoints; and, when the
// store is also a store.JobStore, the job queue (submit, administer, and remote workers). The
// API is documented in docs/http-api.md.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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
	// MaxInflight bounds the API's store calls in flight at once. Calls past it wait for a slot:
	// renewals, releases and job heartbeats and ends first. Zero means twice the store's
	// Parallelism but at least 8 (8 on SQLite, twice the pool on PostgreSQL, at most 64), so
	// that the priority holds where the store queues, or DefaultMaxInflight for stores that do
	// not report one.
	MaxInflight int
	// MaxQueue bounds the calls waiting for a slot (DefaultMaxQueue if zero; negative: no
	// bound). Past it, acquires, gets, listings, job submits and claims are answered 503
	// "overloaded" with Retry-After; renewals, releases and job heartbeats and ends have a
	// budget four times as large of their own.
	MaxQueue int
	// MaxQueueWait bounds how far behind the store may fall before new work is shed: once the
	// oldest waiting acquire, get, listing, submit or claim has waited this long, new ones are
	// answered 503 "overloaded" with Retry-After until the queue catches up
	// (DefaultMaxQueueWait if zero; negative: no bound). Renewals, releases and job heartbeats
	// and ends are never shed for time.
	MaxQueueWait time.Duration
	// Version and StoreName are reported by GET /v1/info.
	Version   string
	StoreName string
	// Periodic are the periodic jobs this server's maintenance runner submits when it leads
	// (baton serve --periodic-file), listed by GET /v1/periodic.
	Periodic []baton.PeriodicJob
	// Revision is the VCS revision the server was built from, exported with Version and the Go
	// version in the baton_build_info gauge.
	Revision string
	// AllowedHosts are host names or IP addresses (without a port) that requests may name in
	// their Host header besides loopback addresses, localhost and *.localhost (host.go): without
	// Auth, every other Host is refused with 403, against DNS rebinding. With Auth, the Host is
	// checked only if AllowedHosts is set.
	AllowedHosts []string
	// ListenAddr is the address the server listens on (host:port); its host, unless it is an
	// unspecified address (0.0.0.0, ::), is an allowed Host too.
	ListenAddr string
	// BodyTimeout bounds the reading of a request's body, from the end of its headers
	// (DefaultBodyTimeout if zero; negative: no bound). A body late past it is answered 408.
	BodyTimeout time.Duration
	// MaxConns bounds the client connections open at once on the listeners of HTTPServer; one
	// over it is answered 503 and closed at once. Zero means DefaultMaxConns, or half the
	// process's open-file limit if that is lower; negative: no bound.
	MaxConns int
}

// Server serves the HTTP API. Close it before closing its store.
type Server struct {
	cfg   Config
	hosts *hostCheck // nil: no Host check
	conns *connCap   // the listeners' bound (HTTPServer)
	// refusals counts and logs requests refused for who sent them (refusals.go).
	refusals *refusals
	// batchBudget bounds the job batch bodies decoded at once (body_budget.go).
	batchBudget *bodyBudget
	// st is cfg.Store behind the admission gate: the API's lease calls go through it.
	st      store.Store
	gate    *gate
	log     *slog.Logger
	locker  *baton.Locker
	metrics *metrics
	// jobs is the store as a job store, nil if it is not one (the job routes answer 501).
	jobs       store.JobStore
	jobMetrics *jobMetrics
	// line is the store as a line reader, behind the gate; nil if it keeps no line.
	line store.LineReader
	// limits is the store as a store.Limiter, nil if it keeps no limits (the limit routes
	// answer 501).
	limits store.Limiter
	// rates is the store as a store.RatePrefixer, nil if it keeps no prefix rates (the rate
	// routes answer 501).
	rates store.RatePrefixer
	// trees is the store as a store.Treer, nil if it keeps no trees (the tree routes answer
	// 501).
	trees store.Treer
	// acquires follows acquisitions across their requests (one contention per acquisition).
	acquires *acquireTracker
	// claimPoll is the fallback re-poll of a waiting claim, jittered (the store's wake-ups are
	// hints that do not cross processes on every store).
	claimPoll time.Duration
	// claimWaits are the waiting claims a client may stop (claim_stop.go).
	claimWaits *namedWaits
	// lineWaits are the waiting acquires with a client's lease ID, which leave ends
	// (line_leave.go).
	lineWaits *namedWaits
	handler   http.Handler
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
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultMaxInflight
		if p, ok := cfg.Store.(store.Parallelism); ok && p.Parallelism() > 0 {
			cfg.MaxInflight = min(DefaultMaxInflight, max(8, 2*p.Parallelism()))
		}
	}
	if cfg.MaxInflight < 0 || cfg.MaxInflight > 100000 {
		return nil, &store.InvalidArgumentError{Field: "max_inflight", Rule: "must be between 1 and 100000"}
	}
	if err := baton.ValidatePeriodic(cfg.Periodic); err != nil {
		return nil, err
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.MaxQueueWait == 0 {
		cfg.MaxQueueWait = DefaultMaxQueueWait
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.BodyTimeout > 10*time.Minute {
		return nil, &store.InvalidArgumentError{Field: "body_timeout", Rule: "must be at most 10m (negative: no bound)"}
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = defaultMaxConns()
	}
	hosts, err := newHostCheck(cfg.Auth != nil, cfg.AllowedHosts, cfg.ListenAddr)
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	m.registry.MustRegister(buildInfo(cfg.Version, cfg.Revision))
	g := newGate(cfg.MaxInflight, cfg.MaxQueue, cfg.MaxQueueWait, m.registry)
	st := &gatedStore{Store: cfg.Store, g: g}
	m.registry.MustRegister(newHeldGauge(cfg.Store, g))
	locker, err := baton.NewLocker(st, &baton.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, hosts: hosts, conns: newConnCap(cfg.MaxConns, m.registry), refusals: newRefusals(m.registry, cfg.Logger),
		batchBudget: newBodyBudget(batchBudget, batchQueue, m.registry),
		st:          st, gate: g, log: cfg.Logger, locker: locker, metrics: m, ctx: ctx, cancel: cancel,
		claimPoll: defaultClaimPoll, acquires: newAcquireTracker(2*cfg.MaxWait + time.Minute),
		claimWaits: newNamedWaits(cfg.MaxWait + time.Minute), lineWaits: newNamedWaits(cfg.MaxWait + time.Minute)}
	if js, ok := cfg.Store.(store.JobStore); ok {
		s.jobs = &gatedJobs{JobStore: js, g: g}
	}
	if lr, ok := cfg.Store.(store.LineReader); ok {
		s.line = &gatedLine{LineReader: lr, g: g}
	}
	if lim, ok := cfg.Store.(store.Limiter); ok && cfg.Store.Capabilities().Limits {
		s.limits = lim
		m.registry.MustRegister(newLimitGauges(lim, g))
	}
	if tr, ok := cfg.Store.(store.Treer); ok {
		s.trees = tr
	}
	if rp, ok := cfg.Store.(store.RatePrefixer); ok {
		s.rates = rp
	}
	s.jobMetrics = newJobMetrics(s.metrics.registry, s.jobs)
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API, metrics and health endpoints.
func (s *Server) Handler() http.Handler { return s.handler }

// Close makes waiting acquire and claim requests return at once. It does not close the store.
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
	for _, rt := range s.routeTable() {
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for path, rts := range byPath {
		mux.HandleFunc(path, s.metrics.observeRoute(rts[0].name, traced(path, func(w http.ResponseWriter, r *http.Request) {
			for _, rt := range rts {
				if r.Method == rt.method || (rt.method == http.MethodGet && r.Method == http.MethodHead) {
					if !s.sameOrigin(w, r) {
						return
					}
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
			// … and DELETE /v1/fences/check names the fence of a resource called "check".
			if r.Method == http.MethodDelete && r.URL.Path == "/v1/fences/check" {
				if !s.sameOrigin(w, r) {
					return
				}
				if p, ok := s.authorize(w, r, RoleAdmin); ok {
					s.resetFenceOf(w, r, "check", p)
				}
				return
			}
			methods := make([]string, len(rts))
			for i, rt := range rts {
				methods[i] = rt.method
			}
			allow := strings.Join(methods, ", ")
			w.Header().Set("Allow", allow)
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))))
		})))
	}
	// The dashboard's page and assets, and every unknown path, under two fixed route labels.
	dash := s.dashboard()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		route := "no_such_route"
		if isDashboardPath(r.URL.Path) {
			route = "dashboard"
		}
		s.metrics.observeRoute(route, dash.ServeHTTP)(w, r)
	})
	return s.bodyDeadline(s.checkHost(s.recoverPanics(refuseUncleanPaths(mux))))
}

// refuseUncleanPaths answers 400 to an API path with an empty, "." or ".." segment. ServeMux
// would redirect it to the cleaned path, which names another key ("/v1/resources/evil/../victim"
// becomes "/v1/resources/victim"), and a client that follows redirects (net/http resends a
// POST's body on a 307) would then act on a key it did not name. Escaped (%2F, %2E), such keys
// are reachable: ServeMux cleans the escaped path and unescapes wildcards after matching.
func refuseUncleanPaths(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if strings.HasPrefix(p, "/v1/") && hasUncleanSegment(p) {
			writeProblem(w, invalidArg("path", `must not contain empty, "." or ".." segments, which would name another path: `+
				`escape a key's "/" there as %2F, or its "." and ".." segments as %2E and %2E%2E`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hasUncleanSegment reports whether path.Clean would change p (a trailing slash aside, which it
// keeps: a key may end in "/").
func hasUncleanSegment(p string) bool {
	p = strings.TrimPrefix(p, "/")
	for {
		seg, rest, more := strings.Cut(p, "/")
		if seg == "." || seg == ".." || (seg == "" && more) {
			return true
		}
		if !more {
			return false
		}
		p = rest
	}
}

// routeTable lists every endpoint. server/openapi.json describes exactly these (a test checks
// both ways).
func (s *Server) routeTable() []route {
	return []route{
		{"/v1/locks/acquire", http.MethodPost, "acquire", RoleWrite, s.acquire},
		{"/v1/locks/renew", http.MethodPost, "renew", RoleWrite, s.renew},
		{"/v1/locks/renew-batch", http.MethodPost, "renew_batch", RoleWrite, s.renewBatch},
		{"/v1/locks/release", http.MethodPost, "release", RoleWrite, s.release},
		{"/v1/locks/leave", http.MethodPost, "leave", RoleWrite, s.leave}, // line_leave.go
		{"/v1/locks/force-release", http.MethodPost, "force_release", RoleAdmin, s.forceRelease},
		{"/v1/locks/clear-rest", http.MethodPost, "clear_rest", RoleAdmin, s.clearRest}, // rest.go
		{"/v1/locks/{key...}", http.MethodGet, "get", RoleRead, s.get},
		{"/v1/locks", http.MethodGet, "list", RoleRead, s.list},
		{"/v1/events", http.MethodGet, "events", RoleAdmin, s.events},
		{"/v1/info", http.MethodGet, "info", RoleRead, s.info},
		{"/v1/openapi.json", http.MethodGet, "openapi", RoleNone, serveOpenAPI},
		// The job queue (jobs.go, jobs_worker.go, resources.go).
		{"/v1/jobs", http.MethodPost, "jobs", RoleWrite, s.jobRoute(s.submitJob)},
		{"/v1/jobs", http.MethodGet, "jobs", RoleRead, s.jobRoute(s.listJobs)},
		{"/v1/jobs/batch", http.MethodPost, "jobs_batch", RoleWrite, s.jobRoute(s.submitJobs)},
		{"/v1/jobs/{id}", http.MethodGet, "job", RoleRead, s.jobRoute(s.getJob)},
		{"/v1/jobs/{id}/explain", http.MethodGet, "job_explain", RoleRead, s.jobRoute(s.explainJob)}, // explain.go
		{"/v1/jobs/{id}/cancel", http.MethodPost, "job_cancel", RoleWrite, s.jobRoute(s.cancelJob)},
		{"/v1/jobs/{id}/retry", http.MethodPost, "job_retry", RoleWrite, s.jobRoute(s.retryJob)},
		{"/v1/jobs/counts", http.MethodGet, "job_counts", RoleRead, s.jobRoute(s.jobCounts)},
		{"/v1/jobs/claim", http.MethodPost, "job_claim", RoleWrite, s.jobRoute(s.claimJobs)},
		{"/v1/jobs/claim/stop", http.MethodPost, "job_claim_stop", RoleWrite, s.jobRoute(s.stopClaimWait)}, // claim_stop.go
		{"/v1/jobs/complete", http.MethodPost, "jobs_complete", RoleWrite, s.jobRoute(s.completeJobs)},     // jobs_complete_many.go
		{"/v1/jobs/{id}/heartbeat", http.MethodPost, "job_heartbeat", RoleWrite, s.jobRoute(s.heartbeatJob)},
		{"/v1/jobs/{id}/complete", http.MethodPost, "job_complete", RoleWrite, s.jobRoute(s.completeJob)},
		{"/v1/jobs/{id}/fail", http.MethodPost, "job_fail", RoleWrite, s.jobRoute(s.failJob)},
		{"/v1/jobs/reap", http.MethodPost, "job_reap", RoleAdmin, s.jobRoute(s.reapJobs)},
		{"/v1/jobs/clean", http.MethodPost, "job_clean", RoleAdmin, s.jobRoute(s.cleanJobs)},
		{"/v1/dlq/purge", http.MethodPost, "dlq_purge", RoleAdmin, s.jobRoute(s.purgeJobs)},
		{"/v1/kinds", http.MethodGet, "kinds", RoleRead, s.jobRoute(s.listKinds)},
		{"/v1/kinds", http.MethodPost, "kinds", RoleAdmin, s.jobRoute(s.registerKinds)},
		{"/v1/kinds/{name}", http.MethodPut, "kind", RoleAdmin, s.jobRoute(s.putKind)},
		{"/v1/resources", http.MethodGet, "resources", RoleRead, s.jobRoute(s.listResources)},
		{"/v1/resources/{key...}", http.MethodGet, "resource", RoleRead, s.jobRoute(s.getResource)},
		{"/v1/resources/{key...}", http.MethodPut, "resource", RoleAdmin, s.jobRoute(s.setResourceState)},
		// Periodic jobs of serve's --periodic-file (periodic.go).
		{"/v1/periodic", http.MethodGet, "periodic", RoleRead, s.jobRoute(s.listPeriodic)},
		{"/v1/resources/{key...}", http.MethodPost, "resource_cooldown", RoleAdmin, s.jobRoute(s.clearResourceCooldown)}, // resource_cooldown.go
		// Limits of N for acquires (limits.go).
		{"/v1/limits", http.MethodGet, "limits", RoleRead, s.listLimits},
		{"/v1/limits/{name...}", http.MethodGet, "limit", RoleRead, s.getLimit},
		{"/v1/limits/{name...}", http.MethodPut, "limit", RoleAdmin, s.setLimit},
		{"/v1/limits/{name...}", http.MethodDelete, "limit", RoleAdmin, s.deleteLimit},
		// Trees: prefixes of hierarchical keys (trees.go).
		{"/v1/trees", http.MethodGet, "trees", RoleRead, s.listTrees},
		{"/v1/trees/{prefix...}", http.MethodGet, "tree", RoleRead, s.getTree},
		{"/v1/trees/{prefix...}", http.MethodPut, "tree", RoleAdmin, s.setTree},
		{"/v1/trees/{prefix...}", http.MethodDelete, "tree", RoleAdmin, s.deleteTree},
		// Rates of key prefixes (rates.go).
		{"/v1/rates", http.MethodGet, "rates", RoleRead, s.listPrefixRates},
		{"/v1/rates/{prefix...}", http.MethodGet, "rate", RoleRead, s.getPrefixRate},
		{"/v1/rates/{prefix...}", http.MethodPut, "rate", RoleAdmin, s.setPrefixRate},
		{"/v1/rates/{prefix...}", http.MethodDelete, "rate", RoleAdmin, s.deletePrefixRate},
		// Fences for resources outside the store (fences.go).
		{"/v1/fences/check", http.MethodPost, "fence_check", RoleWrite, s.checkFence},
		{"/v1/fences/{resource...}", http.MethodDelete, "fence_reset", RoleAdmin, s.resetFence},
		{"/healthz", http.MethodGet, "healthz", RoleNone, s.healthz},
		{"/readyz", http.MethodGet, "readyz", RoleNone, s.readyz},
		{"/metrics", http.MethodGet, "metrics", RoleNone, func(w http.ResponseWriter, r *http.Request, _ principal) {
			s.metrics.handler().ServeHTTP(w, r)
		}},
	}
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

// info also says who the caller is (token name and role), so that a client such as the
// dashboard offers only what the token may do.
func (s *Server) info(w http.ResponseWriter, _ *http.Request, p principal) {
	writeJSON(w, http.StatusOK, map[string]any{
		"principal":      p.name,
		"role":           p.role.String(),
		"auth":           s.cfg.Auth != nil,
		"version":        s.cfg.Version,
		"store":          s.cfg.StoreName,
		"fencing_tokens": s.cfg.Store.Capabilities().FencingTokens,
		"max_wait_ms":    s.cfg.MaxWait.Milliseconds(),
		"jobs":           s.jobs != nil,
		"audit":          s.cfg.Store.Capabilities().Audit,
		"one_resource":   s.cfg.Store.Capabilities().OneResource,
		"line":           s.cfg.Store.Capabilities().Line,
		"limits":         s.limits != nil,
		"trees":          s.trees != nil,
		"prefix_rates":   s.rates != nil,
		"claim_stop":     s.jobs != nil, // POST /v1/jobs/claim/stop and ClaimRequest.wait_id
	})
}
