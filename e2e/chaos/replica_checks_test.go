package chaos

import (
	"fmt"
	"strings"
	"time"
)

const (
	// wakeBound: a handoff to a waiter on another replica is counted as woken if its grant came
	// this soon after the release. A waiter that missed the release's NOTIFY is granted only at
	// its next fallback poll, min(PollInterval ±20%, TTL/3) = up to 667 ms with lockTTL (2 s)
	// after its last attempt, at a time that does not depend on the release: about a quarter of
	// such handoffs fall below wakeBound, never a majority.
	wakeBound = 150 * time.Millisecond
	// minCrossHandoffs: fewer cross-replica handoffs in the fault-free phase judge nothing.
	minCrossHandoffs = 6
)

// handoff is a release followed directly by a grant to a run that was already waiting.
type handoff struct {
	from, to string // run IDs
	gap      time.Duration
}

// checkCrossReplicaWakeups: among the handoffs of the fault-free phase (a release in the audit
// log, then the next grant, to a run that started before the release) from a run on one replica
// to a run on another (runReplica: every replica is up then, so a run is served by its client's
// home replica), more than half are granted within wakeBound of the release (the store's
// clock, both events' times): the waiter was woken by the release's NOTIFY, which crosses
// replicas only through PostgreSQL, not by its fallback poll. There must be at least
// minCrossHandoffs. It returns the figures for the summary, same-replica handoffs (woken inside
// one process) for comparison.
func checkCrossReplicaWakeups(audit []auditEvent, runs []runRecord, runReplica map[string]int, faultFreeEnd time.Time, r *report, notes *counter) string {
	started := map[string]time.Time{}
	for _, rr := range runs {
		started[rr.id] = rr.startWall
	}
	var cross, same []handoff
	var release *auditEvent
	for i := range audit {
		e := &audit[i]
		switch e.Kind {
		case "release":
			release = e
			continue
		case "acquire":
		case "expiry_takeover":
			release = nil
			continue
		default:
			continue
		}
		rel := release
		release = nil
		if rel == nil || !rel.At.Before(faultFreeEnd) {
			continue
		}
		from, to := strings.TrimPrefix(rel.Holder, holderPrefix), strings.TrimPrefix(e.Holder, holderPrefix)
		fi, ok1 := runReplica[from]
		ti, ok2 := runReplica[to]
		st, ok3 := started[to]
		if !ok1 || !ok2 || !ok3 || !st.Before(rel.At) {
			continue // not a waiter at the release
		}
		h := handoff{from: from, to: to, gap: e.At.Sub(rel.At)}
		if fi != ti {
			cross = append(cross, h)
		} else {
			same = append(same, h)
		}
	}
	fast := 0
	var gaps, sameGaps []time.Duration
	var slow []string
	for _, h := range cross {
		gaps = append(gaps, h.gap)
		if h.gap <= wakeBound {
			fast++
		} else if len(slow) < 5 {
			slow = append(slow, fmt.Sprintf("%s->%s %s", h.from, h.to, h.gap.Round(time.Millisecond)))
		}
	}
	for _, h := range same {
		sameGaps = append(sameGaps, h.gap)
	}
	notes.add("faultfree_cross_replica_handoffs", len(cross))
	switch {
	case len(cross) < minCrossHandoffs:
		r.violate("cross_replica_handoffs_too_few", "%d handoffs from a release on one replica to a waiter on another in the fault-free phase, want at least %d",
			len(cross), minCrossHandoffs)
	case 2*fast <= len(cross):
		r.violate("cross_replica_wakeup_missing", "only %d of %d cross-replica handoffs were granted within %s of the release (waiters not woken by NOTIFY?); slow ones: %s",
			fast, len(cross), wakeBound, strings.Join(slow, ", "))
	}
	return fmt.Sprintf("%d of %d handoffs across replicas within %s (gap p50 %s, p90 %s); within one replica: %d (p50 %s, p90 %s)",
		fast, len(cross), wakeBound, pct(gaps, 50), pct(gaps, 90), len(same), pct(sameGaps, 50), pct(sameGaps, 90))
}

// checkLeaderMoves judges the maintenance lease's audit log (events) against the kills of its
// holder (moves): its grants carry strictly increasing tokens, and after each kill the first
// grant is to a process of another replica (pids: every replica process's PID). The fault
// itself has checked, on the live replicas, that another replica held the lease and reaped.
// It returns the figures for the summary.
func checkLeaderMoves(events []auditEvent, moves []leaderMove, pids map[int]int, r *report) string {
	type grant struct {
		at      time.Time
		replica int // -1: no replica process of this run
		token   uint64
	}
	var grants []grant
	var last uint64
	perReplica := make([]int, replicaCount)
	for _, e := range events {
		if e.Kind != "acquire" && e.Kind != "expiry_takeover" {
			continue
		}
		if e.Token <= last {
			r.violate("leader_token_order", "%s: event %d grants token %d after token %d", maintenanceKey, e.ID, e.Token, last)
		}
		last = max(last, e.Token)
		i, ok := pids[holderPID(e.Holder)]
		if !ok {
			i = -1
		} else {
			perReplica[i]++
		}
		grants = append(grants, grant{e.At, i, e.Token})
	}
	var desc []string
	for _, m := range moves {
		next := -2 // no grant after the kill
		for _, g := range grants {
			if g.at.After(m.killedAt) {
				next = g.replica
				break
			}
		}
		if m.to >= 0 && (next < 0 || next == m.from) {
			r.violate("leader_move_missing_in_audit", "replica %d (holder of %s) killed at %s: the audit log's next grant is to replica %d (-2: none, -1: unknown process)",
				m.from, maintenanceKey, m.killedAt.Format(time.RFC3339Nano), next)
		}
		reaped := "not reaped"
		if m.reaped {
			reaped = "reaped"
		}
		desc = append(desc, fmt.Sprintf("%d->%d (audit: %d, %s)", m.from, m.to, next, reaped))
	}
	return fmt.Sprintf("%d grants (per replica %v); holder killed %d times: %s", len(grants), perReplica, len(moves), strings.Join(desc, ", "))
}
