package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// fencedWriter is the command of a `baton run` holder N: it waits for $DIR/go.N, then checks
// its token with `baton fence check` and writes to the resource over HTTP with its token,
// recording both outcomes.
const fencedWriter = `
echo $$ > "$DIR/pid.$N"
touch "$DIR/started.$N"
while [ ! -e "$DIR/go.$N" ]; do sleep 0.02; done
"$BATON" fence check; echo $? > "$DIR/fence.$N"
curl -s -o "$DIR/body.$N" -w '%{http_code}' -X POST \
  -H "Baton-Fence-Resource: $BATON_LOCK_KEY" -H "Baton-Fencing-Token: $BATON_FENCING_TOKEN" \
  "$RESOURCE" > "$DIR/http.$N"
touch "$DIR/done.$N"
`

// The failure fencing prevents, through the binary: holder 1 (`baton run`) is frozen with
// SIGSTOP past its TTL; holder 2 gets the lock and writes; holder 1's command then wakes and
// writes late. Both its `baton fence check` and its HTTP write (fence.Middleware) are refused,
// and the resource has only holder 2's write.
func TestFrozenHolderLateWriteIsRefused(t *testing.T) {
	t.Parallel()
	for name, storeURL := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			frozenHolderLateWrite(t, storeURL(t))
		})
	}
}

func frozenHolderLateWrite(t *testing.T, storeURL string) {
	s := startServer(t, storeURL)
	dir := t.TempDir()
	var mu sync.Mutex
	var writes []string
	resource := httptest.NewServer(fence.Middleware(fence.NewMemoryStore(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		writes = append(writes, r.Header.Get(fence.TokenHeader))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})))
	defer resource.Close()
	env := []string{"DIR=" + dir, "BATON=" + binary, "RESOURCE=" + resource.URL}

	const ttl = 2 * time.Second
	first := exec.Command(binary, "run", "--lock", "orders", "--ttl", ttl.String(), "--", "sh", "-c", fencedWriter)
	first.Env = append(append(os.Environ(), "BATON_SERVER="+s.url, "N=1"), env...)
	firstOut := &strings.Builder{}
	first.Stdout, first.Stderr = firstOut, firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if first.ProcessState == nil {
			_ = first.Process.Kill()
			_ = first.Wait()
		}
	})
	waitFile(t, filepath.Join(dir, "started.1"))
	// Freeze holder 1's runner: it renews no more, and its lease expires.
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = first.Process.Signal(syscall.SIGCONT)
		}
	}()

	if err := os.WriteFile(filepath.Join(dir, "go.2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := s.baton(context.Background(), append(env, "N=2"), "run", "--lock", "orders", "--ttl", "10s", "--wait", hangGuard.String(), "--", "sh", "-c", fencedWriter)
	if code != 0 {
		t.Fatalf("holder 2 exited %d: %s", code, out)
	}
	if got := readTrim(t, dir, "fence.2"); got != "0" {
		t.Fatalf("holder 2's fence check exited %s", got)
	}
	if got := readTrim(t, dir, "http.2"); got != "204" {
		t.Fatalf("holder 2's write: HTTP %s: %s", got, readTrim(t, dir, "body.2"))
	}

	// Holder 1's command wakes (its runner is still frozen, as a paused process's would be for
	// the moment it takes to notice) and writes late.
	if err := os.WriteFile(filepath.Join(dir, "go.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "done.1"))
	if got := readTrim(t, dir, "fence.1"); got != "76" {
		t.Errorf("holder 1's late fence check exited %s, want 76 (stale)", got)
	}
	if got := readTrim(t, dir, "http.1"); got != "409" {
		t.Errorf("holder 1's late write: HTTP %s, want 409", got)
	}
	if body := readTrim(t, dir, "body.1"); !strings.Contains(body, `"stale_token"`) {
		t.Errorf("holder 1's late write answer: %s", body)
	}
	mu.Lock()
	got := fmt.Sprint(writes)
	mu.Unlock()
	if len(writes) != 1 {
		t.Fatalf("the resource accepted writes with tokens %s, want only holder 2's", got)
	}

	if err := first.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	err := first.Wait()
	t.Logf("holder 1's runner, resumed, exited with %v: %s", err, firstOut)
	t.Logf("resource writes: %s; holder 1's late write refused", got)
}

func readTrim(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
