package chaos

import (
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/history"
)

// stormHistory maps the storm's operations (after resolveUnsure) and the resource's events to
// the Fenced model's history: a grant from its call (or, for an answer that was not lost, the
// call plus the server's wait) to its answer; a renew and a release as asked and answered; a
// release whose answer was lost and whose retry found the lease not held as of unknown outcome
// within its call and last answer (it released the lease, or the lease had ended); every call on
// the resource, accepted or refused, at the instant the resource recorded it, stalled if its
// client was frozen during the run. Refused acquires are left out: with the line, a key with
// waiters is refused to a newcomer while no lease is live.
func stormHistory(ops []stormOp, events []event, frozen func(run string) bool) *history.FencedRecorder {
	rec := &history.FencedRecorder{}
	for _, op := range ops {
		in := history.FencedInput{Key: op.key, Token: op.token, Call: int64(op.call), Who: op.holder}
		out := history.FencedOutput{OK: op.ok, Return: int64(op.ret)}
		switch op.kind {
		case "acquire":
			if !op.ok {
				continue
			}
			in.Kind, in.Call = history.FencedGrant, int64(op.grantedFrom)
		case "renew":
			in.Kind = history.FencedRenew
		default:
			in.Kind = history.FencedRelease
			out.Unknown = op.ended
		}
		rec.Add(op.client, in, out)
	}
	for _, e := range events {
		c, _ := strconv.Atoi(strings.TrimPrefix(e.Client, "s"))
		rec.Add(c, history.FencedInput{Kind: history.FencedWrite, Key: e.Key, Token: e.Token, Call: int64(e.At),
			Stalled: frozen(e.Run), Who: e.Run}, history.FencedOutput{OK: e.Accepted, Return: int64(e.At) + 1})
	}
	return rec
}

// checkStormHistory is check 9 over the storm: the history is linearizable against the Fenced
// model with expiry after the TTL less 1 % (clients and server share this machine's clock).
func checkStormHistory(rec *history.FencedRecorder, timeout time.Duration, r *report, notes *counter) {
	notes.add("history_ops", rec.Len())
	checked(func() error { return rec.Check(stormTTL*99/100, timeout) }, r, notes)
}
