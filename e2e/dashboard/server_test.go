package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
)

// Tokens of the test servers' auth file, by role.
const (
	adminToken  = "admin-secret-token"
	writeToken  = "write-secret-token"
	readerToken = "reader-secret-token"
)

// daemon is one `baton serve` process; restart keeps its address and store.
type daemon struct {
	t    *testing.T
	url  string
	addr string
	args []string
	cmd  *exec.Cmd
	log  string
	// exited is closed when the process ended.
	exited chan struct{}
}

// startServer runs baton serve over a fresh SQLite file on a free loopback port; with auth,
// it reads an auth file with the three tokens above (names admin, writer, reader).
func startServer(t *testing.T, auth bool) *daemon {
	t.Helper()
	return startServing(t, "", auth)
}

// startServerOn runs baton serve without auth over the store of URL storeURL.
func startServerOn(t *testing.T, storeURL string) *daemon {
	t.Helper()
	return startServing(t, storeURL, false)
}

// startServing runs baton serve over storeURL ("": a fresh SQLite file), with the flags of extra
// after the others.
func startServing(t *testing.T, storeURL string, auth bool, extra ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	if storeURL == "" {
		storeURL = "sqlite://" + filepath.Join(dir, "baton.db")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &daemon{t: t, addr: addr, url: "http://" + addr, log: filepath.Join(dir, "serve.log"),
		args: []string{"serve", "--listen", addr, "--store", storeURL}}
	if auth {
		file := filepath.Join(dir, "tokens")
		body := fmt.Sprintf("admin admin %s\nwriter write %s\nreader read %s\n",
			server.HashToken(adminToken), server.HashToken(writeToken), server.HashToken(readerToken))
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		d.args = append(d.args, "--auth-file", file)
	}
	d.args = append(d.args, extra...)
	d.start()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	log, err := os.OpenFile(d.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer log.Close()
	d.cmd = exec.Command(binary, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	// Ready when /readyz answers 200; the process exiting first is a failure.
	exited := make(chan struct{})
	cmd := d.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	for {
		res, err := http.Get(d.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(d.log)
			d.t.Fatalf("baton serve exited before it was ready:\n%s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	d.exited = exited
}

// stop ends the server with SIGTERM and waits for it.
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	d.cmd = nil
}

// call makes one API request with token ("" for none) and decodes the JSON answer.
func (d *daemon) call(token, method, path string, body any) (int, map[string]any) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, d.url+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if len(raw) > 0 && strings.Contains(res.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &out); err != nil {
			d.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return res.StatusCode, out
}

// must is call that fails the test unless the status is want.
func (d *daemon) must(want int, token, method, path string, body any) map[string]any {
	d.t.Helper()
	status, out := d.call(token, method, path, body)
	if status != want {
		d.t.Fatalf("%s %s: status %d, want %d: %v", method, path, status, want, out)
	}
	return out
}
