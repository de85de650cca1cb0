package redis_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	batonredis "github.com/batonhq/baton/store/redis"
)

// proxy is a loopback TCP proxy of the test's own: it forwards every connection to its current
// target, and switching the target closes every connection open through it, as a DNS or VIP
// change (or a Sentinel-aware client) points clients at a new primary.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	gen    int                   // incremented by every switch
	conns  map[net.Conn]struct{} // both ends of every open pair
	wg     sync.WaitGroup
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track registers c unless a switch happened since gen (then it closes c and reports false).
func (p *proxy) track(c net.Conn, gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *proxy) forward(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	target, gen := p.target, p.gen
	p.mu.Unlock()
	if !p.track(c, gen) {
		return
	}
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		p.untrack(c)
		return
	}
	if !p.track(u, gen) {
		p.untrack(c)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go pipe(u, c)
	go pipe(c, u)
	<-done // one direction ended: close both, which ends the other
	p.untrack(c, u)
	<-done
}

// switchTo points new connections at target and closes every open one.
func (p *proxy) switchTo(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	p.gen++
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.switchTo("")
	p.wg.Wait()
}

// replInfo is what INFO replication says about a server's replication history.
type replInfo struct{ role, replID, replID2, link string }

func replicationOf(t testing.TB, rdb *goredis.Client) replInfo {
	t.Helper()
	s, err := rdb.Info(testCtx(t), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) string {
		for _, line := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				return v
			}
		}
		return ""
	}
	return replInfo{field("role"), field("master_replid"), field("master_replid2"), field("master_link_status")}
}

func counterOn(t testing.TB, rdb *goredis.Client) uint64 {
	t.Helper()
	v, err := rdb.Get(testCtx(t), "baton:token").Result()
	if errors.Is(err, goredis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A replica promoted after its primary crashed (REPLICAOF NO ONE, what Sentinel does) lacks the
// grants that had not reached it: its counter is behind tokens already handed out. Stores that
// were running before, once pointed at it (a proxy switch), must refuse to grant (ErrTokensReset)
// rather than hand out a token at or below one already issued, whether the replica persists
// nothing or every write (appendonly yes, appendfsync always: its data still came by asynchronous
// replication, not through its own fsync).
//
// Store a saw only the replicated tokens; store b issued the lost ones. A store opened after the
// promotion cannot know the lost tokens and repeats them (documented); TokenFloor, set above every
// token issued, is the way back.
func TestReplicaPromotionRefusesTokens(t *testing.T) {
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", persist), func(t *testing.T) {
			ctx := testCtx(t)
			primary := startServer(t, persist)
			replica := startServer(t, persist, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
			padm := goredis.NewClient(&goredis.Options{Addr: primary.addr()})
			defer padm.Close()
			radm := goredis.NewClient(&goredis.Options{Addr: replica.addr()})
			defer radm.Close()
			px := startProxy(t, primary.addr())

			a, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr()})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			var replicated []uint64
			for i := range 3 {
				l, err := acquire(ctx, a, "a"+strconv.Itoa(i), "a")
				if err != nil {
					t.Fatal(err)
				}
				replicated = append(replicated, l.Token)
			}
			// WAIT returns once the replica acknowledged every write so far (bounded by hangGuard).
			if n, err := padm.Wait(ctx, 1, hangGuard).Result(); err != nil || n != 1 {
				t.Fatalf("WAIT for the replica: %d, %v", n, err)
			}
			if c := counterOn(t, radm); c != replicated[len(replicated)-1] {
				t.Fatalf("replica's counter %d after WAIT, want %d", c, replicated[len(replicated)-1])
			}
			// Cut the replica off before the last grants: it follows a port where nothing
			// listens, keeping its data and its replication history.
			if err := radm.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(freePort(t))).Err(); err != nil {
				t.Fatal(err)
			}
			b, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr()})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var lost []uint64
			for i := range 5 {
				l, err := acquire(ctx, b, "b"+strconv.Itoa(i), "b")
				if err != nil {
					t.Fatal(err)
				}
				lost = append(lost, l.Token)
			}
			highest := lost[len(lost)-1]
			if c := counterOn(t, radm); c >= lost[0] {
				t.Fatalf("replica's counter %d is not behind the lost tokens %v: the test proves nothing", c, lost)
			}
			before := replicationOf(t, padm)

			primary.stop() // a crash: nothing more reaches the replica
			if err := radm.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
				t.Fatal(err)
			}
			after := replicationOf(t, radm)
			behind := counterOn(t, radm)
			t.Logf("tokens %v replicated, %v lost; promoted replica: counter %d, role %s, master_replid %s, master_replid2 %s (the primary's was %s)",
				replicated, lost, behind, after.role, after.replID, after.replID2, before.replID)
			if after.role != "master" || after.replID2 != before.replID {
				t.Fatalf("promotion: %+v, want role master and master_replid2 %s", after, before.replID)
			}
			px.switchTo(replica.addr())

			for _, s := range []struct {
				name string
				st   *batonredis.Store
				why  string // in the refusal
			}{
				{"a (saw only replicated tokens)", a, "promoted replica of the server this store knew"},
				{"b (issued the lost tokens)", b, ""},
			} {
				l, err := acquireRetrying(t, s.st, "after", "after")
				if err == nil {
					if l.Token <= highest {
						t.Fatalf("store %s after the promotion: granted token %d, but token %d was already issued", s.name, l.Token, highest)
					}
					t.Fatalf("store %s after the promotion: granted token %d; want ErrTokensReset", s.name, l.Token)
				}
				if !errors.Is(err, batonredis.ErrTokensReset) {
					t.Fatalf("store %s after the promotion: %v, want ErrTokensReset", s.name, err)
				}
				if !strings.Contains(err.Error(), s.why) {
					t.Fatalf("store %s after the promotion: %v; want it to say %q", s.name, err, s.why)
				}
				t.Logf("store %s after the promotion: %v", s.name, err)
			}
			// A refused grant leaves no lease behind (a grant that ran before the store noticed the
			// new server is rolled back; the counter may keep its increment, a token no one holds).
			if l, err := batonredis.LiveLease(ctx, radm, "baton:", "after"); err != nil || l != nil {
				t.Fatalf("a refused grant left a lease behind: %+v, %v", l, err)
			}
			t.Logf("promoted replica's counter: %d at the promotion, %d after the refusals", behind, counterOn(t, radm))

			// A store opened after the promotion has no earlier token to compare with: it
			// repeats the lost ones.
			fresh, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr()})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			l, err := acquire(ctx, fresh, "fresh", "fresh")
			if err != nil {
				t.Fatal(err)
			}
			if l.Token > highest {
				t.Fatalf("a store opened after the promotion granted token %d, above the lost %d: update the docs", l.Token, highest)
			}
			t.Logf("a store opened after the promotion granted token %d again (lost tokens %v)", l.Token, lost)

			// The way back: an operator raises the counter above every token ever issued; the
			// stores that refused stay refused (the refusal is sticky) until reopened.
			floor := highest + 1000
			healed, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr(), TokenFloor: floor})
			if err != nil {
				t.Fatal(err)
			}
			defer healed.Close()
			if l, err := acquire(ctx, healed, "healed", "healed"); err != nil || l.Token <= floor {
				t.Fatalf("after TokenFloor %d: %+v, %v", floor, l, err)
			} else {
				t.Logf("after TokenFloor %d: token %d", floor, l.Token)
			}
			for _, st := range []*batonredis.Store{a, b} {
				if _, err := acquire(ctx, st, "again", "again"); !errors.Is(err, batonredis.ErrTokensReset) {
					t.Fatalf("a store that refused, after TokenFloor: %v, want ErrTokensReset (sticky)", err)
				}
			}
		})
	}
}

// waitFor polls cond until it holds (bounded by hangGuard): for server states that send no
// signal, such as a replication link coming up.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, hangGuard)
		}
		time.Sleep(20 * time.Millisecond) // polling: the server sends no signal
	}
}

// The same server process (same run_id) whose data was replaced by a sync from another server,
// then made a primary again (as when Sentinel demotes a returning primary to a replica of the
// new one, and later promotes it back): its counter is the other server's, behind tokens already
// handed out. Its master_replid changed and master_replid2 is the other server's, so a store
// that knew it refuses to grant, even though it persists every write and its run_id is the same.
func TestResyncedServerRefusesTokens(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t, true)
	other := startServer(t, true)
	sadm := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer sadm.Close()
	oadm := goredis.NewClient(&goredis.Options{Addr: other.addr()})
	defer oadm.Close()
	px := startProxy(t, srv.addr())

	a, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	la, err := acquire(ctx, a, "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := batonredis.Open(ctx, batonredis.Config{Addr: px.addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var highest uint64
	for i := range 4 {
		l, err := acquire(ctx, b, "b"+strconv.Itoa(i), "b")
		if err != nil {
			t.Fatal(err)
		}
		highest = l.Token
	}
	// The other server's counter stands at a's token: it lacks b's.
	if err := oadm.Set(ctx, "baton:token", la.Token, 0).Err(); err != nil {
		t.Fatal(err)
	}
	before, runID := replicationOf(t, sadm), infoRunID(t, sadm)
	if err := sadm.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(other.port)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server's sync from the other", func() bool {
		return replicationOf(t, sadm).link == "up" && counterOn(t, sadm) == la.Token
	})
	if err := sadm.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	after := replicationOf(t, sadm)
	t.Logf("tokens %d (a) and up to %d (b); after the resync: counter %d, run_id %s (was %s), master_replid %s (was %s), master_replid2 %s (the other's %s)",
		la.Token, highest, counterOn(t, sadm), infoRunID(t, sadm), runID, after.replID, before.replID, after.replID2, replicationOf(t, oadm).replID)
	if infoRunID(t, sadm) != runID || after.role != "master" {
		t.Fatalf("the server restarted or is not a primary: %+v", after)
	}
	px.switchTo(srv.addr()) // reconnect

	for _, st := range []*batonredis.Store{a, b} {
		l, err := acquireRetrying(t, st, "after", "after")
		if err == nil {
			t.Fatalf("after the resync: granted token %d; token %d was already issued; want ErrTokensReset", l.Token, highest)
		}
		if !errors.Is(err, batonredis.ErrTokensReset) {
			t.Fatalf("after the resync: %v, want ErrTokensReset", err)
		}
		t.Logf("after the resync: %v", err)
	}
}

func infoRunID(t testing.TB, rdb *goredis.Client) string {
	t.Helper()
	s, err := rdb.Info(testCtx(t), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	t.Fatal("no run_id")
	return ""
}
