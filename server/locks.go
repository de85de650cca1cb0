package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// msDuration converts a millisecond field, checking its range before multiplying so that a huge
// value is a clear error rather than an overflow.
func msDuration(field string, v int64, max time.Duration) (time.Duration, *problem) {
	if v < 0 || v > max.Milliseconds() {
		return 0, invalidArg(field, "must be between 0 and "+strconv.FormatInt(max.Milliseconds(), 10))
	}
	return time.Duration(v) * time.Millisecond, nil
}

func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) acquire(w http.ResponseWriter, r *http.Request, who principal) {
	// The client measures the lease's local deadline from the start of its request plus
	// waited_ms: received is after that start, so the time from here to the granting attempt
	// is a lower bound of the wait the client may add.
	received := time.Now()
	var req wire.AcquireRequest
	if !decode(w, r, &req) {
		s.metrics.failures.WithLabelValues("invalid").Inc()
		return
	}
	p, wait, prob := s.acquireParams(&req, s.owner(who))
	if prob == nil && req.First && s.cfg.Auth != nil && who.role < RoleAdmin {
		prob = newProblem(http.StatusForbidden, "forbidden",
			fmt.Sprintf("first (break-glass) needs the %s role; token %q has %s", RoleAdmin, who.name, who.role))
		prob.RequiredRole = RoleAdmin.String()
	}
	if prob != nil {
		s.metrics.failures.WithLabelValues("invalid").Inc()
		s.metrics.acquisitions.WithLabelValues("failed").Inc()
		writeProblem(w, prob)
		return
	}
	var sl *store.Lease
	var err error
	if wait > 0 && s.gate.shedAtDoor(classNew) {
		// Shed before waiting: the attempts of the wait would be.
		err = errOverloaded
	} else if wait > 0 {
		sl, err = s.longPoll(r, p, req.LeaseID != "", wait, received)
	} else {
		sl, err = s.st.Acquire(r.Context(), p)
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		// A client that waits across several requests of one acquisition (the same lease ID)
		// makes one contention, not one per request.
		contended := errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting)
		if !contended || req.LeaseID == "" || s.acquires.refused(p.Key, p.LeaseID, received) {
			s.countFailure(err)
		}
		// The store refuses a re-acquire by holder of another owner's lease as a conflict.
		var held *store.LockHeldError
		if p.Owner != "" && errors.As(err, &held) && held.Holder == p.Holder {
			writeProblem(w, notOwner(fmt.Sprintf("the lease of holder %q on %q belongs to another principal", p.Holder, p.Key)))
			return
		}
		s.writeError(w, r, err)
		return
	}
	result := s.metrics.granted
	if sl.ID != p.LeaseID {
		result = s.metrics.renewed
	}
	first := received
	if req.LeaseID != "" {
		first = s.acquires.granted(p.Key, p.LeaseID, received)
	}
	s.metrics.lockWait.Observe(time.Since(first).Seconds())
	result.Inc()
	if sl.TookOver {
		s.metrics.expirations.Inc()
	}
	writeJSON(w, http.StatusOK, wire.LeaseResponse{Lease: wire.LeaseFrom(sl)})
}

// longPoll waits up to wait for p's key (an acquire with wait_ms). Its ticket in the key's line
// keeps its place when the wait ends, whether it ran out, the client hung up or the server shuts
// down: the client's next request under the same lease ID continues the wait. Only a leave of
// the acquire (named: the client chose the lease ID) ends the wait and removes the ticket.
func (s *Server) longPoll(r *http.Request, p *store.AcquireParams, named bool, wait time.Duration, received time.Time) (*store.Lease, error) {
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // server shutdown ends the wait too
	defer stop()
	var left context.Context // ends when POST /v1/locks/leave names this acquire
	if named {
		var done func()
		left, done = s.lineWaits.start(lineWaitKey(p.Owner, p.Key, p.LeaseID))
		defer done()
		if left.Err() != nil {
			return nil, errLeft // the leave overtook this request: it neither waits nor joins the line
		}
		defer context.AfterFunc(left, cancel)()
	}
	called := time.Now()
	sl, err := s.locker.AcquireRecord(ctx, p)
	// Its own deadline, not the client going away, the server shutting down nor a leave (all
	// cancel).
	waitRanOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	refused := errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting)
	switch {
	case err == nil:
		sl.Waited += called.Sub(received)
	case left != nil && left.Err() != nil && !refused:
		err = errLeft // the leave removes the ticket once this request has ended
	case waitRanOut && r.Context().Err() == nil && !refused:
		sl, err = s.afterWait(r.Context(), p, received, called)
	}
	return sl, err
}

// afterWaitTimeout bounds the store calls that answer an acquire whose wait ran out. Clients
// wait a little past wait_ms for the answer (the Go client: a fifth of its remaining time, 20 ms
// to 2 s).
const afterWaitTimeout = time.Second

// errWaitRanOut answers a wait that ran out when the store could not even say who holds the key
// in time: the store is overloaded, not failing.
var errWaitRanOut = errors.New("the wait ran out before the store answered; retry")

// afterWait answers an acquire whose wait ran out while an attempt was still with the store (a
// store queueing under load), so that no refusal named the holder. It reads the key once: a live
// lease of another holder is the usual 409 naming it; the caller's own lease, granted by the
// attempt whose answer came too late, is handed over; a free key (or one the caller's holder
// holds under another ID) gets one attempt that does not wait.
func (s *Server) afterWait(ctx context.Context, p *store.AcquireParams, received, called time.Time) (*store.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, afterWaitTimeout)
	defer cancel()
	l, err := s.st.Get(ctx, p.Key)
	switch {
	case err == nil && l.ID == p.LeaseID && l.Owner == p.Owner:
		// Granted after the attempt began: called bounds the grant time from below.
		l.Waited = called.Sub(received)
		return l, nil
	case err == nil && (l.Holder != p.Holder || l.Owner != p.Owner):
		return nil, &store.LockHeldError{Key: l.Key, Holder: l.Holder, Token: l.Token, ExpiresAt: l.ExpiresAt,
			RetryAfter: max(l.TTLLeft, 0)}
	case err == nil, errors.Is(err, store.ErrNotFound):
		q := *p
		q.Wait = false
		start := time.Now()
		l, err = s.st.Acquire(ctx, &q)
		if err == nil {
			l.Waited += start.Sub(received)
			return l, nil
		}
	}
	if ctx.Err() != nil {
		return nil, errWaitRanOut
	}
	return nil, err
}

// ttlParam is a request's TTL in milliseconds: def if absent, otherwise within the store's
// bounds, or a problem naming field.
func ttlParam(field string, ms *int64, def time.Duration) (time.Duration, *problem) {
	if ms == nil {
		return def, nil
	}
	if *ms < store.MinTTL.Milliseconds() || *ms > store.MaxTTL.Milliseconds() {
		return 0, invalidArg(field, "must be between "+strconv.FormatInt(store.MinTTL.Milliseconds(), 10)+
			" and "+strconv.FormatInt(store.MaxTTL.Milliseconds(), 10))
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

func (s *Server) acquireParams(req *wire.AcquireRequest, owner string) (*store.AcquireParams, time.Duration, *problem) {
	if strings.HasPrefix(req.Key, ReservedPrefix) {
		return nil, 0, reservedProblem("key", req.Key)
	}
	for _, k := range req.Resources {
		if strings.HasPrefix(k, ReservedPrefix) {
			return nil, 0, reservedProblem("resources", k)
		}
	}
	ttl, prob := ttlParam("ttl_ms", req.TTLMs, store.DefaultTTLForServer)
	if prob != nil {
		return nil, 0, prob
	}
	wait, prob := msDuration("wait_ms", req.WaitMs, 24*time.Hour)
	if prob != nil {
		return nil, 0, prob
	}
	cooldown, prob := msDuration("cooldown_ms", req.CooldownMs, store.MaxRest)
	if prob != nil {
		return nil, 0, prob
	}
	lockDelay, prob := msDuration("lock_delay_ms", req.LockDelayMs, store.MaxRest)
	if prob != nil {
		return nil, 0, prob
	}
	holder := req.Holder
	if holder == "" {
		holder = "http-" + newLeaseID()[:12]
	}
	md := req.Metadata
	if string(md) == "null" {
		md = nil
	}
	leaseID := req.LeaseID
	if leaseID == "" {
		leaseID = newLeaseID()
	}
	p := &store.AcquireParams{Key: req.Key, LeaseID: leaseID, Holder: holder, Owner: owner, TTL: ttl,
		Metadata: md, Cooldown: cooldown, LockDelay: lockDelay, First: req.First, FirstReason: req.FirstReason,
		Shared: req.Shared, Resources: req.Resources, Limits: req.Limits}
	if err := p.Validate(); err != nil {
		prob, _ := problemFor(err)
		return nil, 0, prob
	}
	return p, min(wait, s.cfg.MaxWait), nil
}

func (s *Server) countFailure(err error) {
	reason := "unavailable"
	switch {
	case errors.Is(err, store.ErrLockHeld):
		reason = "held"
	case errors.Is(err, store.ErrResting):
		reason = "cooldown"
	case errors.Is(err, store.ErrInvalidArgument), errors.Is(err, store.ErrUnsupported):
		reason = "invalid"
	case errors.Is(err, errOverloaded):
		reason = "overloaded"
	}
	s.metrics.failures.WithLabelValues(reason).Inc()
	s.metrics.acquisitions.WithLabelValues("failed").Inc()
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.RenewRequest
	if !decode(w, r, &req) || reserved(w, "key", req.Key) {
		return
	}
	ttl, prob := ttlParam("ttl_ms", req.TTLMs, store.DefaultTTLForServer)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	owner := s.owner(who)
	sl, err := s.st.Renew(r.Context(), &store.RenewParams{Key: req.Key, LeaseID: req.LeaseID, Owner: owner, TTL: ttl})
	if err != nil {
		if other, ok := s.leaseOfAnother(r.Context(), req.Key, req.LeaseID, owner); ok && errors.Is(err, store.ErrNotHeld) {
			writeProblem(w, leaseNotOwned(req.Key, other))
			return
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.LeaseResponse{Lease: wire.LeaseFrom(sl)})
}

// renewBatch renews many leases in one store call (group commit on the SQL stores): a holder of
// many leases sends one request instead of one per lease. Bad input anywhere rejects the whole
// batch; otherwise each renewal gets its own answer.
func (s *Server) renewBatch(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.RenewBatchRequest
	if !decodeBatch(w, r, &req) {
		return
	}
	if len(req.Leases) == 0 || len(req.Leases) > store.MaxRenewMany {
		writeProblem(w, invalidArg("leases", "must hold 1 to "+strconv.Itoa(store.MaxRenewMany)+" renewals"))
		return
	}
	ps := make([]*store.RenewParams, len(req.Leases))
	for i, it := range req.Leases {
		ttl, prob := ttlParam("leases["+strconv.Itoa(i)+"].ttl_ms", it.TTLMs, store.DefaultTTLForServer)
		if prob != nil {
			writeProblem(w, prob)
			return
		}
		if strings.HasPrefix(it.Key, ReservedPrefix) {
			writeProblem(w, reservedProblem("leases["+strconv.Itoa(i)+"].key", it.Key))
			return
		}
		ps[i] = &store.RenewParams{Key: it.Key, LeaseID: it.LeaseID, Owner: s.owner(who), TTL: ttl}
	}
	res, err := store.RenewMany(r.Context(), s.st, ps)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.RenewBatchResponse{Results: make([]wire.RenewBatchResult, len(res))}
	for i, rr := range res {
		if rr.Err != nil {
			if other, mine := s.leaseOfAnother(r.Context(), ps[i].Key, ps[i].LeaseID, ps[i].Owner); mine && errors.Is(rr.Err, store.ErrNotHeld) {
				out.Results[i].Error = &leaseNotOwned(ps[i].Key, other).Problem
				continue
			}
			p, ok := problemFor(rr.Err)
			if !ok {
				s.log.LogAttrs(r.Context(), slog.LevelError, "store error", slog.String("path", r.URL.Path), slog.String("err", rr.Err.Error()))
			}
			out.Results[i].Error = &p.Problem
			continue
		}
		l := wire.LeaseFrom(rr.Lease)
		out.Results[i].Lease = &l
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.ReleaseRequest
	if !decode(w, r, &req) || reserved(w, "key", req.Key) {
		return
	}
	owner := s.owner(who)
	res, err := s.st.Release(r.Context(), &store.ReleaseParams{Key: req.Key, LeaseID: req.LeaseID, Owner: owner})
	if err != nil {
		if other, ok := s.leaseOfAnother(r.Context(), req.Key, req.LeaseID, owner); ok && errors.Is(err, store.ErrNotHeld) {
			writeProblem(w, leaseNotOwned(req.Key, other))
			return
		}
		s.writeError(w, r, err)
		return
	}
	if !res.AlreadyReleased {
		s.metrics.held.Observe(res.Held.Seconds())
	}
	writeJSON(w, http.StatusOK, wire.ReleaseResponse{Released: !res.AlreadyReleased, AlreadyReleased: res.AlreadyReleased,
		HeldMs: res.Held.Milliseconds()})
}

func (s *Server) forceRelease(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.ForceReleaseRequest
	if !decode(w, r, &req) {
		return
	}
	actor := s.adminActor(who, req.Actor)
	sl, err := s.st.ForceRelease(r.Context(), &store.ForceReleaseParams{Key: req.Key, Reason: req.Reason, Actor: actor, Principal: s.owner(who)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("lease force-released", "key", sl.Key, "lease_id", sl.ID, "holder", sl.Holder, "token", sl.Token,
		"actor", who.name, "reason", req.Reason)
	writeJSON(w, http.StatusOK, wire.LeaseResponse{Lease: wire.LeaseFrom(sl)})
}

// adminActor is who the audit log names for an admin's change: the token's name. Without auth
// nobody has an identity, so the caller's own word (actor) is all there is.
func (s *Server) adminActor(who principal, actor string) string {
	if s.cfg.Auth == nil && actor != "" {
		return actor
	}
	return who.name
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, who principal) {
	s.getKey(w, r, r.PathValue("key"), who)
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request, key string, who principal) {
	sl, err := s.st.Get(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.LeaseResponse{Lease: s.leaseFor(sl, who)})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, who principal) {
	q, ok := query(w, r)
	if !ok {
		return
	}
	p := &store.ListParams{Prefix: q.Get("prefix"), Holder: q.Get("holder"), After: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeProblem(w, invalidArg("limit", "must be an integer"))
			return
		}
		if n < 1 {
			writeProblem(w, invalidArg("limit", "must be between 1 and "+strconv.Itoa(store.MaxListLimit)))
			return
		}
		p.Limit = n
	}
	leases, err := s.st.List(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.ListResponse{Leases: make([]wire.Lease, 0, len(leases))}
	for _, l := range leases {
		resp.Leases = append(resp.Leases, s.leaseFor(l, who))
	}
	if len(leases) == p.Limit {
		resp.NextCursor = leases[len(leases)-1].Key
	}
	writeJSON(w, http.StatusOK, resp)
}
