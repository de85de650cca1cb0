package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// baton resources set-tree, trees and delete-tree against a server over SQLite: a tree is set,
// listed (table and JSON) and deleted; a bad or overlapping prefix is exit code 2 naming PREFIX;
// a refusal by a related key names it (exit code 75); a tree in use is exit code 4 naming the
// key; deleting no tree is exit code 3.
func TestTreesCommands(t *testing.T) {
	f := newFixture(t, nil)
	r := f.cli(t, "resources", "set-tree", "cluster/")
	if r.code != 0 || !regexp.MustCompile(`^tree cluster/ \(root cluster\) set at \d{4}-\d\d-\d\dT\S+Z\n$`).MatchString(r.stdout) {
		t.Fatalf("set-tree cluster/: %s", r)
	}
	for _, c := range []struct{ prefix, want string }{
		{"cluster", `invalid PREFIX: must end with "/"`},
		{"a//", "invalid PREFIX: must not have an empty level"},
		{"cluster/eu/", `invalid PREFIX: "cluster/eu/" overlaps tree "cluster/"`},
	} {
		r := f.cli(t, "resources", "set-tree", c.prefix)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "(nothing written)") {
			t.Errorf("set-tree %q: %s\nwant exit 2 and %q (nothing written)", c.prefix, r, c.want)
		}
	}
	if r := f.cli(t, "resources", "set-tree", "sp ace/"); r.code != 0 || !strings.HasPrefix(r.stdout, `tree "sp ace/" (root "sp ace") set at`) {
		t.Fatalf("set-tree with a space: %s", r)
	}
	r = f.cli(t, "resources", "trees")
	if r.code != 0 || !regexp.MustCompile(`^PREFIX\s+ROOT\s+SET_AT\ncluster/\s+cluster\s+\S+Z\n"sp ace/"\s+"sp ace"\s+\S+Z\n$`).MatchString(r.stdout) {
		t.Fatalf("trees: %s", r)
	}
	r = f.cli(t, "resources", "trees", "--limit", "1", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"prefix": "cluster/"`) || strings.Contains(r.stdout, "sp ace") {
		t.Fatalf("trees --limit 1 -o json: %s", r)
	}
	if r := f.cli(t, "resources", "trees", "--limit", "1001"); r.code != exitUsage {
		t.Fatalf("trees --limit 1001: %s", r)
	}

	st := f.client(t, "")
	held, err := st.Acquire(context.Background(), &store.AcquireParams{Key: "cluster/eu-1", LeaseID: "x", Holder: "job-7", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r = f.cli(t, "run", "--lock", "cluster/eu-1/node/a", "--no-wait", "--", "true")
	if r.code != exitBusy || !strings.Contains(r.stderr, `lock "cluster/eu-1" held by "job-7"`) ||
		!strings.Contains(r.stderr, `related to "cluster/eu-1/node/a" in its tree`) {
		t.Fatalf("run on a child of a held key: %s\nwant exit 75 naming cluster/eu-1, related", r)
	}
	r = f.cli(t, "resources", "delete-tree", "cluster/")
	if r.code != exitConflict || !strings.HasPrefix(r.stderr, `baton resources delete-tree: tree "cluster/" is in use: a live lease on "cluster/eu-1"`) {
		t.Fatalf("delete-tree in use: %s\nwant exit 4 naming cluster/eu-1", r)
	}
	if _, err := st.Release(context.Background(), &store.ReleaseParams{Key: held.Key, LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	if r := f.cli(t, "resources", "delete-tree", "cluster/"); r.code != 0 || r.stdout != "deleted tree cluster/\n" {
		t.Fatalf("delete-tree: %s", r)
	}
	if r := f.cli(t, "resources", "delete-tree", "cluster/"); r.code != exitNotFound || !strings.Contains(r.stderr, `no tree "cluster/"`) {
		t.Fatalf("delete-tree of no tree: %s", r)
	}
}

// Setting and deleting a tree needs the admin role (exit code 77); listing, the read role.
func TestTreesCommandsNeedAdmin(t *testing.T) {
	auth, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken("r-tok") + "\nwriter write " + server.HashToken("w-tok") +
		"\nops admin " + server.HashToken("a-tok") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, auth)
	for _, args := range [][]string{{"set-tree", "cluster/"}, {"delete-tree", "cluster/"}} {
		r := f.cli(t, append([]string{"resources"}, append(args, "--token", "w-tok")...)...)
		if r.code != exitAuth || !strings.Contains(r.stderr, "forbidden") {
			t.Fatalf("%v with a write token: %s\nwant exit 77, forbidden", args, r)
		}
	}
	if r := f.cli(t, "resources", "set-tree", "cluster/", "--token", "a-tok"); r.code != 0 {
		t.Fatalf("set-tree with an admin token: %s", r)
	}
	if r := f.cli(t, "resources", "trees", "--token", "r-tok"); r.code != 0 || !strings.Contains(r.stdout, "cluster/") {
		t.Fatalf("trees with a read token: %s", r)
	}
}

// A server whose store keeps no trees: exit code 1, naming the store and trees.
func TestTreesCommandsUnsupported(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: struct{ store.Store }{st}, StoreName: "redis",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	f := &fixture{ts: ts, url: ts.URL, store: st}
	for _, args := range [][]string{{"set-tree", "t/"}, {"delete-tree", "t/"}, {"trees"}} {
		r := f.cli(t, append([]string{"resources"}, args...)...)
		if r.code != exitError || !strings.Contains(r.stderr, "redis store does not support trees") {
			t.Fatalf("%v on a server without trees: %s\nwant exit 1 naming redis and trees", args, r)
		}
	}
}
