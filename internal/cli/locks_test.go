package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

// leaseJSON is the CLI's -o json lease object: the API's.
type leaseJSON = wire.Lease

func decodeLease(t *testing.T, r result) leaseJSON {
	t.Helper()
	var l leaseJSON
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("not a lease object: %v\n%s", err, r)
	}
	return l
}

func TestLockLifecycle(t *testing.T) {
	f := newFixture(t, nil)
	r := f.cli(t, "locks", "acquire", "deploy/web", "--holder", "job-1", "--ttl", "1m", "--metadata", `{"job":"1"}`, "-o", "json")
	if r.code != 0 {
		t.Fatal(r)
	}
	l := decodeLease(t, r)
	if l.Key != "deploy/web" || l.Holder != "job-1" || l.LeaseID == "" || l.Token == 0 || l.TTLLeftMs <= 55000 ||
		l.ExpiresAt.Sub(l.AcquiredAt.Time) != time.Minute || compact(l.Metadata) != `{"job":"1"}` {
		t.Fatalf("acquired %+v (metadata %s)", l, l.Metadata)
	}
	got, err := f.store.Get(context.Background(), "deploy/web")
	if err != nil || got.ID != l.LeaseID || got.Token != l.Token {
		t.Fatalf("the store holds %+v, %v; the CLI printed %+v", got, err, l)
	}

	// Another holder: busy, named in the message.
	r = f.cli(t, "locks", "acquire", "deploy/web", "--holder", "job-2")
	want := fmt.Sprintf(`lock "deploy/web" held by "job-1" (token %d) until %s (in `, l.Token, l.ExpiresAt.UTC().Format("15:04:05Z"))
	if r.code != exitBusy || !strings.Contains(r.stderr, want) || r.stdout != "" {
		t.Fatalf("acquire of a held key: %s\nwant exit 75 and %q", r, want)
	}
	// The same holder again: its lease back (a safe retry).
	if r = f.cli(t, "locks", "acquire", "deploy/web", "--holder", "job-1", "-o", "json"); r.code != 0 || decodeLease(t, r).LeaseID != l.LeaseID {
		t.Fatalf("re-acquire by the holder: %s", r)
	}

	// Status, as a table and as JSON.
	r = f.cli(t, "locks", "status", "deploy/web")
	if r.code != 0 || !strings.Contains(r.stdout, "KEY") || !strings.Contains(r.stdout, l.LeaseID) || !strings.Contains(r.stdout, "job-1") {
		t.Fatalf("status: %s", r)
	}
	if r = f.cli(t, "locks", "status", "deploy/web", "-o", "json"); r.code != 0 || decodeLease(t, r).LeaseID != l.LeaseID {
		t.Fatalf("status -o json: %s", r)
	}
	if r = f.cli(t, "locks", "status", "deploy/api"); r.code != 0 || r.stdout != "deploy/api is free\n" {
		t.Fatalf("status of a free key: %s", r)
	}
	if r = f.cli(t, "-o", "json", "locks", "status", "deploy/api"); r.code != 0 || r.stdout != "null\n" {
		t.Fatalf("status -o json of a free key: %s", r)
	}

	// Renew.
	r = f.cli(t, "locks", "renew", "deploy/web", "--lease", l.LeaseID, "--ttl", "2m", "-o", "json")
	if r.code != 0 || decodeLease(t, r).TTLLeftMs <= 115000 {
		t.Fatalf("renew: %s", r)
	}
	if r = f.cli(t, "locks", "renew", "deploy/web", "--lease", "not-it"); r.code != exitNotFound || !strings.Contains(r.stderr, "not the live lease") {
		t.Fatalf("renew by another ID: %s", r)
	}

	// Release, twice.
	if r = f.cli(t, "locks", "release", "deploy/web", "--lease", l.LeaseID); r.code != 0 || !strings.Contains(r.stdout, "released lease "+l.LeaseID) {
		t.Fatalf("release: %s", r)
	}
	r = f.cli(t, "locks", "release", "deploy/web", "--lease", l.LeaseID, "-o", "json")
	var rel map[string]bool
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rel) != nil || !reflect.DeepEqual(rel, map[string]bool{"released": false, "already_released": true}) {
		t.Fatalf("second release: %s", r)
	}
	if r = f.cli(t, "locks", "renew", "deploy/web", "--lease", l.LeaseID); r.code != exitNotFound {
		t.Fatalf("renew after release: %s", r)
	}

	// Force-release.
	if r = f.cli(t, "locks", "force-release", "deploy/web", "--reason", "test"); r.code != exitNotFound || !strings.Contains(r.stderr, "is free") {
		t.Fatalf("force-release of a free key: %s", r)
	}
	r = f.cli(t, "locks", "acquire", "deploy/web", "--holder", "stuck", "-o", "json")
	stuck := decodeLease(t, r)
	r = f.cli(t, "locks", "force-release", "deploy/web", "--reason", "wedged", "-o", "json")
	if r.code != 0 || decodeLease(t, r).LeaseID != stuck.LeaseID {
		t.Fatalf("force-release: %s", r)
	}
	if r = f.cli(t, "locks", "release", "deploy/web", "--lease", stuck.LeaseID); r.code != exitNotFound {
		t.Fatalf("release of a force-released lease: %s", r)
	}
}

func TestAcquireWaits(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	c := f.client(t, "")
	held, err := c.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "job-7", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Past --wait: busy, with the holder.
	start := time.Now()
	r := f.cli(t, "locks", "acquire", "k", "--wait", "500ms")
	if r.code != exitBusy || !strings.Contains(r.stderr, `held by "job-7"`) {
		t.Fatalf("acquire past --wait: %s", r)
	}
	// Not before --wait (the exit code says it gave up on the wait, not on something else;
	// how much later depends on the machine's load).
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("gave up after %s with --wait 500ms", d)
	}
	// Released while waiting: granted.
	done := make(chan result, 1)
	go func() {
		var out, errOut syncBuffer
		code := run([]string{"locks", "acquire", "k", "--wait", "20s", "--server", f.url, "-o", "json"}, nil, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	<-f.refused // the waiter found it held (at the latest, now)
	if _, err := c.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	r = <-done
	if r.code != 0 || decodeLease(t, r).Token <= held.Token {
		t.Fatalf("acquire released while waiting: %s", r)
	}
}

func TestListFollowsCursors(t *testing.T) {
	f := newFixture(t, nil)
	old := listPageSize
	listPageSize = 2
	t.Cleanup(func() { listPageSize = old })
	c := f.client(t, "")
	var want []string
	for i := range 5 {
		key := fmt.Sprintf("svc/%d", i)
		want = append(want, key)
		holder := "h"
		if i == 3 {
			holder = "special"
		}
		if _, err := c.Acquire(context.Background(), &store.AcquireParams{Key: key, LeaseID: "x", Holder: holder, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Acquire(context.Background(), &store.AcquireParams{Key: "other", LeaseID: "x", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	keys := func(r result) []string {
		t.Helper()
		var ls []leaseJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ls) != nil {
			t.Fatalf("list: %s", r)
		}
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.Key)
		}
		return ks
	}
	if got := keys(f.cli(t, "locks", "list", "--prefix", "svc/", "-o", "json")); !reflect.DeepEqual(got, want) {
		t.Fatalf("list over pages of 2 = %v, want %v", got, want)
	}
	if got := keys(f.cli(t, "locks", "list", "--prefix", "svc/", "--limit", "3", "-o", "json")); !reflect.DeepEqual(got, want[:3]) {
		t.Fatalf("list --limit 3 = %v, want %v", got, want[:3])
	}
	if got := keys(f.cli(t, "locks", "list", "--holder", "special", "-o", "json")); !reflect.DeepEqual(got, []string{"svc/3"}) {
		t.Fatalf("list --holder = %v", got)
	}
	if got := keys(f.cli(t, "locks", "list", "--prefix", "none/", "-o", "json")); len(got) != 0 {
		t.Fatalf("empty list = %v", got)
	}
	r := f.cli(t, "locks", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 7 || !strings.HasPrefix(lines[0], "KEY ") || !strings.HasPrefix(lines[1], "other ") {
		t.Fatalf("table: %s", r)
	}
	// Columns line up: every row's HOLDER starts where the header's does.
	col := strings.Index(lines[0], "HOLDER")
	for _, line := range lines[1:] {
		if len(line) < col || line[col-1] != ' ' || line[col] == ' ' {
			t.Fatalf("column HOLDER misaligned at %d in:\n%s", col, r.stdout)
		}
	}
	if r := f.cli(t, "locks", "list", "--prefix", "none/"); r.code != 0 || r.stdout != "no live leases\n" {
		t.Fatalf("empty table: %s", r)
	}
}

func TestAuthAndUnreachableServer(t *testing.T) {
	auth, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken("r-tok") + "\nwriter write " + server.HashToken("w-tok") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, auth)
	if r := f.cli(t, "locks", "list"); r.code != exitAuth || !strings.Contains(r.stderr, "BATON_TOKEN") {
		t.Fatalf("no token: %s", r)
	}
	if r := f.cli(t, "locks", "list", "--token", "guess"); r.code != exitAuth || !strings.Contains(r.stderr, "not known") {
		t.Fatalf("unknown token: %s", r)
	}
	if r := f.cli(t, "locks", "list", "--token", "r-tok"); r.code != 0 {
		t.Fatalf("read token lists: %s", r)
	}
	if r := f.cli(t, "locks", "acquire", "k", "--token", "r-tok"); r.code != exitAuth || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("read token acquires: %s", r)
	}
	t.Setenv("BATON_TOKEN", "w-tok")
	var out, errOut syncBuffer
	if code := run([]string{"locks", "acquire", "k", "--server", f.url}, nil, &out, &errOut); code != 0 {
		t.Fatalf("token from BATON_TOKEN: exit %d\n%s", code, errOut.String())
	}
	if code := run([]string{"locks", "force-release", "k", "--reason", "x", "--server", f.url}, nil, &out, &errOut); code != exitAuth {
		t.Fatalf("write token force-releases: exit %d", code)
	}

	deadURL := closedURL()
	if r := cli(t, "locks", "status", "k", "--server", deadURL); r.code != exitError || !strings.Contains(r.stderr, "cannot reach the server at "+deadURL) {
		t.Fatalf("unreachable server: %s", r)
	}
}

// closedURL is the address of a server that has stopped: nothing listens there.
func closedURL() string {
	ts := httptest.NewServer(http.NotFoundHandler())
	ts.Close()
	return ts.URL
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
