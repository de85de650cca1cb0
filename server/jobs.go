package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// The job queue over HTTP: submit, read and administer jobs and kinds. Remote workers' calls are
// in jobs_worker.go, resources in resources.go. Every handler makes one store call (one atomic
// step), after checking every input: bad input is a 400 naming the field, and writes nothing.

// maxCleanAge bounds age_ms of a clean (it only needs to be larger than any retention).
const maxCleanAge = 100 * 365 * 24 * time.Hour

// jobRoute answers 501 when the store has no job queue.
func (s *Server) jobRoute(h func(http.ResponseWriter, *http.Request, principal)) func(http.ResponseWriter, *http.Request, principal) {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		if s.jobs == nil {
			p := newProblem(http.StatusNotImplemented, "not_implemented",
				fmt.Sprintf("this server's store (%s) has no job queue", s.cfg.StoreName))
			p.Store, p.Feature = s.storeName(), "a job queue"
			writeProblem(w, p)
			return
		}
		h(w, r, p)
	}
}

// jobProblem maps the job store's errors to problems; notFound is the detail of a 404.
func jobProblem(err error, notFound string) (*problem, bool) {
	var busy *store.ResourceBusyError
	var state *store.JobStateError
	var mismatch *store.VersionMismatchError
	var batch *store.SubmitManyError
	switch {
	case errors.As(err, &busy):
		p := newProblem(http.StatusConflict, "resource_busy", busy.Error())
		p.Resource, p.HeadJob, p.State = busy.Resource, busy.HeadJob, string(busy.State)
		if errors.As(err, &batch) {
			p.Detail, p.Index = batch.Error(), &batch.Index
		}
		return p, true
	case errors.As(err, &state):
		p := newProblem(http.StatusConflict, "job_state", state.Error())
		p.JobID, p.Op, p.State = state.ID, state.Op, string(state.State)
		return p, true
	case errors.As(err, &mismatch):
		p := newProblem(http.StatusConflict, "version_mismatch", mismatch.Error())
		want, cur := mismatch.Want, mismatch.Current
		p.Resource, p.IfVersion, p.CurrentVersion = mismatch.Key, &want, &cur
		return p, true
	case errors.Is(err, store.ErrNotHeld):
		return newProblem(http.StatusConflict, "not_held",
			"the token does not name the job's running attempt (it ended, was reaped, or another attempt runs)"), true
	case errors.Is(err, store.ErrNotFound):
		return newProblem(http.StatusNotFound, "not_found", notFound), true
	}
	return problemFor(err)
}

// writeJobError answers err as a problem, logging errors that are not the caller's doing.
func (s *Server) writeJobError(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	p, ok := jobProblem(err, notFound)
	if !ok {
		s.log.LogAttrs(r.Context(), slog.LevelError, "store error", slog.String("path", r.URL.Path), slog.String("err", err.Error()))
	}
	writeProblem(w, p)
}

// invalid answers a validation error of the store's (its field names mapped to the API's).
func invalid(err error) *problem {
	p, _ := problemFor(err)
	return p
}

// jobID parses the {id} of the path.
func jobID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeProblem(w, invalidArg("id", fmt.Sprintf("must be a positive job ID (got %q)", r.PathValue("id"))))
		return 0, false
	}
	return id, true
}

func noJob(id int64) string { return fmt.Sprintf("no job %d", id) }

// noBody accepts a request without a body, or with an empty JSON object.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength == 0 {
		return true
	}
	var empty struct{}
	return decode(w, r, &empty)
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.SubmitRequest
	if !decodeLocating(w, r, &req) {
		return
	}
	p, prob := submitParams(&req, r.Header.Get("Idempotency-Key"))
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	// The job keeps the request's trace context (its traceparent header, or this server's span
	// of the request): its attempts join the submitter's trace.
	if p.TraceParent == "" {
		p.TraceParent = baton.TraceParent(r.Context())
	}
	res, err := s.jobs.SubmitJob(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	if res.Existing {
		w.Header().Set("Idempotency-Replayed", "true")
		writeJSON(w, http.StatusOK, wire.JobFrom(res.Job))
		return
	}
	s.jobMetrics.submitted(res)
	w.Header().Set("Location", "/v1/jobs/"+strconv.FormatInt(res.Job.ID, 10))
	writeJSON(w, http.StatusCreated, wire.JobFrom(res.Job))
}

// submitParams checks a submit's body and Idempotency-Key header.
func submitParams(req *wire.SubmitRequest, headerKey string) (*store.SubmitParams, *problem) {
	key := req.IdempotencyKey
	if headerKey != "" {
		if key != "" && key != headerKey {
			return nil, invalidArg("idempotency_key", "must equal the Idempotency-Key header when both are sent")
		}
		key = headerKey
	}
	delay, prob := msDuration("delay_ms", req.DelayMs, store.MaxDelay)
	if prob != nil {
		return nil, prob
	}
	debounce, prob := msDuration("debounce_ms", req.DebounceMs, store.MaxDebounce)
	if prob != nil {
		return nil, prob
	}
	args := req.Args
	if string(args) == "null" {
		args = nil
	}
	mode, ok := req.SubmitMode()
	if !ok {
		return nil, invalidArg("mode", fmt.Sprintf("must be %q or left out with shared: true (got %q)", store.ModeShared, req.Mode))
	}
	p := &store.SubmitParams{Kind: req.Kind, Resource: req.Resource, Args: args, IdempotencyKey: key,
		Policy: req.Policy, MaxAttempts: req.MaxAttempts, Priority: req.Priority, Delay: delay,
		Mode: mode, Resources: req.Resources, Limits: req.Limits, Debounce: debounce, TraceParent: req.TraceParent}
	if req.ScheduledAt != "" {
		at, err := time.Parse(time.RFC3339, req.ScheduledAt)
		if err != nil {
			return nil, invalidArg("scheduled_at", fmt.Sprintf("must be an RFC 3339 time (got %q)", req.ScheduledAt))
		}
		p.ScheduledAt = at
	}
	if err := p.Validate(); err != nil {
		return nil, invalid(err)
	}
	if strings.HasPrefix(p.Resource, ReservedPrefix) {
		return nil, reservedProblem("resource", p.Resource)
	}
	for _, k := range p.Resources {
		if strings.HasPrefix(k, ReservedPrefix) {
			return nil, reservedProblem("resources", k)
		}
	}
	return p, nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, _ principal) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	j, err := s.jobs.GetJob(r.Context(), id)
	if err != nil {
		s.writeJobError(w, r, err, noJob(id))
		return
	}
	writeJSON(w, http.StatusOK, wire.JobFrom(j))
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	q, ok := query(w, r)
	if !ok {
		return
	}
	p := &store.JobListParams{State: store.JobState(q.Get("state")), Kind: q.Get("kind"), Resource: q.Get("resource")}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, invalidArg("after", "must be a job ID (the next_after of the previous page)"))
			return
		}
		p.After = n
	}
	limit, ok := queryLimit(w, q.Get("limit"))
	if !ok {
		return
	}
	p.Limit = limit
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	jobs, err := s.jobs.ListJobs(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.JobsResponse{Jobs: wire.JobsFrom(jobs)}
	if len(jobs) == p.Limit {
		resp.NextAfter = jobs[len(jobs)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

// queryLimit parses an optional limit query parameter (0 if absent: the default).
func queryLimit(w http.ResponseWriter, v string) (int, bool) {
	return queryBound(w, "limit", v)
}

// queryBound parses the query parameter field, v: 0 if absent, else 1..store.MaxListLimit, or
// a 400 naming field.
func queryBound(w http.ResponseWriter, field, v string) (int, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxListLimit {
		writeProblem(w, invalidArg(field, "must be an integer between 1 and "+strconv.Itoa(store.MaxListLimit)))
		return 0, false
	}
	return n, true
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, _ principal) {
	id, ok := jobID(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	j, err := s.jobs.CancelJob(r.Context(), id)
	if err != nil {
		s.writeJobError(w, r, err, noJob(id))
		return
	}
	if j.State == store.JobCancelled {
		s.jobMetrics.entered(j) // a running job is only asked to stop: no state yet
	}
	writeJSON(w, http.StatusOK, wire.JobFrom(j))
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request, _ principal) {
	id, ok := jobID(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	j, err := s.jobs.RetryJob(r.Context(), id)
	if err != nil {
		s.writeJobError(w, r, err, noJob(id))
		return
	}
	writeJSON(w, http.StatusOK, wire.JobFrom(j))
}

func (s *Server) purgeJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.PurgeRequest
	if !decode(w, r, &req) {
		return
	}
	p := &store.PurgeParams{IDs: req.IDs, Kind: req.Kind, Resource: req.Resource}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	n, err := s.jobs.PurgeJobs(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	writeJSON(w, http.StatusOK, wire.PurgeResponse{Purged: n})
}

func (s *Server) reapJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.ReapRequest
	if !decode(w, r, &req) {
		return
	}
	retryAfter, prob := msDuration("retry_after_ms", req.RetryAfterMs, store.MaxDelay)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p := &store.ReapParams{Limit: req.Limit, RetryAfter: retryAfter}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	reaped, err := s.jobs.ReapJobs(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.ReapResponse{Reaped: make([]wire.ReapedJob, len(reaped))}
	for i, rj := range reaped {
		s.ObserveReaped(rj)
		resp.Reaped[i] = wire.ReapedJob{Job: wire.JobFrom(rj.Job), Reason: rj.Reason}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) cleanJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.CleanRequest
	if !decode(w, r, &req) {
		return
	}
	age, prob := msDuration("age_ms", req.AgeMs, maxCleanAge)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	dlAge, prob := msDuration("discarded_age_ms", req.DiscardedAgeMs, maxCleanAge)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	p := &store.CleanParams{Age: age, Discarded: req.Discarded, DiscardedAge: dlAge, Limit: req.Limit}
	if err := p.Validate(); err != nil {
		writeProblem(w, invalid(err))
		return
	}
	n, err := s.jobs.CleanJobs(r.Context(), p)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	writeJSON(w, http.StatusOK, wire.CleanResponse{Deleted: n})
}

func (s *Server) jobCounts(w http.ResponseWriter, r *http.Request, _ principal) {
	counts, err := s.jobs.JobCounts(r.Context())
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	resp := wire.JobCountsResponse{Counts: make([]wire.JobCount, len(counts))}
	for i, c := range counts {
		resp.Counts[i] = wire.JobCount{Kind: c.Kind, State: c.State, Count: c.Count}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) listKinds(w http.ResponseWriter, r *http.Request, _ principal) {
	kinds, err := s.jobs.Kinds(r.Context())
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	writeJSON(w, http.StatusOK, wire.KindsResponse{Kinds: kindsFrom(kinds)})
}

func kindsFrom(kinds []store.Kind) []wire.Kind {
	out := make([]wire.Kind, len(kinds))
	for i := range kinds {
		out[i] = wire.KindFrom(&kinds[i])
	}
	return out
}

// storeKind checks a kind's millisecond fields and converts it.
func storeKind(k *wire.Kind) (store.Kind, *problem) {
	if _, prob := msDuration("timeout_ms", k.TimeoutMs, store.MaxJobTimeout); prob != nil {
		return store.Kind{}, prob
	}
	if _, prob := msDuration("cooldown_ms", k.CooldownMs, store.MaxRest); prob != nil {
		return store.Kind{}, prob
	}
	if _, prob := msDuration("resource_cooldown_ms", k.ResourceCooldownMs, store.MaxRest); prob != nil {
		return store.Kind{}, prob
	}
	if _, prob := msDuration("debounce_ms", k.DebounceMs, store.MaxDebounce); prob != nil {
		return store.Kind{}, prob
	}
	sk := k.Store()
	rate, err := k.StoreRate()
	if err != nil {
		return store.Kind{}, invalid(err)
	}
	sk.Rate = rate
	if err := sk.Validate(); err != nil {
		return store.Kind{}, invalid(err)
	}
	return sk, nil
}

// registerKinds creates or replaces several kinds at once, all or none.
func (s *Server) registerKinds(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.KindsRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Kinds) == 0 {
		writeProblem(w, invalidArg("kinds", "must list at least one kind"))
		return
	}
	kinds := make([]store.Kind, len(req.Kinds))
	for i := range req.Kinds {
		k, prob := storeKind(&req.Kinds[i])
		if prob != nil {
			// Which kind of the request, as a batch submit names jobs[i].
			if prob.Code == "invalid_argument" {
				prob.Field = fmt.Sprintf("kinds[%d].%s", i, prob.Field)
				prob.Detail = prob.Field + " " + prob.Rule
			}
			writeProblem(w, prob)
			return
		}
		kinds[i] = k
	}
	if err := s.jobs.RegisterKinds(r.Context(), kinds); err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	writeJSON(w, http.StatusOK, wire.KindsResponse{Kinds: kindsFrom(kinds)})
}

// putKind creates or replaces one kind, named by the path.
func (s *Server) putKind(w http.ResponseWriter, r *http.Request, _ principal) {
	var req wire.Kind
	if !decode(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	if req.Name != "" && req.Name != name {
		writeProblem(w, invalidArg("name", fmt.Sprintf("must be the kind named by the path, %q, or left out (got %q)", name, req.Name)))
		return
	}
	req.Name = name
	k, prob := storeKind(&req)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	if err := s.jobs.RegisterKinds(r.Context(), []store.Kind{k}); err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	writeJSON(w, http.StatusOK, wire.KindFrom(&k))
}
