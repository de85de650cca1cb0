package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Sentinels for the server's refusals of the caller itself. Test with errors.Is; errors.As gives
// the *ProblemError.
var (
	// ErrUnauthorized: the server wants a bearer token, or does not know the one sent (401).
	ErrUnauthorized = errors.New("baton client: unauthorized")
	// ErrForbidden: the token's role does not allow the call (403).
	ErrForbidden = errors.New("baton client: forbidden")
	// ErrNoSuchRoute: the server does not have the API path asked for (404 no_such_route, or a
	// 404 that is not a problem document): BaseURL is not a Baton server, or its path prefix is
	// wrong. It is never store.ErrNotFound, which only a Baton answer about a lease, job or
	// resource gives.
	ErrNoSuchRoute = errors.New("baton client: not a Baton server or wrong path")
)

// ProblemError is an error answer of the server (an RFC 9457 problem document) that has no
// store error of its own: unauthorized, forbidden, unavailable, internal, not_implemented (a
// store without a job queue), and codes this client does not know. Errors the store contract
// names (lock_held, cooldown, not_held, not_found, invalid_argument, resource_busy, job_state,
// version_mismatch, limit_in_use, tree_in_use, and not_implemented naming a feature:
// store.UnsupportedError) are returned as the store's errors instead.
type ProblemError struct {
	Status int    // the HTTP status
	Code   string // the problem's stable code, e.g. "unauthorized"; empty if the answer was not a problem document
	Title  string
	Detail string
	// URL is the address the request went to (without its query).
	URL string
	// RetryAfter is when the server asked to be tried again (its retry_after_ms, or else its
	// Retry-After header in seconds), zero if it did not say.
	RetryAfter time.Duration
}

// A ProblemError says when to retry, as the store's callers read it (store/optional.go).
var (
	_ store.RetryAfterHinter = (*ProblemError)(nil)
	_ store.RetryableError   = (*ProblemError)(nil)
)

// RetryAfterHint is RetryAfter: a waiting baton.Locker.Acquire waits at least that long before
// its next attempt.
func (e *ProblemError) RetryAfterHint() time.Duration { return e.RetryAfter }

func (e *ProblemError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "baton server: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Is matches ErrUnauthorized, ErrForbidden and ErrNoSuchRoute, by code or, for an answer without
// a problem document (a proxy's, or not a Baton server's), by status.
func (e *ProblemError) Is(target error) bool {
	switch target {
	case ErrNoSuchRoute:
		return e.Code == "no_such_route" || (e.Code == "" && e.Status == http.StatusNotFound)
	case ErrUnauthorized:
		return e.Code == "unauthorized" || (e.Code == "" && e.Status == http.StatusUnauthorized)
	case ErrForbidden:
		return e.Code == "forbidden" || (e.Code == "" && e.Status == http.StatusForbidden)
	}
	return false
}

// Retryable reports whether the answer may change by itself: the server or a proxy in front of it
// is unavailable or overloaded (5xx, 429, 408). Refused credentials, a missing route (an older
// server) and other client errors are not; a waiting Acquire gives up on them at once.
func (e *ProblemError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// problemJSON is the API's problem document.
type problemJSON = wire.Problem

// apiFields maps the API's field names back to the store's, so that errors read as those of any
// other store.
var apiFields = map[string]string{"ttl_ms": "ttl", "cooldown_ms": "cooldown", "lock_delay_ms": "lock_delay",
	"delay_ms": "delay", "retry_after_ms": "retry_after", "timeout_ms": "timeout", "age_ms": "age",
	"debounce_ms": "debounce"}

// problemError maps an error answer to the store's errors or a *ProblemError.
func (s *Store) problemError(method, path string, resp *http.Response) error {
	var p problemJSON
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if isJSON(resp.Header.Get("Content-Type")) {
		if json.Unmarshal(raw, &p) != nil {
			p = problemJSON{} // a document we cannot read is treated as no document
		}
	}
	if p.Code == "not_found" && strings.HasPrefix(p.Detail, "no such endpoint") {
		p.Code = "no_such_route" // a server from before no_such_route: not a missing lease
	}
	if err := storeError(&p); err != nil {
		return err
	}
	pe := &ProblemError{Status: resp.StatusCode, Code: p.Code, Title: p.Title, Detail: p.Detail, RetryAfter: msOf(p.RetryAfterMs)}
	if resp.Request != nil && resp.Request.URL != nil {
		u := *resp.Request.URL
		u.RawQuery = ""
		pe.URL = u.String()
	}
	if pe.RetryAfter <= 0 {
		// Seconds; an HTTP date is not worth the clock comparison.
		if secs, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && secs > 0 {
			pe.RetryAfter = time.Duration(min(secs, 3600)) * time.Second
		}
	}
	pe.RetryAfter = max(pe.RetryAfter, 0)
	if p.Code == "" {
		// Not a problem document (a proxy, or not a Baton server): show the start of a short text
		// body, such as a proxy's one-line message, but not a web page.
		pe.Detail = bodyExcerpt(resp.Header.Get("Content-Type"), raw)
	}
	if errors.Is(pe, ErrUnauthorized) || errors.Is(pe, ErrForbidden) {
		return pe
	}
	return fmt.Errorf("baton client: %s %s: %w", method, path, pe)
}

// bodyExcerpt is what an error shows of an answer that is not a problem document: the first
// line of a plain-text body, cut to 200 bytes; nothing of HTML or other markup.
func bodyExcerpt(contentType string, raw []byte) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	text := strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml" || strings.HasPrefix(strings.ToLower(text), "<"):
		return "(an HTML page, not a Baton answer)"
	case mt != "" && mt != "text/plain" && !isJSON(contentType):
		return fmt.Sprintf("(a %s answer, not a Baton answer)", mt)
	}
	if i := strings.IndexAny(text, "\r\n"); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	return strings.ToValidUTF8(text, "")
}

// storeError maps a problem document to the store error the contract names for its code, or
// nil if its code has none.
func storeError(p *problemJSON) error {
	switch p.Code {
	case "lock_held":
		e := &store.LockHeldError{Key: p.Key, Holder: p.Holder, Token: p.Token, RetryAfter: msOf(p.RetryAfterMs), Ahead: p.Ahead,
			Resource: p.Resource, Shared: p.Shared, Limit: p.Limit, InUse: intOf(p.InUse), Capacity: intOf(p.Capacity),
			Related: p.Related}
		if p.ExpiresAt != nil {
			e.ExpiresAt = p.ExpiresAt.UTC()
		}
		return e
	case "limit_in_use":
		return &store.LimitInUseError{Name: p.Limit, InUse: intOf(p.InUse)}
	case "tree_in_use":
		return &store.TreeInUseError{Prefix: p.Prefix, Key: p.Key, What: p.What}
	case "cooldown":
		e := &store.RestingError{Key: p.Key, Reason: p.Reason, Remaining: msOf(p.RemainingMs)}
		if r, err := store.ParseRate("rate", p.Rate); err == nil && p.Reason == store.ReasonRate {
			e.Rate = &store.RateWait{Limit: p.Limit, Prefix: p.Prefix, Rate: r}
		}
		return e
	case "not_held":
		return store.ErrNotHeld
	case "not_found":
		return store.ErrNotFound
	case "invalid_argument":
		field, prefix := p.Field, ""
		if i := strings.LastIndex(field, "]."); i > 0 {
			prefix, field = field[:i+2], field[i+2:] // one of a batch: jobs[i].field, kinds[i].field
		}
		if f, ok := apiFields[field]; ok {
			field = f
		}
		return &store.InvalidArgumentError{Field: prefix + field, Rule: p.Rule}
	case "resource_busy":
		busy := &store.ResourceBusyError{Resource: p.Resource, HeadJob: p.HeadJob, State: store.JobState(p.State)}
		if p.Index != nil {
			return &store.SubmitManyError{Index: *p.Index, Err: busy}
		}
		return busy
	case "job_state":
		return &store.JobStateError{ID: p.JobID, Op: p.Op, State: store.JobState(p.State)}
	case "not_implemented":
		if p.Feature != "" { // a store that lacks a feature of the request (store.UnsupportedError)
			return &store.UnsupportedError{Store: p.Store, Feature: p.Feature}
		}
	case "stale_token":
		return &staleFenceError{current: p.CurrentToken}
	case "version_mismatch":
		e := &store.VersionMismatchError{Key: p.Resource}
		if p.IfVersion != nil {
			e.Want = *p.IfVersion
		}
		if p.CurrentVersion != nil {
			e.Current = *p.CurrentVersion
		}
		return e
	}
	return nil
}

func intOf(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}

func msOf(v *int64) time.Duration {
	if v == nil {
		return 0
	}
	return time.Duration(*v) * time.Millisecond
}
