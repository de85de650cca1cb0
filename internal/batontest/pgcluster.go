package batontest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PGCluster is a PostgreSQL server of a test's own: initdb (or pg_basebackup from another) in a
// temporary directory, on a free loopback port, trust authentication. It never touches the
// machine's own PostgreSQL, so a test may kill it, make it a replica and promote it. As root it
// runs as the `postgres` OS user (PostgreSQL refuses to run as root).
type PGCluster struct {
	t    testing.TB
	bin  string
	dir  string
	Data string
	Port int
	cred *syscall.Credential
	// netns, if set, is the network namespace its programs run in (ip netns exec), and host
	// the address it listens on there; else it listens on 127.0.0.1. env is added to its
	// programs' environment.
	netns, host string
	env         []string
}

// pgBinDir finds PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup): the newest
// /usr/lib/postgresql/*/bin that has them, else the folder of initdb on PATH.
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append([]string{filepath.Dir(p)}, dirs...)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		ok := true
		for _, name := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
			if _, err := os.Stat(filepath.Join(dirs[i], name)); err != nil {
				ok = false
			}
		}
		if ok {
			return dirs[i]
		}
	}
	return ""
}

// newPGCluster makes the directory and picks the port of a cluster; it skips the test if
// PostgreSQL's server binaries are missing (fails if CI is set).
func newPGCluster(t testing.TB) *PGCluster {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("initdb not found and CI is set: install PostgreSQL's server binaries")
		}
		t.Skip("initdb not found: install PostgreSQL's server binaries")
	}
	dir, err := os.MkdirTemp("", "baton-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &PGCluster{t: t, bin: bin, dir: dir, Data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	t.Cleanup(func() { _, _ = c.run("pg_ctl", "-D", c.Data, "-m", "immediate", "-w", "stop") })
	return c
}

// StartPGCluster initialises a cluster and starts it.
func StartPGCluster(t testing.TB) *PGCluster {
	t.Helper()
	c := newPGCluster(t)
	if out, err := c.run("initdb", "-D", c.Data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// StartPGClusterIn is StartPGCluster inside network namespace netns (made by the caller):
// every PostgreSQL program runs under `ip netns exec netns` (as the postgres user when root),
// with env added to its environment (e.g. libfaketime's), and the server listens on host, an
// address of that namespace.
func StartPGClusterIn(t testing.TB, netns, host string, env ...string) *PGCluster {
	t.Helper()
	c := newPGCluster(t)
	c.netns, c.host, c.env = netns, host, env
	if out, err := c.run("initdb", "-D", c.Data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// Clients come from other namespaces: trust them too (the namespace is the test's own).
	hba, err := os.OpenFile(filepath.Join(c.Data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = hba.WriteString("host all all 0.0.0.0/0 trust\n")
		err = errors.Join(err, hba.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Replica makes a streaming replica of c (pg_basebackup -R, asynchronous) and starts it.
func (c *PGCluster) Replica(t testing.TB) *PGCluster {
	t.Helper()
	r := newPGCluster(t)
	if out, err := r.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-D", r.Data, "-R", "-X", "stream", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (c *PGCluster) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if c.netns != "" {
		argv := []string{"netns", "exec", c.netns}
		if c.cred != nil { // ip needs root to enter the namespace; runuser then drops it
			argv = append(argv, "runuser", "-u", "postgres", "--")
		}
		cmd = exec.Command("ip", append(append(argv, filepath.Join(c.bin, name)), args...)...)
	}
	cmd.Dir = c.dir
	if c.env != nil {
		cmd.Env = append(os.Environ(), c.env...)
	}
	if c.cred != nil && c.netns == "" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// Start starts the server and waits until it accepts connections (pg_ctl -w).
func (c *PGCluster) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=%s -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200",
		c.addr(), c.Port, c.dir)
	if out, err := c.run("pg_ctl", "-D", c.Data, "-l", filepath.Join(c.dir, "postgres.log"), "-o", opts, "-w", "-t", "120", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server: mode "immediate" is a crash (no checkpoint: recovery from the WAL at
// the next start), "fast" a clean stop.
func (c *PGCluster) Stop(mode string) error {
	if out, err := c.run("pg_ctl", "-D", c.Data, "-m", mode, "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Promote promotes a replica to a primary and waits until it is one.
func (c *PGCluster) Promote() error {
	if out, err := c.run("pg_ctl", "-D", c.Data, "-w", "-t", "120", "promote"); err != nil {
		return fmt.Errorf("pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

// URL is the DSN of the cluster's postgres database.
func (c *PGCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", c.addr(), c.Port)
}

// addr is the address the server listens on.
func (c *PGCluster) addr() string {
	if c.host != "" {
		return c.host
	}
	return "127.0.0.1"
}

// CaughtUp reports whether replica r has replayed everything c has written so far.
func (c *PGCluster) CaughtUp(ctx context.Context, r *PGCluster) (bool, error) {
	var written, replayed string
	pc, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return false, err
	}
	defer pc.Close(ctx)
	if err := pc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&written); err != nil {
		return false, err
	}
	rc, err := pgx.Connect(ctx, r.URL())
	if err != nil {
		return false, err
	}
	defer rc.Close(ctx)
	var ok bool
	err = rc.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_last_wal_replay_lsn()::text`, written).Scan(&ok, &replayed)
	return ok, err
}
