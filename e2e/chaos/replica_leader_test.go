package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killLeader kills -9 the replica that holds the maintenance lease and keeps it down until
// another replica holds the lease and, as its new holder, has reaped the attempt of a worker
// killed for the purpose; then restarts it. Either not happening within takeoverBound is a
// violation. It injects nothing (false) when no replica holds the lease.
func (h *replicaHarness) killLeader(rng *rand.Rand) bool {
	from, ok := h.leader(-1)
	if !ok {
		return false
	}
	killedAt := time.Now()
	h.replicas[from].kill9()
	defer h.restart(from)
	move := leaderMove{from: from, to: -1, killedAt: killedAt}
	defer func() {
		h.mu.Lock()
		h.moves = append(h.moves, move)
		h.mu.Unlock()
	}()
	deadline := time.Now().Add(takeoverBound)
	for {
		if to, ok := h.leader(from); ok {
			move.to = to
			break
		}
		if time.Now().After(deadline) {
			h.found.violate("leader_not_taken_over", "replica %d, holder of %s, was killed at %s; no other replica held the lease within %s",
				from, maintenanceKey, killedAt.Format(time.RFC3339Nano), takeoverBound)
			return true
		}
		time.Sleep(100 * time.Millisecond) // polling the lease is the signal
	}
	move.reaped = h.reapOne(rng, from, deadline)
	if !move.reaped {
		h.found.violate("no_reap_after_takeover", "replica %d took %s over from replica %d; no expired attempt was reaped within %s of the kill",
			move.to, maintenanceKey, from, takeoverBound)
	}
	return true
}

// reapOne kills -9 a worker that runs a job and waits until the job's attempt has been reaped
// (its error worker_timeout), asking the live replicas (not down); it tries another job if the
// attempt ended otherwise (it finished before the kill). False if none was reaped by deadline.
func (h *replicaHarness) reapOne(rng *rand.Rand, down int, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		var running struct {
			Jobs []struct {
				apiJob
				Worker string `json:"worker"`
			} `json:"jobs"`
		}
		q := url.Values{"kind": {jobKind}, "state": {"running"}, "limit": {"100"}}
		if h.getJSON(down, "/v1/jobs?"+q.Encode(), &running) != nil || len(running.Jobs) == 0 {
			time.Sleep(50 * time.Millisecond) // polling for a running job is the signal
			continue
		}
		j := running.Jobs[rng.IntN(len(running.Jobs))]
		for _, w := range h.workers {
			if cmd := w.current(); cmd != nil && w.name == j.Worker {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		for time.Now().Before(deadline) {
			var now apiJob
			var errs struct {
				Errors []struct {
					Attempt int    `json:"attempt"`
					Code    string `json:"code"`
				} `json:"errors"`
			}
			path := "/v1/jobs/" + strconv.FormatInt(j.ID, 10)
			if h.getJSON(down, path, &now) == nil && h.getJSON(down, path, &errs) == nil &&
				(now.State != "running" || now.Attempt != j.Attempt) {
				for _, e := range errs.Errors {
					if e.Attempt == j.Attempt && e.Code == "worker_timeout" {
						return true
					}
				}
				break // the attempt ended otherwise: try another job
			}
			time.Sleep(100 * time.Millisecond) // polling the job's state is the signal
		}
	}
	return false
}

// leader returns the replica whose process holds the maintenance lease, asking every replica
// but skip (down); false if none does (the lease expired, or its holder is not a live
// replica's process).
func (h *replicaHarness) leader(skip int) (int, bool) {
	var l struct {
		Lease struct {
			Holder string `json:"holder"`
		} `json:"lease"`
	}
	if h.getJSON(skip, "/v1/locks/"+maintenanceKey, &l) != nil {
		return 0, false
	}
	pid := holderPID(l.Lease.Holder)
	for i, s := range h.replicas {
		s.mu.Lock()
		cur, exited := s.cmd.Process.Pid, s.exited
		s.mu.Unlock()
		select {
		case <-exited:
			continue
		default:
		}
		if i != skip && cur == pid {
			return i, true
		}
	}
	return 0, false
}

// holderPID is the PID in a server's default holder ("host:pid:random"), or 0.
func holderPID(holder string) int {
	parts := strings.Split(holder, ":")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

// getJSON GETs path from the first replica but skip that answers 200, into out.
func (h *replicaHarness) getJSON(skip int, path string, out any) error {
	err := fmt.Errorf("no replica to ask")
	for i, s := range h.replicas {
		if i == skip {
			continue
		}
		var resp *http.Response
		resp, err = http.Get(s.url + path)
		if err != nil {
			continue
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(out)
		resp.Body.Close()
		if err == nil {
			return nil
		}
	}
	return err
}
