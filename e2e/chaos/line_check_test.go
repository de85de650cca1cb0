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
	lineGrants := map[string][]auditEvent{}
	for _, e := range audit {
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
}
