package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// 'resources show' prints a resource's holder, rest and line after its table; 'locks waiters'
// prints the line alone. A lock-only key is a resource while it is held.
func TestResourceLineCommands(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if err := f.store.RegisterKinds(ctx, []store.Kind{{Name: "deploy"}}); err != nil {
		t.Fatal(err)
	}
	const key = "svc/a"
	held, err := f.store.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: "held", Holder: "ops", TTL: time.Minute, Cooldown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A lock-only key, held: a resource at state "" and version 0.
	r := f.cli(t, "resources", "show", key)
	if r.code != 0 || !strings.Contains(r.stdout, `svc/a  ""`) ||
		!strings.Contains(r.stdout, fmt.Sprintf("held by ops (token %d, expires ", held.Token)) ||
		!strings.Contains(r.stdout, "nobody waits for svc/a") {
		t.Fatalf("show of a held lock-only key: %s", r)
	}
	if r := f.cli(t, "locks", "waiters", key); r.code != 0 || r.stdout != "nobody waits for svc/a\n" {
		t.Fatalf("waiters of a key nobody waits for: %s", r)
	}
	// The line: a lock request, a job, a scheduled job, then a break-glass request before all.
	queue := func(id string, first bool) {
		t.Helper()
		p := &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: time.Minute, Wait: true, First: first}
		if first {
			p.FirstReason = "incident 7"
		}
		if _, err := f.store.Acquire(ctx, p); !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire as %s: %v; want refused, enqueued", id, err)
		}
	}
	queue("w1", false)
	j, err := f.store.SubmitJob(ctx, &store.SubmitParams{Kind: "deploy", Resource: key})
	if err != nil {
		t.Fatal(err)
	}
	later, err := f.store.SubmitJob(ctx, &store.SubmitParams{Kind: "deploy", Resource: key, Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	queue("bg", true)
	r = f.cli(t, "locks", "waiters", key)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(rows) != 5 || !strings.HasPrefix(rows[0], "POS  TYPE  WHO") {
		t.Fatalf("waiters: %s; want a header and four rows", r)
	}
	for i, want := range []string{
		`^1 +lock +bg +\S+Z +\S+Z +- +break-glass: incident 7$`,
		`^2 +lock +w1 +\S+Z +\S+Z +- +-$`,
		fmt.Sprintf(`^3 +job +%d \(deploy\) +\S+Z +- +- +-$`, j.Job.ID),
		fmt.Sprintf(`^4 +job +%d \(deploy\) +\S+Z +- +\S+Z +-$`, later.Job.ID),
	} {
		if !matches(want, rows[i+1]) {
			t.Fatalf("waiters row %d = %q; want %s\n%s", i+1, rows[i+1], want, r)
		}
	}
	line := decodeJSON[[]wire.Ticket](t, f.cli(t, "locks", "waiters", key, "--limit", "2", "-o", "json"))
	if len(line) != 2 || line[0].Type != "lock" || !line[0].First || line[0].FirstReason != "incident 7" || line[1].Holder != "w1" || line[1].LeaseID != "w1" {
		t.Fatalf("waiters --limit 2 -o json: %+v", line)
	}
	if r := f.cli(t, "locks", "waiters", key, "--limit", "1001"); r.code != exitUsage || !strings.Contains(r.stderr, "--limit must be between 1 and 1000") {
		t.Fatalf("waiters --limit 1001: %s", r)
	}
	r = f.cli(t, "resources", "show", key)
	if r.code != 0 || !strings.Contains(r.stdout, "held by ops") || !strings.Contains(r.stdout, "line (4 waiting, the front first):") ||
		!strings.Contains(r.stdout, "break-glass: incident 7") {
		t.Fatalf("show of a resource with a line: %s", r)
	}
	res := decodeJSON[wire.Resource](t, f.cli(t, "resources", "show", key, "-o", "json"))
	if res.Holder == nil || res.Holder.Holder != "ops" || res.Holder.LeaseID != "held" || len(res.Line) != 4 || res.Unfinished != 2 {
		t.Fatalf("show -o json: %+v", res)
	}
	// Released with a cooldown: the key rests.
	if _, err := f.store.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	r = f.cli(t, "resources", "show", key)
	if r.code != 0 || !strings.Contains(r.stdout, "held by nobody") || !matches(`resting until \S+Z \(cooldown, (59m5\ds|1h0m0s) left\)`, r.stdout) {
		t.Fatalf("show of a resting resource: %s", r)
	}
	if res := decodeJSON[wire.Resource](t, f.cli(t, "resources", "show", key, "-o", "json")); res.Rest == nil || res.Rest.Reason != "cooldown" {
		t.Fatalf("show -o json of a resting resource: %+v", res)
	}
}

// noLine is the SQLite store without a line: no ResourceLine, and Capabilities say so.
type noLine struct{ *sqlite.Store }

func (noLine) ResourceLine() {}

func (n noLine) Capabilities() store.Capabilities {
	c := n.Store.Capabilities()
	c.Line = false
	return c
}

// On a server whose store keeps no line, 'locks waiters' says so (exit 1) and 'resources show'
// prints what it did before.
func TestWaitersWithoutALine(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: noLine{st}, Version: "test", StoreName: "sqlite",
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
	f := &fixture{ts: ts, url: ts.URL, store: st}
	if r := f.cli(t, "locks", "waiters", "k"); r.code != exitError || !strings.Contains(r.stderr, "keeps no line") {
		t.Fatalf("waiters without a line: %s", r)
	}
	f.cli(t, "resources", "set-state", "db/main", "idle")
	if r := f.cli(t, "resources", "show", "db/main"); r.code != 0 || strings.Contains(r.stdout, "held by") || strings.Contains(r.stdout, "waits") {
		t.Fatalf("show without a line: %s", r)
	}
}

func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
