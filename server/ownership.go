package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Ownership. With authentication on, a lease or a job attempt belongs to the principal (the
// auth file's token name) that took it: the store keeps that owner and refuses a renewal,
// release, re-acquire by holder, heartbeat, completion or failure of another owner in the same
// atomic step (store.AcquireParams.Owner and the other Owner fields). The server only names the
// rule when it refuses. Without authentication every caller is the same anonymous admin, and
// nothing is owned: the store sees the owner "".

// ReservedPrefix starts the keys the server keeps for itself, such as its maintenance lease
// (baton/maintenance): no API call may take, renew, release or rest them, or submit jobs on
// them; an admin may only force-release them.
const ReservedPrefix = "baton/"

// ownerRule is the rule a refused call of another principal breaks.
const ownerRule = "a lease or job attempt belongs to the principal that took it: only that principal may renew, release, re-acquire, heartbeat, complete or fail it (an admin may force-release a lease or cancel a job)"

// owner is the store's owner of what p takes: its token name, or "" without authentication.
func (s *Server) owner(p principal) string {
	if s.cfg.Auth == nil {
		return ""
	}
	return p.name
}

// reserved answers 403 and returns true if key (the request's field) is under ReservedPrefix.
func reserved(w http.ResponseWriter, field, key string) bool {
	if !strings.HasPrefix(key, ReservedPrefix) {
		return false
	}
	writeProblem(w, reservedProblem(field, key))
	return true
}

func reservedProblem(field, key string) *problem {
	p := newProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s %q: keys under %q are reserved for the server (its maintenance lease); an admin may only force-release them",
		field, key, ReservedPrefix))
	p.Field, p.Rule = field, "must not start with "+ReservedPrefix
	return p
}

// notOwner is the 403 of a call on what another principal owns.
func notOwner(detail string) *problem {
	p := newProblem(http.StatusForbidden, "forbidden", detail+"; "+ownerRule)
	p.Rule = ownerRule
	return p
}

// leaseOfAnother reports, after the store refused (key, id) to owner with ErrNotHeld, whether
// (key, id) is a live lease of another owner, so that the refusal can name the rule. The
// refusal itself came from the store, atomically; this read only chooses its words.
func (s *Server) leaseOfAnother(ctx context.Context, key, id, owner string) (string, bool) {
	if s.cfg.Auth == nil {
		return "", false
	}
	l, err := s.st.Get(ctx, key)
	if err != nil || l.ID != id || l.Owner == owner {
		return "", false
	}
	return l.Owner, true
}

// leaseNotOwned is the 403 for leaseOfAnother.
func leaseNotOwned(key, owner string) *problem {
	return notOwner(fmt.Sprintf("the lease on %q belongs to principal %q", key, owner))
}

// attemptOfAnother is leaseOfAnother for a job attempt (ID, token).
func (s *Server) attemptOfAnother(ctx context.Context, id int64, token uint64, owner string) (string, bool) {
	if s.cfg.Auth == nil {
		return "", false
	}
	j, err := s.jobs.GetJob(ctx, id)
	if err != nil || j.State != store.JobRunning || j.Token != token || j.Owner == owner {
		return "", false
	}
	return j.Owner, true
}

// attemptNotOwned is the 403 for attemptOfAnother.
func attemptNotOwned(id int64, token uint64, owner string) *problem {
	return notOwner(fmt.Sprintf("attempt %d of job %d belongs to principal %q", token, id, owner))
}

// writeAttemptError answers an error of a heartbeat, completion or failure of attempt (id,
// token): 403 naming the rule if the attempt is another principal's.
func (s *Server) writeAttemptError(w http.ResponseWriter, r *http.Request, err error, id int64, token uint64, owner string) {
	if other, ok := s.attemptOfAnother(r.Context(), id, token, owner); ok && errors.Is(err, store.ErrNotHeld) {
		writeProblem(w, attemptNotOwned(id, token, other))
		return
	}
	s.writeJobError(w, r, err, noJob(id))
}

// leaseFor is l as who may see it: a lease ID lets its bearer renew and release the lease, so
// only an admin and the lease's owner see it (everyone without authentication: all are admin).
func (s *Server) leaseFor(l *store.Lease, who principal) wire.Lease {
	wl := wire.LeaseFrom(l)
	if !s.seesLeaseID(l.Owner, who) {
		wl.LeaseID = ""
	}
	return wl
}

// seesLeaseID reports whether who may see the lease ID of a lease or lock ticket of owner.
func (s *Server) seesLeaseID(owner string, who principal) bool {
	return who.role >= RoleAdmin || s.cfg.Auth != nil && owner == who.name
}
