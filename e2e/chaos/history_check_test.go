package chaos

import (
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/history"
)

const (
	// historyDrift is the clock drift the model allows between the harness's clock and the
	// store's (one machine: this covers mapping the audit log's wall times onto the harness's
	// monotonic clock, not real drift).
	historyDrift = 0.1
	// auditSlack is subtracted from an audit grant's time mapped onto the harness's clock
	// before it bounds the grant from below.
	auditSlack = 100 * time.Millisecond
)

// historyTimeout bounds the porcupine check of one run of duration dur (0: the bounded run): a
// minute, or a third of a longer run's duration (a history grows with the run, and its check
// faster than linearly when grants are bounded only by their runs' starts, as over Redis). A
// check that does not finish is a violation (history_unchecked), never a pass.
func historyTimeout(dur time.Duration) time.Duration { return max(time.Minute, dur/3) }

// lockHistory is what check 9 reads after a locks run: the runs, the resource's events of the
// key, the key's audit log (nil for a store without one), the harness's clock base, and
// whether a run's client was stopped during it.
type lockHistory struct {
	key     string
	ttl     time.Duration
	runs    []runRecord
	events  []event
	audit   []auditEvent
	base    time.Time
	stalled func(runRecord) bool
	timeout time.Duration // of the porcupine check
}

// checkHistory is check 9: it maps the run onto invoke/return pairs and checks them for
// linearizability against the lease model with expiry and the fenced resource
// (history.Fenced): per run of `baton run` that was granted,
//
//   - a grant of its token (from its CMD's calls, or the audit log's grant to its holder),
//     called at the run's start, or later at the audit grant's time mapped onto the harness's
//     clock (minus auditSlack), which bounds the grant from below; returned at its CMD's first
//     call on the resource, or at the run's end if CMD never called;
//   - each call of its CMD on the resource (enter, write, exit), accepted or refused, at the
//     instant the resource recorded it, marked stalled if the run's client was stopped during
//     the run;
//   - its release: with an audit log, a release event of its token is a release called after
//     its CMD's last call (baton run releases once CMD has exited: a release before that breaks
//     the contract and no order fits it) and returned by the run's end, and no event means no
//     release took effect;
//     without one (Redis), a run that exited 0 without a release error released, and any other
//     release has an unknown outcome, returned at the run's end plus the TTL (its lease has
//     expired by then either way, and its CMD is dead: whether the release took effect cannot
//     show after that; Never would do too, at the cost of a longer search).
//
// Runs that were never granted (busy, errors) change no state and are left out; renewals are
// not seen (baton run renews inside), so a grant is checked against its predecessor's grant
// alone: the model accepts a takeover TTL*(1-historyDrift) after that grant.
func checkHistory(h lockHistory, r *report, notes *counter) {
	sp := spans(h.events)
	byRun := map[string][]event{}
	for _, e := range h.events {
		if e.Key == h.key {
			byRun[e.Run] = append(byRun[e.Run], e)
		}
	}
	grantAt := map[string]time.Duration{}
	grantToken := map[string]uint64{}
	released := map[uint64]bool{}
	for _, e := range h.audit {
		switch e.Kind {
		case "acquire", "expiry_takeover":
			run := strings.TrimPrefix(e.Holder, holderPrefix)
			grantAt[run] = e.At.Sub(h.base)
			grantToken[run] = e.Token
		case "release":
			released[e.Token] = true
		}
	}
	runs := append([]runRecord(nil), h.runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
	var rec history.FencedRecorder
	for client, rr := range runs {
		var token uint64
		s := sp[rr.id]
		switch {
		case s != nil && s.key == h.key:
			token = s.token
		case grantToken[rr.id] != 0:
			token = grantToken[rr.id]
		default:
			continue // never granted, or granted and killed before CMD: unseen, no state
		}
		ret := rr.end
		if evs := byRun[rr.id]; len(evs) > 0 {
			ret = evs[0].At
		}
		from := rr.start
		if at, ok := grantAt[rr.id]; ok {
			from = max(from, min(at-auditSlack, ret))
		}
		rec.Add(client, history.FencedInput{Kind: history.FencedGrant, Key: h.key, Token: token, Call: int64(from), Who: rr.id},
			history.FencedOutput{OK: true, Return: int64(ret)})
		stalled := h.stalled(rr)
		for _, e := range byRun[rr.id] {
			rec.Add(client, history.FencedInput{Kind: history.FencedWrite, Key: h.key, Token: e.Token, Call: int64(e.At),
				Stalled: stalled, Who: rr.id}, history.FencedOutput{OK: e.Accepted, Return: int64(e.At) + 1})
		}
		// baton run releases once CMD has exited: the release is called after CMD's last call
		// (a release before it breaks the contract, and then no order fits).
		relCall := from
		if evs := byRun[rr.id]; len(evs) > 0 {
			relCall = max(from, evs[len(evs)-1].At)
		}
		release := history.FencedInput{Kind: history.FencedRelease, Key: h.key, Token: token, Call: int64(relCall), Who: rr.id}
		switch {
		case h.audit != nil && released[token]:
			rec.Add(client, release, history.FencedOutput{OK: true, Return: int64(rr.end)})
		case h.audit != nil:
		case rr.code == 0 && !strings.Contains(rr.stderr, "baton run: releasing"):
			rec.Add(client, release, history.FencedOutput{OK: true, Return: int64(rr.end)})
		default:
			// Unknown; by the run's end plus the TTL its lease has expired either way and its
			// CMD is dead (check 6), so the release's effect cannot show after that.
			rec.Add(client, release, history.FencedOutput{Unknown: true, Return: int64(rr.end + h.ttl)})
		}
	}
	notes.add("history_ops", rec.Len())
	minTTL := time.Duration(float64(h.ttl) * (1 - historyDrift))
	checked(func() error { return rec.Check(minTTL, h.timeout) }, r, notes)
}

// checked runs one check 9 and reports its outcome: history_not_linearizable, or
// history_unchecked for a check that did not finish in time (never a pass), and its time in the
// notes.
func checked(check func() error, r *report, notes *counter) {
	began := time.Now()
	err := check()
	notes.add("history_check_ms", int(time.Since(began).Milliseconds()))
	var unchecked *history.UncheckedError
	switch {
	case err == nil:
	case errors.As(err, &unchecked):
		r.violate("history_unchecked", "%v", err)
	default:
		r.violate("history_not_linearizable", "%v", err)
	}
}
