package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// problem is the problem document, and the Retry-After it implies.
type problem struct {
	wire.Problem
	retryAfter time.Duration
}

var titles = map[string]string{
	"invalid_argument":       "Invalid argument",
	"unauthorized":           "Unauthorized",
	"forbidden":              "Forbidden",
	"not_found":              "Not found",
	"no_such_route":          "No such route",
	"method_not_allowed":     "Method not allowed",
	"lock_held":              "Lock held",
	"not_held":               "Lease not held",
	"body_too_large":         "Request body too large",
	"request_timeout":        "Request timeout",
	"unsupported_media_type": "Unsupported media type",
	"cooldown":               "Key resting",
	"unavailable":            "Store unavailable",
	"overloaded":             "Server overloaded",
	"internal":               "Internal error",
	"resource_busy":          "Resource busy",
	"job_state":              "Job state forbids this",
	"version_mismatch":       "Resource version mismatch",
	"not_implemented":        "Not implemented",
	"stale_token":            "Stale fencing token",
	"limit_in_use":           "Limit in use",
	"tree_in_use":            "Tree in use",
}

func newProblem(status int, code, detail string) *problem {
	return &problem{Problem: wire.Problem{Type: "https://baton.dev/problems/" + code, Title: titles[code], Status: status, Code: code, Detail: cleanDetail(detail)}}
}

// cleanDetail drops the Go package prefix ("baton: ") that store and locker errors carry: a
// problem's detail is read by people of any language, and the code already says who answered.
func cleanDetail(detail string) string {
	return strings.ReplaceAll(strings.TrimPrefix(detail, "baton: "), ": baton: ", ": ")
}

// apiFields maps the store's field names to the API's, where the API carries units.
var apiFields = map[string]string{"ttl": "ttl_ms", "cooldown": "cooldown_ms", "lock_delay": "lock_delay_ms",
	"delay": "delay_ms", "retry_after": "retry_after_ms", "timeout": "timeout_ms", "age": "age_ms",
	"debounce": "debounce_ms"}

// apiField is the API's name of a store field.
func apiField(field string) string {
	if f, ok := apiFields[field]; ok {
		return f
	}
	return field
}

func invalidArg(field, rule string) *problem {
	p := newProblem(http.StatusBadRequest, "invalid_argument", field+" "+rule)
	p.Field, p.Rule = field, rule
	return p
}

func ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}

// problemFor maps an error from the store or the locker to a problem. ok is false for errors
// that are not the caller's doing (the store is down, or a bug): those are logged by the caller.
func problemFor(err error) (p *problem, ok bool) {
	var inv *store.InvalidArgumentError
	var held *store.LockHeldError
	var resting *store.RestingError
	var inUse *store.LimitInUseError
	var treeInUse *store.TreeInUseError
	var unsupported *store.UnsupportedError
	switch {
	case errors.As(err, &inv):
		if i, field, ok := batchField(inv.Field); ok {
			return batchProblem(i, invalidArg(apiField(field), inv.Rule)), true
		}
		return invalidArg(apiField(inv.Field), inv.Rule), true
	case errors.As(err, &held):
		p := newProblem(http.StatusConflict, "lock_held", held.Error())
		p.Key, p.Holder, p.Token, p.RetryAfterMs, p.Ahead = held.Key, held.Holder, held.Token, ms(held.RetryAfter), held.Ahead
		p.Resource, p.Shared, p.Limit, p.Related = held.Resource, held.Shared, held.Limit, held.Related
		if held.Limit != "" {
			p.InUse, p.Capacity = &held.InUse, &held.Capacity
		}
		if !held.ExpiresAt.IsZero() { // zero for a free key with others ahead in its line
			exp := wire.T(held.ExpiresAt)
			p.ExpiresAt = &exp
		}
		p.retryAfter = held.RetryAfter
		return p, true
	case errors.As(err, &resting):
		p := newProblem(http.StatusLocked, "cooldown", resting.Error())
		p.Key, p.Reason, p.RemainingMs = resting.Key, resting.Reason, ms(resting.Remaining)
		p.retryAfter = resting.Remaining
		if w := resting.Rate; w != nil {
			p.Rate, p.Limit, p.Prefix = w.Rate.String(), w.Limit, w.Prefix
		}
		return p, true
	case errors.As(err, &inUse):
		p := newProblem(http.StatusConflict, "limit_in_use", inUse.Error())
		p.Limit, p.InUse = inUse.Name, &inUse.InUse
		return p, true
	case errors.As(err, &treeInUse):
		return treeInUseProblem(treeInUse), true
	case errors.As(err, &unsupported):
		return unsupportedProblem(unsupported), true
	case errors.Is(err, store.ErrNotHeld):
		return newProblem(http.StatusConflict, "not_held", "the lease is not the live lease on its key (expired, released, taken over or force-released)"), true
	case errors.Is(err, store.ErrNotFound):
		return newProblem(http.StatusNotFound, "not_found", "no live lease on the key"), true
	case errors.Is(err, errOverloaded):
		p := newProblem(http.StatusServiceUnavailable, "overloaded", err.Error())
		p.retryAfter, p.RetryAfterMs = overloadRetryAfter, ms(overloadRetryAfter)
		return p, true
	case errors.Is(err, errWaitRanOut):
		// Load, not a failure: the caller may retry after a pause, and nothing is logged.
		p := newProblem(http.StatusServiceUnavailable, "unavailable", err.Error())
		p.retryAfter = time.Second
		return p, true
	case errors.Is(err, errLeft):
		return newProblem(http.StatusServiceUnavailable, "unavailable", err.Error()), true
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled):
		return newProblem(http.StatusServiceUnavailable, "unavailable", "the server is shutting down"), true
	default:
		return newProblem(http.StatusServiceUnavailable, "unavailable", "the store did not answer; retry"), false
	}
}

func writeProblem(w http.ResponseWriter, p *problem) {
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(p.retryAfter.Seconds())), 10))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	p.Detail = cleanDetail(p.Detail)
	_ = json.NewEncoder(w).Encode(p.Problem)
}

// writeError answers err as a problem, logging errors that are not the caller's doing.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p, ok := problemFor(err)
	if !ok {
		s.log.LogAttrs(r.Context(), slog.LevelError, "store error", slog.String("path", r.URL.Path), slog.String("err", err.Error()))
	}
	writeProblem(w, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	// The answers of the lock cycle skip encoding/json's reflection when they can (the bytes
	// are the same).
	switch v := v.(type) {
	case wire.LeaseResponse:
		buf := answerBufs.Get().(*[]byte)
		if b, ok := wire.AppendLeaseResponse((*buf)[:0], &v); ok {
			_, _ = w.Write(b)
			*buf = b
			answerBufs.Put(buf)
			return
		}
		answerBufs.Put(buf)
	case wire.ReleaseResponse:
		buf := answerBufs.Get().(*[]byte)
		*buf = wire.AppendReleaseResponse((*buf)[:0], &v)
		_, _ = w.Write(*buf)
		answerBufs.Put(buf)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

// jsonContentType is the Content-Type of JSON answers, set without canonicalising the name
// each time. net/http does not change a header's values.
var jsonContentType = []string{"application/json"}

// answerBufs holds the buffers of the answers writeJSON encodes itself.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// notFound answers a path the API does not have. Its code, no_such_route, is not not_found (no
// such lease, job or resource), so that a client pointed at a wrong path prefix can tell the two
// apart instead of reading every key as free.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, newProblem(http.StatusNotFound, "no_such_route", fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)))
}
