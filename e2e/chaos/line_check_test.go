package chaos

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// lineCheck is what checkLineOrder judges: the audit log of the keys the runs took, and the
// `baton run --lock` runs (holder holderPrefix + run ID) of the fault-free phase.
type lineCheck struct {
	audit        []auditEvent
	runs         []runRecord
	faultFreeEnd time.Duration
	// jobs, by ID, are the jobs queued on the same keys (the jobs test). If set, the runs' grants
	// are also judged against them (the cross rule, see checkLineOrder). Set it only where the
	// audit log's IDs follow the order of the commits (SQLite: one writer at a time).
	jobs map[int64]lineJob
}

// lineJob is a job as the cross rule sees it.
type lineJob struct {
	id        int64
	key       string
	createdAt time.Time // its arrival in its key's line, to the millisecond the API carries
	acked     time.Time // when the harness had its submit acknowledged (this machine's clock)
	// clean: it and every job before it on its key ran one attempt, which succeeded. A head
	// that backs off does not hold the line (docs/guarantees.md, "One line per resource"), so
	// a job behind one may rightly run after a later lock request.
	clean bool
}

// checkLineOrder: on a store with a line (SQLite, PostgreSQL), per key, the lock runs of the
// fault-free phase are granted in the order their tickets joined the key's line (the audit log's
// ticket_enqueue events, by their time, to the millisecond the API carries). Runs granted without
// waiting have no ticket and are not compared; a run whose ticket rejoined the line (it had
// expired) is counted in the notes and not compared. Two tickets of one millisecond are not
// judged: the store orders them by nanosecond arrival, which need not follow the audit IDs (a
// request reads its clock before it waits for the write lock).
//
// line_grants_compared counts the grants that followed, on their key, a grant whose ticket was in
// the line at the same time (the later ticket joined before the earlier grant): the pairs whose
// order the store decided, the only ones that can break the rule. Fewer than 2 fail the check
// (line_order_unchecked), so that a change of scenario cannot leave it vacuous.
//
// With c.jobs, the cross rule too (line_order_cross): a job that arrived after a lock run's
// ticket is not claimed while that ticket waits (a claim between the ticket_enqueue and the grant
// in the audit log's commit order), and a job whose submit was acknowledged before a lock run
// arrived (its ticket, or its grant if it did not wait) has its first attempt claimed before that
// grant, unless a head before it backed off (lineJob.clean). line_cross_compared counts the pairs
// of a ticket and a job claimed or submitted while it waited; none fails the check
// (line_order_cross_unchecked).
func checkLineOrder(c lineCheck, r *report, notes *counter) {
	faultFree := map[string]bool{}
	for _, rr := range c.runs {
		if rr.end < c.faultFreeEnd && rr.code == 0 {
			faultFree[holderPrefix+rr.id] = true
		}
	}
	audit := slices.Clone(c.audit) // the keys' logs, one after another: one order, by ID
	slices.SortFunc(audit, func(a, b auditEvent) int { return cmp.Compare(a.ID, b.ID) })
	enqueued := map[string]auditEvent{} // holder -> its ticket's (only) enqueue
	rejoined := map[string]bool{}
	granted := map[string]auditEvent{} // holder -> its grant
	lineGrants := map[string][]auditEvent{}
	claims := map[string][]auditEvent{} // key -> its job claims, in ID order
	firstClaim := map[int64]auditEvent{}
	for _, e := range audit {
		if e.Kind == "job_claim" {
			claims[e.Key] = append(claims[e.Key], e)
			if _, ok := firstClaim[e.JobID]; !ok {
				firstClaim[e.JobID] = e
			}
			continue
		}
		if !faultFree[e.Holder] {
			continue
		}
		switch e.Kind {
		case "ticket_enqueue":
			if _, ok := enqueued[e.Holder]; ok {
				rejoined[e.Holder] = true
			}
			enqueued[e.Holder] = e
		case "acquire", "expiry_takeover":
			granted[e.Holder] = e
			if _, ok := enqueued[e.Holder]; ok {
				lineGrants[e.Key] = append(lineGrants[e.Key], e)
			}
		}
	}
	notes.add("line_rejoined", len(rejoined))
	ticketed, compared := 0, 0
	for _, key := range slices.Sorted(maps.Keys(lineGrants)) {
		grants := lineGrants[key]
		slices.SortFunc(grants, func(a, b auditEvent) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
		var prev *auditEvent
		for _, g := range grants {
			if rejoined[g.Holder] {
				continue
			}
			ticketed++
			q := enqueued[g.Holder]
			if prev != nil {
				p := enqueued[prev.Holder]
				switch {
				case q.At.Equal(p.At):
					notes.add("line_same_ms", 1)
				case q.At.Before(p.At):
					r.violate("line_order", "%s: %s was granted after %s, but its ticket joined the line first (%s before %s)",
						key, g.Holder, prev.Holder, q.At.Format(time.RFC3339Nano), p.At.Format(time.RFC3339Nano))
					compared++
				case q.At.Before(prev.At):
					compared++ // both waited at once; granted in order
				}
			}
			prev = &g
		}
	}
	notes.add("line_grants_ticketed", ticketed)
	notes.add("line_grants_compared", compared)
	if compared < 2 {
		r.violate("line_order_unchecked", "only %d grants of the fault-free phase followed a grant whose ticket waited with theirs: the scenario no longer exercises the line", compared)
	}
	if c.jobs == nil {
		return
	}

	byKey := map[string][]lineJob{}
	for _, id := range slices.Sorted(maps.Keys(c.jobs)) {
		j := c.jobs[id]
		byKey[j.key] = append(byKey[j.key], j)
	}
	cross := 0
	for _, holder := range slices.Sorted(maps.Keys(granted)) {
		g := granted[holder]
		if rejoined[holder] {
			continue
		}
		e, waited := enqueued[holder]
		arrival := g.At
		if waited {
			arrival = e.At
			// A job claimed while the ticket waited must have arrived before it.
			together := map[int64]bool{}
			for _, cl := range claims[g.Key] {
				if cl.ID <= e.ID || cl.ID >= g.ID {
					continue
				}
				j, ok := c.jobs[cl.JobID]
				if !ok {
					continue
				}
				together[cl.JobID] = true
				switch {
				case e.At.Equal(j.createdAt):
					notes.add("line_same_ms", 1)
				case e.At.Before(j.createdAt):
					r.violate("line_order_cross", "%s: job %d (submitted %s) was claimed while %s waited in the line, whose ticket joined first (%s)",
						g.Key, j.id, j.createdAt.Format(time.RFC3339Nano), holder, e.At.Format(time.RFC3339Nano))
				}
			}
			for _, j := range byKey[g.Key] {
				if e.At.Before(j.createdAt) && j.createdAt.Before(g.At) {
					together[j.id] = true // submitted while the ticket waited
				}
			}
			cross += len(together)
		}
		// A job acknowledged before the lock request arrived runs first.
		for _, j := range byKey[g.Key] {
			if !j.clean || j.acked.IsZero() || !j.acked.Before(arrival) {
				continue
			}
			if cl, ok := firstClaim[j.id]; ok && cl.ID > g.ID {
				r.violate("line_order_cross", "%s: %s was granted before job %d's first attempt, though the job's submit was acknowledged (%s) before the lock request arrived (%s)",
					g.Key, holder, j.id, j.acked.Format(time.RFC3339Nano), arrival.Format(time.RFC3339Nano))
			}
		}
	}
	notes.add("line_cross_compared", cross)
	if cross == 0 {
		r.violate("line_order_cross_unchecked", "no job was claimed or submitted while a lock run of the fault-free phase waited in its line: the scenario no longer exercises the cross rule")
	}
}
