package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/testredis"
)

// serveFails runs `baton serve args...`, which must exit 1 at once, and returns its output.
func serveFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, append([]string{"serve"}, args...)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("baton serve %v: %v, want exit 1\n%s", args, err, out)
	}
	return string(out)
}

// The refusal to listen publicly without an auth file names the address the user typed, not
// the one the kernel reports ("[::]:P" for "0.0.0.0:P").
func TestServeRefusalNamesTheAddressTyped(t *testing.T) {
	t.Parallel()
	addr := "0.0.0.0:" + strings.Split(freeAddr(t), ":")[1]
	out := serveFails(t, "--listen", addr, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	if !strings.Contains(out, "refusing to listen on "+addr+" without --auth-file") || strings.Contains(out, "[::]") {
		t.Fatalf("refusal does not name %s:\n%s", addr, out)
	}
}

// A SQLite path in a directory that does not exist: the error names the path and the cause,
// not the driver's "unable to open database file (14)".
func TestServeSQLiteMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nonexistent", "dir")
	out := serveFails(t, "--listen", "127.0.0.1:0", "--store", "sqlite://"+dir+"/x.db")
	if !strings.Contains(out, "cannot create "+dir+"/x.db: directory "+dir+" does not exist") || strings.Contains(out, "(14)") {
		t.Fatalf("no clear error for a missing directory:\n%s", out)
	}
}

// A Redis URL to a closed port: one clear error, and none of go-redis's own log lines
// ("redis: 2026/… pool.go:…: failed to dial") before it.
func TestServeRedisClosedPort(t *testing.T) {
	t.Parallel()
	closed := freeAddr(t) // free, so nothing listens there
	out := serveFails(t, "--listen", "127.0.0.1:0", "--store", "redis://"+closed)
	if strings.Contains(out, "pool.go") || strings.Contains(out, "failed to dial") || strings.Count(out, "level=ERROR") != 1 ||
		!strings.Contains(out, "redis store redis://"+closed) || !strings.Contains(out, "connection refused") {
		t.Fatalf("want one error naming the store and the refusal, no go-redis log lines:\n%s", out)
	}
}

// On a Redis store, which keeps no audit log, GET /v1/events answers 501 with a problem saying
// so, and `baton events` prints that notice and exits 1 instead of an empty table.
func TestEventsOnRedisSayNoAuditLog(t *testing.T) {
	t.Parallel()
	addr := testredis.Start(t)
	s := startServer(t, "redis://"+addr+"?baton_allow_volatile=true")
	resp, err := http.Get(s.url + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Code, Detail string }
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 501 || resp.Header.Get("Content-Type") != "application/problem+json" || p.Code != "not_implemented" ||
		!strings.Contains(p.Detail, "keeps no audit log") {
		t.Fatalf("GET /v1/events on Redis: %d %s %+v", resp.StatusCode, resp.Header.Get("Content-Type"), p)
	}
	code, out := s.baton(context.Background(), nil, "events")
	if code != 1 || !strings.Contains(out, "keeps no audit log") || strings.Contains(out, "ID  AT") {
		t.Fatalf("baton events on Redis: exit %d\n%s", code, out)
	}
}
