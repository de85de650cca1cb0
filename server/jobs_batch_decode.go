package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// decodeSubmitBatch reads the body of POST /v1/jobs/batch, {"jobs": [...]}, one job at a time
// from the connection: decoding the whole body at once held it three times over (the bytes
// read, the decoder's copy of them, the decoded jobs), about 30 MB for an 8 MiB batch. Each job
// gets the rules of a single submit's body (unknown members, types, text that is not Unicode),
// and a problem names it: jobs[i].member, with its index. It answers the problem itself and
// returns false on bad input.
func decodeSubmitBatch(w http.ResponseWriter, r *http.Request) ([]*wire.SubmitRequest, bool) {
	if !jsonBody(w, r) {
		return nil, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxJobBatchBodyBytes))
	fail := func(p *problem) ([]*wire.SubmitRequest, bool) {
		writeProblem(w, p)
		return nil, false
	}
	// streamProblem is the problem of an error reading the body outside a job's value.
	streamProblem := func(err error, field string) *problem {
		p := bodyProblem(err, nil, false, MaxJobBatchBodyBytes)
		if p.Code == "invalid_argument" && p.Field == "body" && field != "body" {
			p = invalidArg(field, p.Rule)
		}
		return p
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(streamProblem(err, "body"))
	}
	if tok != json.Delim('{') {
		return fail(invalidArg("body", "must be a JSON object"))
	}
	var jobs []*wire.SubmitRequest
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(streamProblem(err, "body"))
		}
		if name, _ := tok.(string); name != "jobs" {
			return fail(invalidArg(name, "is not a known field"))
		}
		jobs = nil // a repeated member replaces the first, as encoding/json does
		switch tok, err := dec.Token(); {
		case err != nil:
			return fail(streamProblem(err, "jobs"))
		case tok == nil: // "jobs": null is no jobs
			continue
		case tok != json.Delim('['):
			return fail(invalidArg("jobs", "must be a JSON array"))
		}
		for i := 0; dec.More(); i++ {
			if i == store.MaxSubmitMany {
				return fail(invalidArg("jobs", fmt.Sprintf("must hold at most %d jobs (got more)", store.MaxSubmitMany)))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if p := streamProblem(err, ""); p.Code != "invalid_argument" {
					return fail(p) // too large, too late: the request's fault, not job i's
				}
				return fail(batchProblem(i, streamProblem(err, "")))
			}
			if string(raw) == "null" {
				jobs = append(jobs, nil)
				continue
			}
			var j wire.SubmitRequest
			if err := decodeStrict(raw, &j); err != nil {
				p := bodyProblem(err, raw, true, MaxJobBatchBodyBytes)
				if p.Code == "invalid_argument" && p.Field == "body" {
					p = invalidArg("", p.Rule)
				}
				return fail(batchProblem(i, p))
			}
			// As decodeBody: encoding/json would turn text that is not Unicode into U+FFFD.
			if rule := store.JSONTextRule(raw, false); rule != "" {
				return fail(batchProblem(i, invalidArg(memberWith(raw), rule)))
			}
			jobs = append(jobs, &j)
		}
		if _, err := dec.Token(); err != nil { // ]
			return fail(streamProblem(err, "jobs"))
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return fail(streamProblem(err, "body"))
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil || err == io.ErrUnexpectedEOF || isSyntax(err) {
			return fail(invalidArg("body", "trailing data after the JSON object"))
		}
		return fail(streamProblem(err, "body"))
	}
	return jobs, true
}

func isSyntax(err error) bool {
	_, ok := err.(*json.SyntaxError)
	return ok
}
