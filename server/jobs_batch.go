package server

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// MaxJobBatchBodyBytes bounds the body of POST /v1/jobs/batch: up to store.MaxSubmitMany jobs,
// each with its args (MaxBodyBytes bounds single calls, MaxBatchBodyBytes the other batches).
// Such bodies are read under a budget (body_budget.go).
const MaxJobBatchBodyBytes = 8 << 20

// submitJobs is POST /v1/jobs/batch: every job is checked as a single submit's body is, then the
// batch is one store call (one atomic step). A bad or refused job fails the whole batch with a
// problem whose field (jobs[i].member) and index name it.
func (s *Server) submitJobs(w http.ResponseWriter, r *http.Request, _ principal) {
	if r.Header.Get("Idempotency-Key") != "" {
		writeProblem(w, invalidArg("Idempotency-Key", "must not be sent with a batch: give each job its idempotency_key"))
		return
	}
	release, ok := s.admitBody(w, r, s.batchBudget, MaxJobBatchBodyBytes)
	if !ok {
		return
	}
	defer release()
	jobs, ok := decodeSubmitBatch(w, r)
	if !ok {
		return
	}
	if len(jobs) == 0 {
		writeProblem(w, invalidArg("jobs", "must hold at least one job"))
		return
	}
	ps := make([]*store.SubmitParams, len(jobs))
	for i, j := range jobs {
		if j == nil {
			writeProblem(w, batchProblem(i, invalidArg("", "must be a job object, not null")))
			return
		}
		p, prob := submitParams(j, "")
		if prob != nil {
			writeProblem(w, batchProblem(i, prob))
			return
		}
		if p.TraceParent == "" {
			p.TraceParent = baton.TraceParent(r.Context())
		}
		ps[i] = p
	}
	res, err := s.jobs.SubmitMany(r.Context(), ps)
	if err != nil {
		s.writeJobError(w, r, err, "not found")
		return
	}
	jobs, ps = nil, nil // the store has what it needs: let the collector have the rest
	status := http.StatusOK
	for _, sr := range res {
		if !sr.Existing {
			s.jobMetrics.submitted(sr)
			status = http.StatusCreated
		}
	}
	// The answer (wire.SubmitBatchResponse) is written one result at a time, rather than
	// encoded whole in memory first: it holds every job's args, as large as the request.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_, _ = io.WriteString(w, `{"results":[`)
	for i, sr := range res {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		if enc.Encode(wire.SubmitResult{Existing: sr.Existing, Job: wire.JobFrom(sr.Job)}) != nil {
			return // the client went away
		}
	}
	_, _ = io.WriteString(w, "]}\n")
}

// batchProblem places an invalid_argument problem of job i: its field becomes jobs[i].field.
func batchProblem(i int, p *problem) *problem {
	if p.Code == "invalid_argument" {
		p.Field = store.JobField(i, p.Field)
		p.Detail = p.Field + " " + p.Rule
	} else if p.Field != "" {
		p.Field = store.JobField(i, p.Field)
	}
	p.Index = &i
	return p
}

var batchFieldRE = regexp.MustCompile(`^jobs\[(\d+)\](?:\.(.*))?$`)

// batchField splits a store field of a batch job, "jobs[i].field", into i and field.
func batchField(f string) (int, string, bool) {
	m := batchFieldRE.FindStringSubmatch(f)
	if m == nil {
		return 0, "", false
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, "", false
	}
	return i, m[2], true
}
