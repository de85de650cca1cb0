package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPartitionChaos: the locks scenario (8 clients loop `baton run --lock K --ttl 2s --wait 30s
// -- CMD` on one key) in a network of namespaces (netTopo): clients c0, c2, c4, c6 in cli0 and
// c1, c3, c5, c7 in cli1, each namespace with a link of its own to the server's, and PostgreSQL
// in a namespace of its own behind the server. The faults cut real links: both ways (the link
// down) and one way (the sending side drops every packet) between a client namespace and the
// server, and over PostgreSQL between the server and the database. The CMDs write for 1-4 s,
// so a cut of a client's link (3-4 s, longer than the TTL) often falls inside a critical
// section and the key changes hands meanwhile. The checks are the locks test's (overlap,
// token order, audit, nothing lost, fault-free phase, every fault injected). The two stores run
// in parallel, each in namespaces of its own, and beside TestClockChaos's runs (partitionRuns
// bounds them all).
func TestPartitionChaos(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		r, _ := runPartition(t, partitionSpec{faults: clientLinkFaults})
		r.finish(t)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		r, _ := runPartition(t, partitionSpec{pg: true, faults: func(p *partitionRig) []fault {
			return append(clientLinkFaults(p), dbLinkFaults(p)...)
		}})
		r.finish(t)
	})
}

// partitionSpec is one run in the namespace topology.
type partitionSpec struct {
	pg bool // over a PostgreSQL in the db namespace (else SQLite)
	// bin is the baton binary (default: the harness's); clientEnv and serverEnv are set for
	// every baton run and for baton serve (the chaosclock switches).
	bin                  string
	clientEnv, serverEnv []string
	pgEnv                []string // PostgreSQL's programs' (libfaketime's)
	// span is the CMDs' BATON_CHAOS_SPAN (default 1s-4s); clients is how many clients loop
	// (default 8; fewer, and the line drains sooner at the end of a run of long CMDs).
	span    string
	clients int
	faults  func(p *partitionRig) []fault
}

// partitionRig is what the faults of a partition run act on.
type partitionRig struct {
	h *lockHarness
	n *netTopo
}

const partitionPort = "7070" // baton serve's port in the srv namespace (a namespace of its own)

// runPartition runs the scenario and its checks, and returns the report, which the caller
// finishes (a run beyond a bound expects violations), and the resource's events.
// partitionRuns bounds how many partition runs (each a server with its clients, and perhaps a
// PostgreSQL, in network namespaces of their own, under faults) go at once, whatever go test's
// -parallel (scripts/test.sh raises it for the suites that mostly wait on TTLs): two, as on the
// 2-core machine that these runs' margins were set on.
var partitionRuns = make(chan struct{}, 2)

func runPartition(t *testing.T, spec partitionSpec) (*report, []event) {
	partitionRuns <- struct{}{}
	t.Cleanup(func() { <-partitionRuns })
	dur := testDuration(t)
	if spec.bin == "" {
		spec.bin = binary
	}
	if spec.span == "" {
		spec.span = "1s-4s"
	}
	if spec.clients == 0 {
		spec.clients = lockClients
	}
	n := newNetTopo(t, 2, spec.pg)
	base := time.Now()
	h := &lockHarness{t: t, res: newResource(t, base), dir: t.TempDir(), done: make(chan struct{})}
	h.res.serveUnix(t)
	store := "sqlite://" + filepath.Join(t.TempDir(), "baton.db")
	if spec.pg {
		h.pg = startPostgresIn(t, n.ns("db"), dbIP, spec.pgEnv...)
		store = h.pg.url()
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = &server{t: t, addr: "0.0.0.0:" + partitionPort, url: "http://" + n.srvIP + ":" + partitionPort, store: store,
		log: log, argv: append(n.exec("srv", append([]string{"env"}, spec.serverEnv...)...), spec.bin),
		// Its addresses exist only in the test's namespaces and on the admin link.
		extra: []string{"--insecure-no-auth", "--allowed-host", strings.Join([]string{n.srvIP, srvCliIP(0), srvCliIP(1)}, ",")}}
	t.Cleanup(h.srv.stop)
	if err := h.srv.start(); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"env", "BATON_CHAOS_SPAN=" + spec.span}, spec.clientEnv...)
	h.clientArgv = func(c *lockClient) []string {
		return append(n.exec(fmt.Sprintf("cli%d", clientGroup(c.name)), env...), spec.bin)
	}
	h.route = func(c *lockClient, _ string) string {
		return "http://" + srvCliIP(clientGroup(c.name)) + ":" + partitionPort
	}
	rig := &partitionRig{h: h, n: n}

	faultFreeEnd := h.res.now() + faultFree(dur, 10*time.Second)
	var stopAt time.Duration
	if dur > 0 {
		stopAt = h.res.now() + dur
	}
	var wg sync.WaitGroup
	clients := h.startClients(spec.clients, &wg)
	faults, tl := &counter{}, &timeline{}
	faultKinds := spec.faults(rig)
	faultsDone := h.done
	h.startFaults(faultFreeEnd, stopAt, faultKinds, faults, tl, uint64(base.UnixNano()))
	killAll := func() { killRuns(clients) }
	t.Cleanup(func() { // after a fatal error, nothing may outlive the test (nor its namespaces)
		h.quit.Store(true)
		killAll()
		wg.Wait()
		<-faultsDone
	})
	<-faultsDone
	// A run waits at most --wait (30 s).
	if !waitLoops(&wg, 3*time.Minute, killAll) {
		t.Error("some baton run did not exit within 3 minutes of the end of the run")
	}

	r, notes := &report{}, &counter{}
	events := h.res.snapshot()
	byRun := map[string]runRecord{}
	for _, rr := range h.runs {
		byRun[rr.id] = rr
	}
	// No client is ever stopped here: every late call of a run after a newer token entered
	// is an overlap, refused or not.
	checkFencing(events, func(*runSpan) bool { return false }, tl, 2*lockTTL, r, notes)
	checkOrphans(events, r)
	sp := spans(events)
	audit := h.srv.events(lockKey)
	checkAudit(audit, h.runs, sp, r)
	checkFaultFree(h.runs, auditWaits(h.runs, audit), faultFreeEnd, dur > 0, r, notes)
	if dur == 0 {
		checkEveryFault(faultKinds, faults, r)
	}
	exits := &counter{}
	for _, rr := range h.runs {
		exits.add(exitClass(rr.code), 1)
	}
	t.Logf("chaos partition summary (%s, %s, %d clients in 2 namespaces, TTL %s, CMD span %s, one-way cut by %q, client env %v, server env %v, fault-free until %s):\n"+
		"  runs: %d (CMDs that entered: %d; %s)\n  exit codes: %s\n  faults: %s\n  notes: %s\n  violations: %s",
		storeName(store), describeDuration(dur), spec.clients, lockTTL, spec.span, n.oneWay, spec.clientEnv, spec.serverEnv,
		faultFreeEnd.Round(time.Second), len(h.runs), countEntered(sp), handoverStats(events), exits, faults, notes,
		r.violations.String())
	return r, events
}

// clientGroup is the client namespace (0 or 1) of client cN: N mod 2.
func clientGroup(name string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "c"))
	return i % 2
}

// holderGroup is the client namespace of the client whose CMD is inside (its last accepted
// enter has no exit yet), or a random one: a cut there falls inside a critical section.
func (p *partitionRig) holderGroup(rng *rand.Rand) int {
	events := p.h.res.snapshot()
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Kind == "exit" {
			break
		}
		if e.Kind == "enter" && e.Accepted {
			return clientGroup(e.Client)
		}
	}
	return rng.IntN(2)
}

// linkFault is a fault that breaks something for between lo and hi, then mends it.
func linkFault(t *testing.T, name string, lo, hi time.Duration, breakIt func(rng *rand.Rand) (mend func() error, err error)) fault {
	return fault{name, func(rng *rand.Rand) bool {
		mend, err := breakIt(rng)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return false
		}
		time.Sleep(between(rng, lo, hi)) // the fault's length
		if err := mend(); err != nil {
			t.Errorf("%s: mending: %v", name, err)
		}
		return true
	}}
}

// clientLinkFaults cut the link between the server and the client namespace of the client
// inside (holderGroup) for 1.5-2 TTL (3-4 s), so that the lease changes hands while its CMD is
// likely still inside: both ways (the server's end down), only the client's packets (the
// client's end drops what it sends), only the server's.
func clientLinkFaults(p *partitionRig) []fault {
	t, n := p.h.t, p.n
	lo, hi := 3*lockTTL/2, 2*lockTTL
	return []fault{
		linkFault(t, "cut_client_link", lo, hi, func(rng *rand.Rand) (func() error, error) {
			dev := fmt.Sprintf("c%d", p.holderGroup(rng))
			return func() error { return n.setLink("srv", dev, true) }, n.setLink("srv", dev, false)
		}),
		linkFault(t, "drop_client_to_server", lo, hi, func(rng *rand.Rand) (func() error, error) {
			ns := fmt.Sprintf("cli%d", p.holderGroup(rng))
			return func() error { return n.drop(ns, "s", false) }, n.drop(ns, "s", true)
		}),
		linkFault(t, "drop_server_to_client", lo, hi, func(rng *rand.Rand) (func() error, error) {
			dev := fmt.Sprintf("c%d", p.holderGroup(rng))
			return func() error { return n.drop("srv", dev, false) }, n.drop("srv", dev, true)
		}),
	}
}

// dbLinkFaults cut the link between the server and PostgreSQL for 0.5-4 s: both ways, only
// the server's packets, only the database's.
func dbLinkFaults(p *partitionRig) []fault {
	t, n := p.h.t, p.n
	lo, hi := 500*time.Millisecond, 4*time.Second
	return []fault{
		linkFault(t, "cut_db_link", lo, hi, func(*rand.Rand) (func() error, error) {
			return func() error { return n.setLink("srv", "db", true) }, n.setLink("srv", "db", false)
		}),
		linkFault(t, "drop_server_to_db", lo, hi, func(*rand.Rand) (func() error, error) {
			return func() error { return n.drop("srv", "db", false) }, n.drop("srv", "db", true)
		}),
		linkFault(t, "drop_db_to_server", lo, hi, func(*rand.Rand) (func() error, error) {
			return func() error { return n.drop("db", "s", false) }, n.drop("db", "s", true)
		}),
	}
}

// serveUnix serves the resource on a Unix socket as well and makes its URL that socket's
// (unix:PATH, which fencedcmd dials): reachable from every network namespace, whatever the
// links do.
func (r *resource) serveUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resource.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.handle)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "unix:" + path
}
