package chaos

import (
	"strconv"
	"strings"
	"time"
)

// checkModes is checkFencing for keys held in both modes (and for keys held by several-key
// runs, whose one token each of their keys sees): per key, in the order the resource recorded
// the calls,
//
//  1. no overlap: a write or exit of run A recorded after an accepted enter of a run B that
//     entered after A and cannot run beside it (either is exclusive) means CMD A still ran when
//     B started. That is allowed only if A's client was stopped during its run (stalled), and
//     then every such late call must have been refused. Shared runs may overlap each other.
//  2. marks: an accepted exclusive enter has a token no lower than every enter accepted before
//     on the key, a shared one no lower than every exclusive enter accepted before; a refused
//     enter is allowed only for a stalled run (a non-stalled one was granted below a holder
//     that already entered); a token used by two runs on one key is a violation.
//
// stalled(span) says whether the span's client was stopped during it. Violations are named
// with the faults in force shortly before (tl.during), as in checkFencing. notes counts the
// shared runs that entered while another shared run of the key was inside (shared_together).
func checkModes(events []event, stalled func(*runSpan) bool, tl *timeline, window time.Duration, r *report, notes *counter) {
	sp := spans(events)
	type entered struct {
		seq    int
		shared bool
		late   bool // a late call was judged: the run's later calls are not
		exited bool
	}
	type mark struct {
		seq int
		run string
	}
	type keyState struct {
		runs                map[string]*entered
		lastEnter, lastExcl mark
		maxAny, maxExcl     uint64
		tokenRun            map[uint64]string
		sharedInside        map[string]bool
	}
	keys := map[string]*keyState{}
	for _, e := range events {
		ks := keys[e.Key]
		if ks == nil {
			ks = &keyState{runs: map[string]*entered{}, lastEnter: mark{seq: -1}, lastExcl: mark{seq: -1},
				tokenRun: map[uint64]string{}, sharedInside: map[string]bool{}}
			keys[e.Key] = ks
		}
		s := sp[e.Run]
		switch e.Kind {
		case "enter":
			if other, ok := ks.tokenRun[e.Token]; ok && other != e.Run {
				r.violate("token_reuse", "key %s: token %d entered by %s and by %s", e.Key, e.Token, other, e.Run)
			}
			ks.tokenRun[e.Token] = e.Run
			if !e.Accepted {
				if stalled(s) {
					notes.add("fenced_stale_enter", 1)
				} else {
					r.violate("token_order/"+tl.during(e.At, window), "key %s: %s (%s, token %d) refused at enter at %s (greatest token entered %d, exclusive %d)",
						e.Key, e.Run, modeName(e), e.Token, e.At, ks.maxAny, ks.maxExcl)
				}
				continue
			}
			if e.shared() && e.Token < ks.maxExcl || !e.shared() && e.Token < ks.maxAny {
				r.violate("accepted_below_mark", "key %s: %s (%s, token %d) entered at %s after token %d (exclusive %d) had entered",
					e.Key, e.Run, modeName(e), e.Token, e.At, ks.maxAny, ks.maxExcl)
			}
			if e.shared() {
				if len(ks.sharedInside) > 0 {
					notes.add("shared_together", 1)
				}
				ks.sharedInside[e.Run] = true
			}
			ks.runs[e.Run] = &entered{seq: e.Seq, shared: e.shared()}
			ks.lastEnter = mark{e.Seq, e.Run}
			ks.maxAny = max(ks.maxAny, e.Token)
			if !e.shared() {
				ks.lastExcl = mark{e.Seq, e.Run}
				ks.maxExcl = max(ks.maxExcl, e.Token)
			}
		case "write", "exit":
			en := ks.runs[e.Run]
			if e.Kind == "exit" {
				delete(ks.sharedInside, e.Run)
			}
			if en == nil || en.late || en.exited {
				continue
			}
			en.exited = e.Kind == "exit"
			later := ks.lastEnter
			if en.shared {
				later = ks.lastExcl
			}
			if later.seq < en.seq || later.run == e.Run {
				continue
			}
			en.late = true
			judgeLate("", "", e, later.run, stalled(s), tl, window, r, notes)
		}
	}
}

// judgeLate judges call e (a write or an exit) of a run after a run that cannot run beside it
// entered (later): accepted, it is a violation; refused, it is the fencing of a stalled run (a
// note) or, if the run was not stalled, an overlap. prefix starts the violations' and the note's
// names, where says where later entered ("" or " on a related key").
func judgeLate(prefix, where string, e event, later string, stalled bool, tl *timeline, window time.Duration, r *report, notes *counter) {
	switch {
	case e.Accepted:
		r.violate(prefix+"accepted_late_write", "key %s: %s (%s, token %d) %s accepted at %s after %s entered%s",
			e.Key, e.Run, modeName(e), e.Token, e.Kind, e.At, later, where)
	case stalled:
		notes.add(prefix+"fenced_late_write_of_stalled_run", 1)
	default:
		r.violate(prefix+"overlap/"+tl.during(e.At, window), "key %s: %s (%s, token %d, client not stopped) still ran (%s %s at %s) after %s entered%s",
			e.Key, e.Run, modeName(e), e.Token, e.Kind, e.Status, e.At, later, where)
	}
}

func modeName(e event) string {
	if e.shared() {
		return "shared"
	}
	return "exclusive"
}

// checkGroup: the limit name of capacity n is fenced slot by slot (keys name#0 .. name#n-1,
// each exclusive, which checkModes judges). Here: no slot outside [0, n), and at no instant more
// than n runs of the group inside their accepted span on a slot (from the accepted enter to
// their last accepted call), in the resource's order. Unless the group reached n at once
// (group_max_inside), the check is vacuous and fails (group_unchecked).
func checkGroup(events []event, name string, n int, r *report, notes *counter) {
	prefix := name + "#"
	type span struct{ run, key string }
	last := map[span]int{} // the seq of each span's last accepted call
	for _, e := range events {
		if !strings.HasPrefix(e.Key, prefix) || !e.Accepted {
			continue
		}
		if slot, err := strconv.Atoi(strings.TrimPrefix(e.Key, prefix)); err != nil || slot < 0 || slot >= n {
			r.violate("group_slot_out_of_range", "%s (token %d) called slot key %s of a limit of %d", e.Run, e.Token, e.Key, n)
		}
		last[span{e.Run, e.Key}] = e.Seq
	}
	inside := map[span]bool{}
	most := 0
	for _, e := range events {
		sk := span{e.Run, e.Key}
		if !strings.HasPrefix(e.Key, prefix) || !e.Accepted {
			continue
		}
		if e.Kind == "enter" {
			inside[sk] = true
			if len(inside) > n {
				var runs []string
				for s := range inside {
					runs = append(runs, s.run+"@"+s.key)
				}
				r.violate("group_over_limit", "%d runs of %s inside at %s: %s", len(inside), name, e.At, strings.Join(runs, ", "))
			}
			most = max(most, len(inside))
		}
		if last[sk] == e.Seq {
			delete(inside, sk)
		}
	}
	notes.add("group_max_inside", most)
	if most < n {
		r.violate("group_unchecked", "at most %d runs of %s were inside at once (capacity %d): the scenario no longer fills the limit", most, name, n)
	}
}
