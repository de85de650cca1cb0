package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// maxJobLine bounds one line of a --file batch: a job's members and its args (at most 32 KiB).
const maxJobLine = 64 << 10

// jobsSubmitFile is 'baton jobs submit --file': every line is checked before anything is sent,
// then the batch is one call (POST /v1/jobs/batch), all or nothing.
func (a *app) jobsSubmitFile(name string) error {
	in := a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usagef("--file: %v", err)
		}
		defer f.Close()
		in = f
	}
	ps, lines, err := readJobLines(in)
	if err != nil {
		return usagef("--file %s: %v (nothing written)", name, err)
	}
	if err := store.ValidateSubmitMany(ps); err != nil {
		return batchError(err, lines)
	}
	st, ctx, done, err := a.openStore(0)
	if err != nil {
		return err
	}
	defer done()
	res, err := st.SubmitMany(ctx, ps)
	if err != nil {
		return batchError(err, lines)
	}
	if a.g.output == "json" {
		out := wire.SubmitBatchResponse{Results: make([]wire.SubmitResult, len(res))}
		for i, r := range res {
			out.Results[i] = wire.SubmitResult{Existing: r.Existing, Job: wire.JobFrom(r.Job)}
		}
		return writeJSON(a.stdout, out)
	}
	jobs := make([]*store.Job, len(res))
	existing := 0
	for i, r := range res {
		jobs[i] = r.Job
		if r.Existing {
			existing++
		}
	}
	if err := writeJobTable(a.stdout, jobs); err != nil {
		return err
	}
	if existing > 0 {
		_, err = fmt.Fprintf(a.stdout, "%d of %d lines named jobs submitted before (idempotency key); they were not submitted again\n",
			existing, len(res))
	}
	return err
}

// readJobLines reads one submit object per non-blank line; lines[i] is the line number of job i.
func readJobLines(r io.Reader) ([]*store.SubmitParams, []int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxJobLine)
	var ps []*store.SubmitParams
	var lines []int
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(ps) == store.MaxSubmitMany {
			return nil, nil, fmt.Errorf("line %d: a batch holds at most %d jobs", n, store.MaxSubmitMany)
		}
		p, err := parseJobLine(line)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", n, err)
		}
		ps, lines = append(ps, p), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, nil, fmt.Errorf("line %d: longer than %d bytes", n+1, maxJobLine)
		}
		return nil, nil, err
	}
	if len(ps) == 0 {
		return nil, nil, errors.New("no jobs (one JSON object per line)")
	}
	return ps, lines, nil
}

// parseJobLine reads one job: the members of POST /v1/jobs' body, no others.
func parseJobLine(line []byte) (*store.SubmitParams, error) {
	var req wire.SubmitRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("not a job object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	if rule := store.JSONTextRule(line, false); rule != "" {
		return nil, fmt.Errorf("the line %s", rule)
	}
	if req.DelayMs < 0 || req.DelayMs > store.MaxDelay.Milliseconds() {
		return nil, fmt.Errorf("invalid delay_ms: must be between 0 and %d (got %d)", store.MaxDelay.Milliseconds(), req.DelayMs)
	}
	mode, ok := req.SubmitMode()
	if !ok {
		return nil, fmt.Errorf("invalid mode: must be %q or left out with shared: true (got %q)", store.ModeShared, req.Mode)
	}
	p := &store.SubmitParams{Kind: req.Kind, Resource: req.Resource, Args: req.Args, IdempotencyKey: req.IdempotencyKey,
		Policy: req.Policy, MaxAttempts: req.MaxAttempts, Priority: req.Priority,
		Delay: time.Duration(req.DelayMs) * time.Millisecond, Mode: mode, Resources: req.Resources, Limits: req.Limits}
	if string(p.Args) == "null" {
		p.Args = nil
	}
	if req.ScheduledAt != "" {
		t, err := time.Parse(time.RFC3339, req.ScheduledAt)
		if err != nil {
			return nil, fmt.Errorf("invalid scheduled_at: must be an RFC 3339 time (got %q)", req.ScheduledAt)
		}
		p.ScheduledAt = t
	}
	return p, nil
}

var batchJobField = regexp.MustCompile(`^jobs\[(\d+)\]\.?(.*)$`)

// batchError names the line of the job an error of a batch is about.
func batchError(err error, lines []int) error {
	line := func(i int) int {
		if i >= 0 && i < len(lines) {
			return lines[i]
		}
		return i + 1
	}
	var inv *store.InvalidArgumentError
	var se *store.SubmitManyError
	var busy *store.ResourceBusyError
	switch {
	case errors.As(err, &inv):
		if m := batchJobField.FindStringSubmatch(inv.Field); m != nil {
			i, _ := strconv.Atoi(m[1])
			field := m[2]
			if field == "delay" {
				field = "delay_ms"
			}
			return explain(err, "line %d: invalid %s: %s (nothing written)", line(i), field, inv.Rule)
		}
	case errors.As(err, &se) && errors.As(err, &busy):
		return explain(err, "line %d: resource %q is busy: job %d is %s (the reject policy refuses to queue behind it; nothing written)",
			line(se.Index), busy.Resource, busy.HeadJob, busy.State)
	}
	return err
}
