package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// netTopo is a network of namespaces a test makes for itself (ip netns), joined by veth
// pairs, so that faults cut real links:
//
//	cli0 ──┐                      ┌── db (PostgreSQL of the harness's own, if any)
//	       ├── srv (baton serve) ─┤
//	cli1 ──┘                      └── the test process (admin link, never faulted)
//
// Each client namespace cliK has one link to srv (cliK 10.1.K.2, srv 10.1.K.1); db has one
// (srv 10.2.0.1, db 10.2.0.2). The test process (the root namespace) reaches srv over an admin
// link on a /30 of 10.250.0.0/16 picked free, to read the audit log and to run the CLI; it is
// never faulted. There are no other routes: a cut link has no way around it. The fenced resource
// is reached over a Unix socket (network namespaces do not separate path sockets), so that its
// calls go on while the network is cut.
//
// Namespace names carry the test process's pid and a counter, so that parallel runs do not
// collide; t.Cleanup deletes them, even after a failure (deleting a namespace kills no process:
// the test stops its processes first, in cleanups registered later, which run earlier).
type netTopo struct {
	t       *testing.T
	prefix  string // namespace and root interface name prefix
	clients int    // client namespaces
	db      bool
	admin   string // the root side's address of the admin link
	srvIP   string // srv's address on the admin link
	oneWay  string // the qdisc that drops every packet an interface sends (see dropQdisc)
}

var netSeq atomic.Int32

// The addresses of the fixed links (each namespace has its own routing, so they never clash
// with the machine's or another run's).
func cliIP(k int) string    { return fmt.Sprintf("10.1.%d.2", k) }
func srvCliIP(k int) string { return fmt.Sprintf("10.1.%d.1", k) }

const (
	srvDBIP = "10.2.0.1"
	dbIP    = "10.2.0.2"
)

// needNetns skips the test unless it can make network namespaces (root, ip, tc), or fails
// it if CI is set.
func needNetns(t *testing.T) {
	t.Helper()
	missing := ""
	switch {
	case os.Geteuid() != 0:
		missing = "not root"
	default:
		for _, tool := range []string{"ip", "tc"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = tool + " not found (Debian: iproute2)"
			}
		}
	}
	if missing == "" {
		name := fmt.Sprintf("bt%d-probe%d", os.Getpid(), netSeq.Add(1))
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			missing = fmt.Sprintf("ip netns add: %v: %s", err, out)
		} else {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("network namespaces unavailable and CI is set: %s", missing)
	}
	t.Skipf("network namespaces unavailable: %s", missing)
}

// newNetTopo makes the namespaces and links, with clients client namespaces and, if db, a
// database namespace.
func newNetTopo(t *testing.T, clients int, db bool) *netTopo {
	t.Helper()
	needNetns(t)
	n := &netTopo{t: t, prefix: fmt.Sprintf("bt%d-%d", os.Getpid(), netSeq.Add(1)), clients: clients, db: db}
	t.Cleanup(n.remove)
	names := []string{"srv"}
	for k := range clients {
		names = append(names, fmt.Sprintf("cli%d", k))
	}
	if db {
		names = append(names, "db")
	}
	for _, name := range names {
		n.must("ip", "netns", "add", n.ns(name))
		n.must("ip", "-n", n.ns(name), "link", "set", "lo", "up")
	}
	for k := range clients {
		n.link(fmt.Sprintf("cli%d", k), "s", cliIP(k), "srv", fmt.Sprintf("c%d", k), srvCliIP(k), 24)
	}
	if db {
		n.link("srv", "db", srvDBIP, "db", "s", dbIP, 24)
	}
	// The admin link: its root end lives in the root namespace, where addresses are shared
	// with the machine, so its /30 is picked among those no interface uses.
	x, y := n.freeSlash30()
	n.srvIP, n.admin = fmt.Sprintf("10.250.%d.%d", x, y+1), fmt.Sprintf("10.250.%d.%d", x, y+2)
	root := n.rootIf()
	n.must("ip", "link", "add", root, "type", "veth", "peer", "name", "adm", "netns", n.ns("srv"))
	n.must("ip", "addr", "add", n.admin+"/30", "dev", root)
	n.must("ip", "link", "set", root, "up")
	n.must("ip", "-n", n.ns("srv"), "addr", "add", n.srvIP+"/30", "dev", "adm")
	n.must("ip", "-n", n.ns("srv"), "link", "set", "adm", "up")
	n.oneWay = n.dropQdisc()
	return n
}

// ns is the full name of namespace name.
func (n *netTopo) ns(name string) string { return n.prefix + "-" + name }

// rootIf is the admin link's interface in the root namespace (15 bytes at most).
func (n *netTopo) rootIf() string { return strings.ReplaceAll(n.prefix, "-", "a") }

// link joins namespace a (interface ia, address ipa) and namespace b with a veth pair.
func (n *netTopo) link(a, ia, ipa, b, ib, ipb string, bits int) {
	n.must("ip", "link", "add", ia, "netns", n.ns(a), "type", "veth", "peer", "name", ib, "netns", n.ns(b))
	n.must("ip", "-n", n.ns(a), "addr", "add", fmt.Sprintf("%s/%d", ipa, bits), "dev", ia)
	n.must("ip", "-n", n.ns(b), "addr", "add", fmt.Sprintf("%s/%d", ipb, bits), "dev", ib)
	n.must("ip", "-n", n.ns(a), "link", "set", ia, "up")
	n.must("ip", "-n", n.ns(b), "link", "set", ib, "up")
}

// freeSlash30 picks X and Y (a multiple of 4) such that no address of this machine lies in
// 10.250.X.Y/30.
func (n *netTopo) freeSlash30() (x, y int) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		n.t.Fatal(err)
	}
	for range 1000 {
		x, y := rand.IntN(256), 4*rand.IntN(64)
		_, sub, _ := net.ParseCIDR(fmt.Sprintf("10.250.%d.%d/30", x, y))
		used := false
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && (sub.Contains(ip.IP) || ip.Contains(sub.IP)) {
				used = true
			}
		}
		if !used {
			return x, y
		}
	}
	n.t.Fatal("no free /30 in 10.250.0.0/16 for the admin link")
	return 0, 0
}

// dropQdisc finds a root qdisc that drops every packet an interface sends, for one-way cuts:
// netem with 100% loss, or where the kernel has no netem (sch_netem), blackhole.
func (n *netTopo) dropQdisc() string {
	for _, q := range []string{"netem loss 100%", "blackhole"} {
		args := append([]string{"-n", n.ns("srv"), "qdisc", "add", "dev", "lo", "root"}, strings.Fields(q)...)
		if exec.Command("tc", args...).Run() == nil {
			_ = exec.Command("tc", "-n", n.ns("srv"), "qdisc", "del", "dev", "lo", "root").Run()
			return q
		}
	}
	if os.Getenv("CI") != "" {
		n.t.Fatal("tc: neither netem nor blackhole qdisc available and CI is set")
	}
	n.t.Skip("tc: neither netem nor blackhole qdisc available for one-way cuts")
	return ""
}

// exec is argv run inside namespace name (ip netns exec execs it: the process is argv's).
func (n *netTopo) exec(name string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", n.ns(name)}, argv...)
}

// setLink sets interface dev of namespace name up or down: down cuts the link both ways (the
// veth peer loses its carrier).
func (n *netTopo) setLink(name, dev string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return n.run("ip", "-n", n.ns(name), "link", "set", dev, state)
}

// drop makes interface dev of namespace name drop every packet it sends (on), or pass them
// again (off): a one-way cut.
func (n *netTopo) drop(name, dev string, on bool) error {
	if !on {
		return n.run("tc", "-n", n.ns(name), "qdisc", "del", "dev", dev, "root")
	}
	return n.run(append([]string{"tc", "-n", n.ns(name), "qdisc", "add", "dev", dev, "root"}, strings.Fields(n.oneWay)...)...)
}

func (n *netTopo) run(argv ...string) error {
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return nil
}

func (n *netTopo) must(argv ...string) {
	n.t.Helper()
	if err := n.run(argv...); err != nil {
		n.t.Fatal(err)
	}
}

// remove deletes the namespaces (their veth ends go with them) and the admin link's root end.
func (n *netTopo) remove() {
	_ = exec.Command("ip", "link", "del", n.rootIf()).Run()
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], n.prefix+"-") {
			if err := exec.Command("ip", "netns", "del", f[0]).Run(); err != nil {
				n.t.Errorf("ip netns del %s: %v", f[0], err)
			}
		}
	}
}
