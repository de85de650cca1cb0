package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/fence"
	"github.com/batonhq/baton/store"
)

const (
	// stormClients goroutines take stormKeys keys at random (about three contenders a key), with
	// a TTL of stormTTL.
	stormClients = 48
	stormKeys    = 16
	stormTTL     = 2 * time.Second
	// stormEpoch is how long clients take the same stormKeys keys: then they go on to keys of
	// new names. A key's history stays a few thousand operations long however long the run,
	// which keeps the linearizability check's memory (quadratic in a key's operations) small.
	stormEpoch = 20 * time.Second
	// stormHolderPrefix + "c-n" is the holder of client c's n-th acquire (all of its retries):
	// the audit log tells by it whether an acquire whose answer was lost was granted.
	stormHolderPrefix = "storm/"
)

// TestStormChaos is the fault harness's volume run: stormClients clients in the test process,
// each a loop of fenced lock cycles through the HTTP client (client.Store) and a proxy to one
// `baton serve`, as fast as the server grants. A cycle waits for a key (server-side long-poll),
// renews it one time in four, calls the fenced resource (enter, write, exit) with its token
// while its holder-side deadline has not passed, and releases. An answer lost to a fault is
// asked again with the same lease ID and holder until one comes (the retry of a real client), so
// each operation of the history has one invocation and one response.
//
// Faults, after a fault-free phase: kill -9 of the server and a restart, a PostgreSQL crash
// restart, a slow and a cut network, a client that abandons its lease (it stops, as a killed
// process would: the lease expires) and a client frozen for 1.5-3 TTL after its grant that then
// calls the resource anyway (only the fence can refuse it). Checks: checkFencing (no overlap,
// tokens in grant order), checkAudit's grant half (every token the resource saw was granted,
// tokens increase in the audit log), and the history against the lease model with expiry
// (internal/history).
//
// The bounded run makes every fault once; `make chaos DURATION=…` runs it for that long, and
// BATON_CHAOS_GRANTS=N instead until N fenced grants (accepted enters) per store.
func TestStormChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		runStorm(t, "sqlite://"+filepath.Join(t.TempDir(), "baton.db"), nil)
	})
	t.Run("postgres", func(t *testing.T) {
		pg := startPostgres(t)
		runStorm(t, pg.url(), pg)
	})
}

// stormOp is one operation of a storm client, on the resource's clock: an acquire (token: the
// grant's), a renew or a release (token: the lease's). unsure marks an acquire whose answer was
// lost at least once and which ended refused: the audit log decides whether it was granted.
// ended marks a release whose answer was lost and whose retry found the lease not held: the lost
// attempt released it, or it had expired; either way it has ended.
type stormOp struct {
	client    int
	kind      string // acquire, renew, release
	key       string
	holder    string
	token     uint64
	call, ret time.Duration
	ok        bool
	unsure    bool
	ended     bool
	// grantedFrom is an acquire's lower bound of its grant instant: its call, plus the server's
	// wait if no answer was lost.
	grantedFrom time.Duration
}

type stormHarness struct {
	t      *testing.T
	res    *resource
	srv    *server
	px     *proxy
	st     *client.Store
	keysMu sync.Mutex
	keys   map[string]bool // every key a client took, for the audit log
	done   chan struct{}
	quit   atomic.Bool

	// abandon is the abandon fault's request: the client that takes it (a CAS from true)
	// abandons its lease. freezeReq carries the freeze fault's length to the first client that
	// holds a lease next; it answers on freezeDone once it runs again.
	abandon    atomic.Bool
	freezeReq  chan time.Duration
	freezeDone chan struct{}

	frozenRuns sync.Map // run ID -> true: the runs of a frozen client (only fencing stops them)

	grants atomic.Int64 // accepted enters
	mu     sync.Mutex
	ops    []stormOp
	lost   counter // cycles that lost their lease (holder-side deadline passed), by reason
}

func runStorm(t *testing.T, storeURL string, pg *postgres) {
	dur := testDuration(t)
	target := stormTarget(t)
	base := time.Now()
	h := &stormHarness{t: t, res: newResource(t, base), done: make(chan struct{}),
		freezeReq: make(chan time.Duration, 1), freezeDone: make(chan struct{}, 1)}
	h.srv = startServer(t, storeURL)
	h.px = startProxy(t, h.srv.addr)
	st, err := client.NewStore(client.Config{BaseURL: h.px.url, MaxWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.st = st
	t.Cleanup(func() { st.Close() })
	h.keys = map[string]bool{}
	faultFreeEnd := h.res.now() + faultFree(dur, 5*time.Second)
	var stopAt time.Duration // 0: the bounded run
	switch {
	case target > 0:
		stopAt = math.MaxInt64 // until the grants are reached (quitFaults)
	case dur > 0:
		stopAt = h.res.now() + dur
	}

	var wg sync.WaitGroup
	for c := range stormClients {
		wg.Go(func() { h.loop(c) })
	}
	faults, tl := &counter{}, &timeline{}
	kinds := h.faults(pg)
	faultsDone := make(chan struct{})
	quitFaults := &atomic.Bool{}
	go func() {
		defer close(faultsDone)
		time.Sleep(faultFreeEnd - h.res.now()) // the fault-free phase is a schedule
		injectFaults(h.res, stopAt, quitFaults, kinds, faults, tl, uint64(base.UnixNano()))
	}()
	if target > 0 { // a run to a number of grants: faults go on until it is reached
		go func() {
			for i := 1; h.grants.Load() < target && !h.quit.Load(); i++ {
				time.Sleep(time.Second) // a progress poll, not a synchronisation
				if i%60 == 0 {
					t.Logf("%s: %d fenced grants, faults %s", h.res.now().Round(time.Second), h.grants.Load(), faults)
				}
			}
			quitFaults.Store(true)
		}()
	}
	t.Cleanup(func() {
		h.quit.Store(true)
		quitFaults.Store(true)
		<-faultsDone
		wg.Wait()
	})
	<-faultsDone
	if target > 0 && h.grants.Load() < target {
		t.Errorf("the run ended after %d fenced grants, before the %d asked", h.grants.Load(), target)
	}
	close(h.done)
	wg.Wait()

	r := &report{}
	notes := &counter{}
	events := h.res.snapshot()
	stalled := func(s *runSpan) bool { _, ok := h.frozenRuns.Load(s.run); return ok }
	checkFencing(events, stalled, tl, 2*stormTTL, r, notes)
	sp := spans(events)
	audit := map[string][]auditEvent{}
	for k := range h.keys {
		audit[k] = h.srv.events(k)
	}
	checkStormAudit(audit, sp, r)
	ops := resolveUnsure(h.ops, audit)
	frozen := func(run string) bool { _, ok := h.frozenRuns.Load(run); return ok }
	checkStormHistory(stormHistory(ops, events, frozen), historyTimeout(max(dur, time.Since(base))), r, notes)
	if dur == 0 && target == 0 {
		checkEveryFault(kinds, faults, r)
	}
	counts := &counter{}
	for _, op := range ops {
		counts.add(fmt.Sprintf("%s_%v", op.kind, op.ok), 1)
	}
	t.Logf("chaos storm summary (%s, %s, %d clients on %d keys, TTL %s, fault-free until %s):\n"+
		"  fenced grants (accepted enters): %d\n  operations: %s\n  lost leases: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		storeName(storeURL), describeStorm(dur, target), stormClients, stormKeys, stormTTL, faultFreeEnd.Round(time.Second),
		h.grants.Load(), counts, &h.lost, faults, notes, r.violations.String())
	r.finish(t)
}

// stormTarget is BATON_CHAOS_GRANTS, the number of fenced grants a run goes on to (0: none).
func stormTarget(t *testing.T) int64 {
	v := os.Getenv("BATON_CHAOS_GRANTS")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("BATON_CHAOS_GRANTS=%q: want a positive number of grants", v)
	}
	return n
}

func describeStorm(dur time.Duration, target int64) string {
	if target > 0 {
		return fmt.Sprintf("until %d fenced grants", target)
	}
	return describeDuration(dur)
}

func (h *stormHarness) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return h.quit.Load()
	}
}

func (h *stormHarness) record(op stormOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// key is the i-th key of the current epoch.
func (h *stormHarness) key(i int) string {
	k := fmt.Sprintf("storm/e%03d/k%02d", h.res.now()/stormEpoch, i)
	h.keysMu.Lock()
	h.keys[k] = true
	h.keysMu.Unlock()
	return k
}

// loop is one client's cycles until the run ends.
func (h *stormHarness) loop(c int) {
	rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
	name := fmt.Sprintf("s%d", c)
	for n := 0; !h.ended(); n++ {
		key := h.key(rng.IntN(stormKeys))
		holder := fmt.Sprintf("%s%d-%d", stormHolderPrefix, c, n)
		l, lb, ok := h.acquire(c, key, holder, rng.IntN(8) != 0)
		if !ok {
			continue
		}
		if h.abandon.CompareAndSwap(true, false) {
			continue // a crashed holder: no calls, no release; the lease expires
		}
		frozen := false
		select {
		case d := <-h.freezeReq:
			frozen = true
			time.Sleep(d) // the fault's length
			h.freezeDone <- struct{}{}
		default:
		}
		deadline := lb + stormTTL*99/100 - 100*time.Millisecond
		if rng.IntN(4) == 0 && (frozen || h.res.now() < deadline) {
			if nlb, ok := h.renew(c, l); ok {
				deadline = nlb + stormTTL*99/100 - 100*time.Millisecond
			} else {
				deadline = 0
			}
		}
		run := fmt.Sprintf("%s-%d", name, n)
		if frozen {
			h.frozenRuns.Store(run, true)
		}
		for _, kind := range []string{"enter", "write", "exit"} {
			// A holder past its local deadline stops calling; a frozen one does not know.
			if !frozen && h.res.now() >= deadline {
				h.lost.add("deadline_before_"+kind, 1)
				break
			}
			e := event{Kind: kind, Key: key, Client: name, Run: run, Token: l.Token, Status: "ok"}
			accepted := h.res.call(e)
			if kind == "enter" && accepted {
				h.grants.Add(1)
			}
			if !accepted {
				break
			}
		}
		h.release(c, l)
	}
}

// retry calls op until it answers (nil or an error that is an answer, per answered), a
// backoff apart; it gives up only when the run has ended and the server stays unreachable.
func (h *stormHarness) retry(op func(ctx context.Context) error, answered func(error) bool) (err error, lost bool) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = op(ctx)
		cancel()
		if err == nil || answered(err) {
			return err, lost
		}
		lost = true
		if h.quit.Load() || h.ended() && attempt > 50 {
			return err, lost
		}
		time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond) // backoff between retries
	}
}

// acquire asks for key, waiting for it (a server-side long-poll) if wait; it returns the lease and the lower bound of its grant time (the call
// plus the server's wait), or false if refused.
func (h *stormHarness) acquire(c int, key, holder string, wait bool) (*store.Lease, time.Duration, bool) {
	call := h.res.now()
	var l *store.Lease
	err, lost := h.retry(func(ctx context.Context) (err error) {
		l, err = h.st.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: holder, Holder: holder, TTL: stormTTL, Wait: wait})
		return err
	}, func(err error) bool { return errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting) })
	ret := h.res.now()
	switch {
	case err == nil:
		// A retried acquire may have been granted by an earlier attempt: only the call is a
		// safe lower bound then.
		lb := call
		if !lost {
			lb = call + l.Waited*99/100
		}
		h.record(stormOp{client: c, kind: "acquire", key: key, holder: holder, token: l.Token, call: call, ret: ret, ok: true, grantedFrom: lb})
		return l, lb, true
	case errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting):
		h.record(stormOp{client: c, kind: "acquire", key: key, holder: holder, call: call, ret: ret, unsure: lost})
	default: // the run ended with the answer still lost
		h.record(stormOp{client: c, kind: "acquire", key: key, holder: holder, call: call, ret: ret, unsure: true})
	}
	return nil, 0, false
}

// renew extends l; it returns the new lower bound of the lease's start (the call), or false.
func (h *stormHarness) renew(c int, l *store.Lease) (time.Duration, bool) {
	call := h.res.now()
	err, lost := h.retry(func(ctx context.Context) error {
		_, err := h.st.Renew(ctx, &store.RenewParams{Key: l.Key, LeaseID: l.ID, TTL: stormTTL})
		return err
	}, func(err error) bool { return errors.Is(err, store.ErrNotHeld) })
	ret := h.res.now()
	if err != nil && !errors.Is(err, store.ErrNotHeld) {
		return 0, false // unknown: not recorded (a renew changes nothing the model can see but expiry)
	}
	h.record(stormOp{client: c, kind: "renew", key: l.Key, holder: l.Holder, token: l.Token, call: call, ret: ret, ok: err == nil})
	if lost {
		return 0, false // not sure which attempt renewed: the holder keeps its earlier deadline
	}
	return call, err == nil
}

// release ends l (once the calls are done).
func (h *stormHarness) release(c int, l *store.Lease) {
	call := h.res.now()
	var res *store.ReleaseResult
	err, lost := h.retry(func(ctx context.Context) (err error) {
		res, err = h.st.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID})
		return err
	}, func(err error) bool { return errors.Is(err, store.ErrNotHeld) })
	ret := h.res.now()
	if err != nil && !errors.Is(err, store.ErrNotHeld) {
		return
	}
	// An earlier attempt whose answer was lost may have released it: a later one then finds it
	// already released, or not held once the key went on to another lease.
	ok := err == nil && (!res.AlreadyReleased || lost)
	h.record(stormOp{client: c, kind: "release", key: l.Key, holder: l.Holder, token: l.Token, call: call, ret: ret, ok: ok,
		ended: lost && !ok})
}

// faults are the storm's: the store's and the network's as in the locks test, and a client
// that abandons its lease or freezes past it.
func (h *stormHarness) faults(pg *postgres) []fault {
	fs := append(storeFaults(h.t, h.srv, pg, nil), netFaults(h.px)...)
	return append(fs,
		fault{"abandon_client", func(*rand.Rand) bool {
			h.abandon.Store(true)
			return true
		}},
		fault{"freeze_client", func(rng *rand.Rand) bool {
			h.freezeReq <- between(rng, stormTTL*3/2, stormTTL*3)
			for {
				select {
				case <-h.freezeDone:
					return true
				case <-time.After(100 * time.Millisecond): // a check of the end of the run
					if h.quit.Load() {
						select {
						case <-h.freezeReq: // nobody took it
						default:
						}
						return false
					}
				}
			}
		}},
	)
}

// call is one call of a storm client to the fenced resource, in process: the handler a CMD's
// HTTP call reaches, without the round trip. It reports whether the resource accepted it.
func (r *resource) call(e event) bool {
	body, err := json.Marshal(e)
	if err != nil {
		panic(err) // an event always encodes
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	fence.Header(req, e.Key, e.Token)
	w := httptest.NewRecorder()
	r.handle(w, req)
	return w.Code == http.StatusNoContent
}

// checkStormAudit is checkAudit's grant half, per key: every token the resource saw was
// granted in the audit log, whose grants of a key carry increasing, never reused tokens.
func checkStormAudit(audit map[string][]auditEvent, sp map[string]*runSpan, r *report) {
	byKey := map[string]map[string]*runSpan{}
	for id, s := range sp {
		if byKey[s.key] == nil {
			byKey[s.key] = map[string]*runSpan{}
		}
		byKey[s.key][id] = s
	}
	for key, events := range audit {
		checkAudit(events, nil, byKey[key], r)
	}
}

// resolveUnsure decides, from the audit log, each acquire whose answer was lost and that ended
// refused or unanswered: granted (with its token) if the log grants its holder, refused if not.
// An acquire retried after a lost answer can also have been granted twice (the first grant
// expired during the retries): each grant of its holder the op does not show becomes an
// acquire of its own, within the same call and return.
func resolveUnsure(ops []stormOp, audit map[string][]auditEvent) []stormOp {
	granted := map[string][]uint64{}
	for _, events := range audit {
		for _, e := range events {
			if e.Kind == "acquire" || e.Kind == "expiry_takeover" {
				granted[e.Holder] = append(granted[e.Holder], e.Token)
			}
		}
	}
	out := make([]stormOp, 0, len(ops))
	for _, op := range ops {
		if op.kind != "acquire" {
			out = append(out, op)
			continue
		}
		tokens := granted[op.holder]
		if op.unsure {
			op.unsure, op.ok, op.token, op.grantedFrom = false, len(tokens) > 0, 0, op.call
			if op.ok {
				op.token = tokens[len(tokens)-1]
			}
		}
		for _, tok := range tokens {
			if tok != op.token {
				extra := op
				extra.ok, extra.token, extra.grantedFrom = true, tok, op.call
				out = append(out, extra)
			}
		}
		out = append(out, op)
	}
	return out
}
