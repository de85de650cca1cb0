package chaos

import (
	"sort"
	"time"
)

// checkTree is checkModes for the keys of a tree (keys; the other events are ignored), where
// runs on related keys (one an ancestor of the other, or equal) conflict unless both are
// shared, and runs on unrelated keys (siblings, cousins) never do. In the order the resource
// recorded the calls:
//
//  1. no overlap: a write or exit of run A recorded after the accepted enter of a run B on a
//     key related to A's, that entered after A and cannot run beside it (either is exclusive),
//     means CMD A still ran when B started: an exclusive parent beside any run below it, a
//     shared parent beside an exclusive child, two runs of one key by mode. That is allowed only
//     if A's client was stopped during its run (stalled), and then the call must have been
//     refused.
//  2. marks: an accepted exclusive enter has a token no lower than every enter accepted before
//     on a related key, a shared one no lower than every exclusive enter accepted before on a
//     related key; a refused enter is allowed only for a stalled run; a token used by two runs
//     is a violation (tokens are store-wide on the stores that keep trees).
//
// The check reads each run's key and mode from its calls and derives its relatives from the
// keys: it does not trust the resource's treeFence. notes counts the enters beside a run on
// another key of the tree that was inside (tree_together: a shared parent with a shared child,
// two children); unless that happened, the check is vacuous and fails (tree_unchecked).
func checkTree(events []event, keys treeKeys, stalled func(*runSpan) bool, tl *timeline, window time.Duration, r *report, notes *counter) {
	var evs []event
	for _, e := range events {
		if keys.has(e.Key) {
			evs = append(evs, e)
		}
	}
	sp := spans(evs)
	type entered struct {
		key    string
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
		lastEnter, lastExcl mark
		maxAny, maxExcl     uint64
	}
	ks := map[string]*keyState{}
	runs := map[string]*entered{}
	tokenRun := map[uint64]string{}
	lastCall := map[string]int{} // the seq of each run's last accepted call
	for _, e := range evs {
		if e.Accepted {
			lastCall[e.Run] = e.Seq
		}
	}
	inside := map[string]string{} // run: key, from its accepted enter to its last accepted call
	together := 0
	for _, e := range evs {
		s := sp[e.Run]
		switch e.Kind {
		case "enter":
			if other, ok := tokenRun[e.Token]; ok && other != e.Run {
				r.violate("tree_token_reuse", "token %d entered by %s and by %s", e.Token, other, e.Run)
			}
			tokenRun[e.Token] = e.Run
			var maxAny, maxExcl uint64
			for k, st := range ks {
				if related(k, e.Key) {
					maxAny, maxExcl = max(maxAny, st.maxAny), max(maxExcl, st.maxExcl)
				}
			}
			if !e.Accepted {
				if stalled(s) {
					notes.add("tree_fenced_stale_enter", 1)
				} else {
					r.violate("tree_token_order/"+tl.during(e.At, window), "key %s: %s (%s, token %d) refused at enter at %s (greatest token entered on a related key %d, exclusive %d)",
						e.Key, e.Run, modeName(e), e.Token, e.At, maxAny, maxExcl)
				}
				continue
			}
			if e.shared() && e.Token < maxExcl || !e.shared() && e.Token < maxAny {
				r.violate("tree_accepted_below_mark", "key %s: %s (%s, token %d) entered at %s after token %d (exclusive %d) had entered on a related key",
					e.Key, e.Run, modeName(e), e.Token, e.At, maxAny, maxExcl)
			}
			for run, k := range inside {
				if run != e.Run && k != e.Key {
					together++
					break
				}
			}
			inside[e.Run] = e.Key
			st := ks[e.Key]
			if st == nil {
				st = &keyState{lastEnter: mark{seq: -1}, lastExcl: mark{seq: -1}}
				ks[e.Key] = st
			}
			runs[e.Run] = &entered{key: e.Key, seq: e.Seq, shared: e.shared()}
			st.lastEnter = mark{e.Seq, e.Run}
			st.maxAny = max(st.maxAny, e.Token)
			if !e.shared() {
				st.lastExcl = mark{e.Seq, e.Run}
				st.maxExcl = max(st.maxExcl, e.Token)
			}
		case "write", "exit":
			en := runs[e.Run]
			if en == nil || en.late || en.exited {
				break
			}
			en.exited = e.Kind == "exit"
			// The latest enter, on a related key, of a run that cannot run beside this one.
			later := mark{seq: -1}
			for k, st := range ks {
				if !related(k, en.key) {
					continue
				}
				m := st.lastEnter
				if en.shared {
					m = st.lastExcl
				}
				if m.run != e.Run && m.seq > later.seq {
					later = m
				}
			}
			if later.seq < en.seq {
				break
			}
			en.late = true
			judgeLate("tree_", " on a related key", e, later.run, stalled(s), tl, window, r, notes)
		}
		if e.Accepted && lastCall[e.Run] == e.Seq {
			delete(inside, e.Run)
		}
	}
	notes.add("tree_together", together)
	if together == 0 && len(evs) > 0 {
		var keys []string
		for k := range ks {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		r.violate("tree_unchecked", "no run entered beside a run on another key of the tree (keys entered: %v): the scenario no longer runs related or sibling keys together", keys)
	}
}
