package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
)

// The headers a lock holder sends with each request to a fenced HTTP resource.
const (
	// TokenHeader carries the holder's fencing token, a decimal integer from 1 to 2^63-1.
	TokenHeader = "Baton-Fencing-Token"
	// ResourceHeader names the resource the token fences: the lock key, or any name the
	// holders and the service agree on.
	ResourceHeader = "Baton-Fence-Resource"
)

// Header sets the fencing headers of req.
func Header(req *http.Request, resource string, token uint64) {
	req.Header.Set(ResourceHeader, resource)
	req.Header.Set(TokenHeader, strconv.FormatUint(token, 10))
}

// HeaderFromEnv sets the fencing headers of req from the environment `baton run` and `baton
// worker` give their command: the token from BATON_FENCING_TOKEN, the mode from
// BATON_FENCING_MODE (set to "shared" for a shared holder; unset is exclusive), and the
// resource from resource if it is not empty, else BATON_RESOURCE (a job's resource), else
// BATON_LOCK_KEY.
func HeaderFromEnv(req *http.Request, resource string) error {
	token, err := strconv.ParseUint(os.Getenv("BATON_FENCING_TOKEN"), 10, 64)
	if err != nil || token == 0 {
		return &InvalidArgumentError{Field: "BATON_FENCING_TOKEN", Rule: "must be set to a positive integer (run under `baton run` or `baton worker`)"}
	}
	mode, err := modeFromEnv()
	if err != nil {
		return err
	}
	for _, v := range []string{resource, os.Getenv("BATON_RESOURCE"), os.Getenv("BATON_LOCK_KEY")} {
		if v != "" {
			HeaderMode(req, v, token, mode)
			return nil
		}
	}
	return &InvalidArgumentError{Field: "resource", Rule: "must be given, or BATON_RESOURCE or BATON_LOCK_KEY set"}
}

// Middleware runs next only for requests whose fencing token is not stale for their resource,
// one request per resource at a time (see Store.Enter): the resource refuses the late writes of
// a holder that lost its lease. A request whose ModeHeader says "shared" is admitted as a shared
// holder (see ModeStore.EnterMode), beside other shared requests of the resource; a store that
// is not a ModeStore answers it 501 with code "not_implemented". A request without both
// token and resource headers, or with a malformed header, is answered 400; a stale token 409 with code "stale_token", the resource, the token presented
// (token) and the greatest seen (current_token); a store that cannot tell 503 (and the error is logged
// through slog.Default). Answers are
// application/problem+json documents shaped like the Baton server's.
//
// The guarantee covers what next does before it returns: work it leaves running in the
// background is not fenced.
func Middleware(store Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := r.Header.Get(ResourceHeader)
		if resource == "" {
			writeProblem(w, invalid(ResourceHeader, "is required"))
			return
		}
		raw := r.Header.Get(TokenHeader)
		if raw == "" {
			writeProblem(w, invalid(TokenHeader, "is required"))
			return
		}
		token, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || token == 0 || token > maxToken {
			writeProblem(w, invalid(TokenHeader, fmt.Sprintf("must be a decimal integer from 1 to %d", uint64(maxToken))))
			return
		}
		mode, err := parseMode(ModeHeader, r.Header.Get(ModeHeader))
		if err != nil {
			writeProblem(w, invalid(ModeHeader, err.(*InvalidArgumentError).Rule))
			return
		}
		var release func()
		switch ms, ok := store.(ModeStore); {
		case ok:
			release, err = ms.EnterMode(r.Context(), resource, token, mode)
		case mode == Exclusive:
			release, err = store.Enter(r.Context(), resource, token)
		default:
			writeProblem(w, newProblem(http.StatusNotImplemented, "not_implemented", "Not implemented",
				fmt.Sprintf("this fence store (%T) does not admit shared holders", store)))
			return
		}
		var stale *StaleTokenError
		var inv *InvalidArgumentError
		switch {
		case err == nil:
			defer release()
			next.ServeHTTP(w, r)
		case errors.As(err, &stale):
			p := newProblem(http.StatusConflict, "stale_token", "Stale fencing token", stale.Error())
			p.Resource, p.Token, p.CurrentToken = stale.Resource, stale.Token, stale.Current
			writeProblem(w, p)
		case errors.As(err, &inv):
			field := inv.Field
			if field == "resource" {
				field = ResourceHeader
			}
			writeProblem(w, invalid(field, inv.Rule))
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			writeProblem(w, newProblem(http.StatusServiceUnavailable, "unavailable", "Unavailable", "the request ended while waiting for the resource"))
		default:
			slog.Default().LogAttrs(r.Context(), slog.LevelError, "fence store error", slog.String("resource", resource), slog.String("err", err.Error()))
			writeProblem(w, newProblem(http.StatusServiceUnavailable, "unavailable", "Unavailable", "the fence store did not answer; retry"))
		}
	})
}

// problem is the Baton server's problem document (RFC 9457), so clients read both alike.
type problem = wire.Problem

func newProblem(status int, code, title, detail string) *problem {
	return &problem{Type: "https://baton.dev/problems/" + code, Title: title, Status: status, Code: code, Detail: detail}
}

func invalid(field, rule string) *problem {
	p := newProblem(http.StatusBadRequest, "invalid_argument", "Invalid argument", field+" "+rule)
	p.Field, p.Rule = field, rule
	return p
}

func writeProblem(w http.ResponseWriter, p *problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
