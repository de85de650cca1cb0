package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// full is this binary, built once for the package's tests (each link of it, with etcd, the
// Kubernetes client and the AWS SDK in it, takes seconds of CPU): into dir, which TestMain
// removes.
var full struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if full.dir != "" {
		os.RemoveAll(full.dir)
	}
	os.Exit(code)
}

// buildFull builds this binary, once for the package, and returns its path.
func buildFull(t *testing.T) string {
	t.Helper()
	full.once.Do(func() {
		if full.dir, full.err = os.MkdirTemp("", "baton-full-"); full.err != nil {
			return
		}
		bin := filepath.Join(full.dir, "baton-full")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			full.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		full.bin = bin
	})
	if full.err != nil {
		t.Fatal(full.err)
	}
	return full.bin
}

// startServe runs `bin serve` on storeURL (env: nil inherits the test's) until the test ends,
// and returns its base URL once /readyz answers 200, and its log.
func startServe(t *testing.T, bin, storeURL string, env []string) (string, *bytes.Buffer) {
	t.Helper()
	listen := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var serveLog bytes.Buffer
	srv := exec.CommandContext(ctx, bin, "serve", "--listen", listen, "--store", storeURL)
	srv.Env = env
	srv.Stdout, srv.Stderr = &serveLog, &serveLog
	if err := srv.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	base := "http://" + listen
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, &serveLog
			}
		}
		select {
		case <-exited:
			t.Fatalf("serve exited: %s", serveLog.String())
		default:
		}
		time.Sleep(20 * time.Millisecond) // polling a process that gives no other signal
	}
}

// checkRunTokens runs `bin run` on lock twice through the server at base and checks that the
// fencing tokens the command sees increase.
func checkRunTokens(t *testing.T, bin, base, lock string, serveLog *bytes.Buffer) {
	t.Helper()
	var last int
	for i := range 2 {
		out, err := exec.Command(bin, "run", "--server", base, "--lock", lock, "--", "sh", "-c", "echo $BATON_FENCING_TOKEN").CombinedOutput()
		if err != nil {
			t.Fatalf("baton run: %v\n%s\nserver log:\n%s", err, out, serveLog.String())
		}
		tok, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || tok <= last {
			t.Fatalf("run %d printed token %q after %d", i, out, last)
		}
		last = tok
	}
}
