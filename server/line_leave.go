package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// A client waits for a key across several acquire requests under one lease ID, and its ticket in
// the key's line (store.LineWaiter) keeps its place across them: a long-poll that ends because
// its wait ran out, its client hung up or the server shut down leaves the ticket where it is,
// since the client goes on waiting with its next request (and a ticket nobody keeps alive
// expires within its TTL). A client that gives up says so with POST /v1/locks/leave: the
// requests of that acquire waiting on this server end, and its ticket leaves the line at once.

// s.st is a *gatedStore, a store.LineWaiter whatever the store beneath (admission.go).

// leaveTimeout bounds a leave's wait for the requests it stopped and its store call: the ticket
// expires by itself anyway.
const leaveTimeout = 5 * time.Second

// errLeft answers a waiting acquire whose lease ID left the line before any attempt was refused
// (the leave overtook the request, or stopped its first attempt).
//
// A leave that stops an attempt while it is with the store cannot undo a store that applies the
// aborted statement after all: such a ticket is at the back of the line, behind the waiters the
// leave let through, and expires within its TTL.
var errLeft = errors.New("the acquire left the key's line (POST /v1/locks/leave) before it waited")

// lineWaitKey names the waiting acquire of key under leaseID within owner's requests.
func lineWaitKey(owner, key, leaseID string) waitKey {
	return waitKey{owner: owner, id: key + "\x00" + leaseID}
}

// leave gives up the caller's waiting acquire of key under lease_id (POST /v1/locks/leave): its
// requests waiting on this server end (answered as a wait that ran out), then its ticket leaves
// the key's line and the next in line is woken. Leaving a line one is not in changes nothing. The
// ticket is removed even if the caller hangs up meanwhile: it may be gone already.
func (s *Server) leave(w http.ResponseWriter, r *http.Request, who principal) {
	var req wire.LeaveRequest
	if !decode(w, r, &req) || reserved(w, "key", req.Key) {
		return
	}
	err := store.ValidateKey(req.Key)
	if err == nil {
		err = store.ValidateLeaseID(req.LeaseID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner := s.owner(who)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), leaveTimeout)
	defer cancel()
	ended := s.lineWaits.stop(lineWaitKey(owner, req.Key, req.LeaseID))
	if ended != nil {
		// Only then: the last attempt of a stopped request may have renewed the ticket.
		select {
		case <-ended:
		case <-ctx.Done():
		}
	}
	if err := s.st.(store.LineWaiter).LeaveLine(ctx, req.Key, req.LeaseID, owner); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.LeaveResponse{Stopped: ended != nil})
}
