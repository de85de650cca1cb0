package chaos

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// interval is a span of the harness's clock (since the test began).
type interval struct{ from, to time.Duration }

// stopLog records when each client (baton run loop or baton worker) was SIGSTOPped, so the
// checks can tell a stalled holder (whose late writes fencing must refuse) from a wrapper that
// let its command run on after another holder started.
type stopLog struct {
	mu       sync.Mutex
	byClient map[string][]interval
}

func (l *stopLog) add(client string, iv interval) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byClient == nil {
		l.byClient = map[string][]interval{}
	}
	l.byClient[client] = append(l.byClient[client], iv)
}

// stopped reports whether client was stopped at any time within [from, to].
func (l *stopLog) stopped(client string, from, to time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, iv := range l.byClient[client] {
		if iv.from <= to && iv.to >= from {
			return true
		}
	}
	return false
}

// fault is one kind of fault; do injects it once and reports whether it did (a client between
// two runs cannot be killed, for example).
type fault struct {
	name string
	do   func(rng *rand.Rand) bool
}

// counter counts things by name (faults, exit classes, violations).
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[name] += n
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(c.m))
	for n := range c.m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n + "=" + strconv.Itoa(c.m[n]))
	}
	return b.String()
}

// timeline records when each fault was in force, to name the fault behind a violation.
type timeline struct {
	mu     sync.Mutex
	faults []faultSpan
}

type faultSpan struct {
	name string
	interval
}

// during names the faults in force within window before at (their effects outlast them: a
// lease lost to a cut network is lost up to a TTL later), or "nofault".
func (tl *timeline) during(at, window time.Duration) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var names []string
	for _, f := range tl.faults {
		if f.from <= at && at <= f.to+window {
			names = append(names, f.name)
		}
	}
	if len(names) == 0 {
		return "nofault"
	}
	return strings.Join(names, "+")
}

// injectFaults injects faults one at a time, at random intervals, from now until the clock
// passes until (a soak run of a set duration) or, with until 0 (the bounded run), until every
// kind has been injected once or faultGuard has passed; and always until quit is set. It returns
// once the last fault has been undone. The kinds come in rounds, each kind once per round in a
// random order, so that even a short run meets every kind.
func injectFaults(res *resource, until time.Duration, quit *atomic.Bool, faults []fault, counts *counter, tl *timeline, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	guard := res.now() + faultGuard
	done := func() bool {
		if quit.Load() {
			return true
		}
		if until > 0 {
			return res.now() >= until
		}
		for _, f := range faults {
			if counts.get(f.name) == 0 {
				return res.now() >= guard
			}
		}
		return true
	}
	var round []int
	for !done() {
		// The pause between faults is the schedule, not a synchronisation.
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		if done() {
			return
		}
		if len(round) == 0 {
			round = rng.Perm(len(faults))
		}
		f := faults[round[0]]
		round = round[1:]
		from := res.now()
		if f.do(rng) {
			counts.add(f.name, 1)
			tl.mu.Lock()
			tl.faults = append(tl.faults, faultSpan{f.name, interval{from, res.now()}})
			tl.mu.Unlock()
		}
	}
}

// checkEveryFault reports, for the bounded run, each kind of fault that was never injected.
func checkEveryFault(faults []fault, counts *counter, r *report) {
	for _, f := range faults {
		if counts.get(f.name) == 0 {
			r.violate("fault_not_injected", "%s was never injected within %s", f.name, faultGuard)
		}
	}
}

// between is a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// stopGroup SIGSTOPs the process group pgid and, once its leader is stopped (it can start no
// more children), the process groups of the leader's children: a baton worker runs each CMD
// in a group of its own. It returns the groups stopped, for contGroups.
func stopGroup(pgid int) []int {
	if syscall.Kill(-pgid, syscall.SIGSTOP) != nil {
		return nil
	}
	groups := []int{pgid}
	if !waitStopped(pgid) {
		return groups
	}
	for _, child := range children(pgid) {
		if pg, err := syscall.Getpgid(child); err == nil && pg != pgid {
			if syscall.Kill(-pg, syscall.SIGSTOP) == nil {
				groups = append(groups, pg)
			}
		}
	}
	return groups
}

func contGroups(groups []int) {
	for _, pg := range groups {
		_ = syscall.Kill(-pg, syscall.SIGCONT)
	}
}

// waitStopped waits until pid is in the stopped state (/proc is the signal), false if it is
// gone or not stopped within 10 s.
func waitStopped(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, ok := procStat(pid)
		if !ok {
			return false
		}
		if st.state == "T" || st.state == "t" {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

type stat struct {
	state string
	ppid  int
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0], ppid: ppid}, true
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// processFaults are kill -9 of one of the looping processes (baton run or baton worker) that
// pick returns, and SIGSTOP of its process groups for 1.5-3 TTL, recorded in stops.
func processFaults(what string, pick func(*rand.Rand) (string, *exec.Cmd), ttl time.Duration, res *resource, stops *stopLog) []fault {
	return []fault{
		{"kill9_" + what, func(rng *rand.Rand) bool {
			_, cmd := pick(rng)
			return cmd != nil && cmd.Process.Signal(syscall.SIGKILL) == nil
		}},
		{"sigstop_" + what, func(rng *rand.Rand) bool {
			name, cmd := pick(rng)
			if cmd == nil {
				return false
			}
			from := res.now()
			groups := stopGroup(cmd.Process.Pid)
			if groups == nil {
				return false
			}
			time.Sleep(between(rng, ttl*3/2, ttl*3)) // the fault's length
			contGroups(groups)
			stops.add(name, interval{from, res.now()})
			return true
		}},
	}
}

// storeFaults are kill -9 of baton serve with a restart on the same address and store, and,
// over PostgreSQL, an immediate (crash) restart of the database; over Redis, a kill -9 of
// redis-server and a restart on the same port and directory (the AOF replays).
func storeFaults(t *testing.T, srv *server, pg *postgres, rd *redisServer) []fault {
	fs := []fault{{"kill9_server", func(*rand.Rand) bool {
		if err := srv.crash(); err != nil {
			t.Errorf("restarting baton serve: %v", err)
		}
		return true
	}}}
	if pg != nil {
		fs = append(fs, fault{"restart_postgres", func(*rand.Rand) bool {
			if err := pg.restart(); err != nil {
				t.Errorf("restarting PostgreSQL: %v", err)
			}
			return true
		}})
	}
	if rd != nil {
		fs = append(fs, fault{"restart_redis", func(*rand.Rand) bool {
			if err := rd.restart(); err != nil {
				t.Errorf("restarting redis-server: %v", err)
			}
			return true
		}})
	}
	return fs
}
