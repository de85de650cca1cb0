package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// TestMain lets the test binary be baton itself (BATON_CLI_TEST_AS_BATON=1): the completion
// scripts, run in a real bash, call `baton __complete ...`.
func TestMain(m *testing.M) {
	if os.Getenv("BATON_CLI_TEST_AS_BATON") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// result is one in-process run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// cli runs the CLI in-process, with BATON_SERVER and BATON_TOKEN cleared.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	t.Setenv("BATON_SERVER", "")
	t.Setenv("BATON_TOKEN", "")
	var out, errOut bytes.Buffer
	code := run(args, nil, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func TestUsageAndHelp(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{[]string{"version"}, 0, "baton "},
		{[]string{"--version"}, 0, "baton "},
		{[]string{"help"}, 0, "Usage:"},
		{[]string{"--help"}, 0, "Exit codes:"},
		{nil, 2, "Usage:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"--server", "http://x"}, 2, "missing command"},

		{[]string{"locks"}, 2, "Usage: baton locks COMMAND"},
		{[]string{"locks", "--help"}, 0, "force-release"},
		{[]string{"locks", "frob"}, 2, `unknown command "frob"`},
		{[]string{"help", "locks"}, 0, "Usage: baton locks COMMAND"},
		{[]string{"help", "locks", "list"}, 0, "Usage: baton locks list"},
		{[]string{"locks", "list", "--help"}, 0, "Example:"},
		{[]string{"locks", "list", "-h"}, 0, "--prefix"},
		{[]string{"locks", "status", "--help"}, 0, "is free"},
		{[]string{"locks", "acquire", "--help"}, 0, "--metadata"},
		{[]string{"locks", "renew", "--help"}, 0, "--lease"},
		{[]string{"locks", "release", "--help"}, 0, "already released"},
		{[]string{"locks", "force-release", "--help"}, 0, "--reason"},
		{[]string{"run", "--help"}, 0, "BATON_FENCING_TOKEN"},
		{[]string{"help", "run"}, 0, "Usage: baton run"},

		{[]string{"locks", "list", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"locks", "list", "--limit", "-1"}, 2, "--limit must be between 1 and 1000"},
		{[]string{"locks", "list", "--limit", "1001"}, 2, "--limit must be between 1 and 1000"},
		{[]string{"locks", "list", "--limit", "x"}, 2, "invalid value"},
		{[]string{"locks", "list", "-o", "yaml"}, 2, "-o must be table or json"},
		{[]string{"locks", "list", "--server", "localhost:7725"}, 2, "--server (or BATON_SERVER) must be an http or https URL"},
		{[]string{"locks", "status"}, 2, "missing KEY"},
		{[]string{"locks", "status", "a", "b"}, 2, `unexpected argument "b"`},
		{[]string{"locks", "acquire", "k", "--ttl", "500ms"}, 2, "invalid ttl"},
		{[]string{"locks", "acquire", "k", "--wait", "-1s"}, 2, "--wait must not be negative"},
		{[]string{"locks", "acquire", "k", "--metadata", "[1]"}, 2, "invalid metadata: must be a JSON object"},
		{[]string{"locks", "acquire", "a\nb"}, 2, "invalid key"},
		{[]string{"locks", "renew", "k"}, 2, "--lease is required"},
		{[]string{"locks", "release", "k"}, 2, "--lease is required"},
		{[]string{"locks", "force-release", "k"}, 2, "--reason is required"},
		{[]string{"locks", "acquire", "k", "--", "--not-a-flag"}, 2, `unexpected argument "--not-a-flag"`},

		{[]string{"run", "--lock", "k"}, 2, "missing CMD"},
		{[]string{"run", "--", "true"}, 2, "--lock is required"},
		{[]string{"run", "--lock", "k", "--wait", "1s", "--no-wait", "--", "true"}, 2, "exclude each other"},
		{[]string{"run", "--lock", "k", "--grace", "-1s", "--", "true"}, 2, "--grace must not be negative"},
		{[]string{"run", "--lock", "k", "--ttl", "3s", "--grace", "1001ms", "--", "true"}, 2, "--grace 1.001s is longer than a third of --ttl (1s)"},
		{[]string{"run", "--lock", "k", "--ttl", "25h", "--", "true"}, 2, "invalid ttl"},
		{[]string{"run", "--lock", "k", "--bogus", "--", "true"}, 2, "unknown flag: --bogus"},
		{[]string{"run", "--lock", "k", "--", "baton-test-no-such-command"}, 127, "executable file not found"},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.out) {
			t.Errorf("baton %q: %s\nwant exit %d and %q", c.args, r, c.code, c.out)
		}
		if c.code == 0 && r.stderr != "" {
			t.Errorf("baton %q: success with stderr %q", c.args, r.stderr)
		}
		if c.code == 2 && r.stdout != "" {
			t.Errorf("baton %q: usage error with stdout %q", c.args, r.stdout)
		}
	}
}

// The global flags take their defaults from the environment, and may come before or after the
// command word.
func TestGlobalsFromEnvironmentAndFlags(t *testing.T) {
	t.Setenv("BATON_SERVER", "http://from-env:1")
	t.Setenv("BATON_TOKEN", "env-token")
	a := newApp(nil, io.Discard, io.Discard)
	cmd, rest, err := a.rootCommand().Find([]string{"--token", "flag-token", "-o", "json", "locks", "list", "--server", "http://from-flag:2"})
	if err != nil || cmd.CommandPath() != "baton locks list" {
		t.Fatalf("find: %v, %v", cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if a.g.server != "http://from-flag:2" || a.g.token != "flag-token" || a.g.output != "json" {
		t.Fatalf("globals = %+v; want the flags' values", a.g)
	}
	if g := defaultGlobals(); g.server != "http://from-env:1" || g.token != "env-token" {
		t.Fatalf("globals from the environment = %+v", g)
	}
	t.Setenv("BATON_SERVER", "")
	if g := defaultGlobals(); g.server != defaultServer {
		t.Fatalf("default server = %q", g.server)
	}
}

// fixture is a real server over SQLite, in-process.
type fixture struct {
	ts      *httptest.Server
	url     string
	store   *sqlite.Store
	refused <-chan struct{} // closed at the server store's first refusal of a held key
}

func newFixture(t *testing.T, auth *server.Auth) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Synchronous: "NORMAL", Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	signalled, refused := storetest.SignalRefusal(st)
	// The signalling wrapper hides the SQLite store's trees; the server finds them here.
	served := struct {
		storetest.LineStore
		store.Treer
	}{signalled.(storetest.LineStore), st}
	srv, err := server.New(server.Config{Store: served, Auth: auth, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &fixture{ts: ts, url: ts.URL, store: st, refused: refused}
}

// cli runs the CLI against the fixture's server.
func (f *fixture) cli(t *testing.T, args ...string) result {
	t.Helper()
	t.Setenv("BATON_SERVER", f.url)
	t.Setenv("BATON_TOKEN", "")
	var out, errOut bytes.Buffer
	code := run(args, nil, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// client returns a client store on the fixture's server.
func (f *fixture) client(t *testing.T, token string) *client.Store {
	t.Helper()
	s, err := client.NewStore(client.Config{BaseURL: f.url, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// syncBuffer is a bytes.Buffer safe for the writes of os/exec's copying goroutine and the reads
// of a test, which can wait for a marker to appear.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	markers map[string]chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	for m, ch := range b.markers {
		if strings.Contains(b.buf.String(), m) {
			close(ch)
			delete(b.markers, m)
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// seen returns a channel closed once marker has been written.
func (b *syncBuffer) seen(marker string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(b.buf.String(), marker) {
		close(ch)
		return ch
	}
	if b.markers == nil {
		b.markers = map[string]chan struct{}{}
	}
	b.markers[marker] = ch
	return ch
}

func TestHelpNeverShowsTheToken(t *testing.T) {
	t.Setenv("BATON_TOKEN", "super-secret")
	for _, args := range [][]string{{"locks", "list", "--help"}, {"run", "--help"}, {"--token", "flag-secret", "locks", "status", "--help"}} {
		var out, errOut bytes.Buffer
		code := run(args, nil, &out, &errOut)
		if code != 0 || strings.Contains(out.String()+errOut.String(), "secret") {
			t.Errorf("baton %q: exit %d, output shows the token:\n%s", args, code, out.String())
		}
	}
}
