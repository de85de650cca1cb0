package chaos

import (
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
)

// postgres is a PostgreSQL instance of the harness's own: initdb in a temporary directory, on a
// free loopback port, trust authentication. It never touches the machine's own PostgreSQL. As
// root it runs as the `postgres` OS user (PostgreSQL refuses to run as root).
type postgres struct {
	t    *testing.T
	bin  string
	dir  string
	data string
	port int
	cred *syscall.Credential
}

// pgBinDir finds initdb and pg_ctl: on PATH, else the newest /usr/lib/postgresql/*/bin.
func pgBinDir() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// startPostgres starts the instance, or skips the test if PostgreSQL is not installed (fails
// if CI is set).
func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("initdb not found and CI is set: install PostgreSQL's server binaries")
		}
		t.Skip("initdb not found: PostgreSQL chaos test skipped")
	}
	dir, err := os.MkdirTemp("", "baton-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &postgres{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop") })
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *postgres) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd.CombinedOutput()
}

// start starts the server and waits until it accepts connections (pg_ctl -w).
func (p *postgres) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200",
		p.port, p.dir)
	if out, err := p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "postgres.log"), "-o", opts, "-w", "-t", "120", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, tail(log, 4000))
	}
	return nil
}

// restart crashes the server (immediate shutdown: no checkpoint, recovery from the WAL at the
// next start) and starts it again on the same port and data.
func (p *postgres) restart() error {
	if out, err := p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return p.start()
}

func (p *postgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}
