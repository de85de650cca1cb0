package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/batontest"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

// 500 connections that send a request's headers with a Content-Length and never the body, none
// with a valid token, against `baton serve` with an auth file and 256 file descriptors (as a
// container might give it): a holder that connects anew for each renewal (its connection
// dropped by a proxy, or a `baton locks renew` from a script) keeps its lease through 20
// renewals. Each connection used to be held open for ever, even after its 401, until the
// server had no descriptor left and every renewal timed out.
func TestServeStalledBodiesDoNotStarveRenewals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := batontest.Build(t, "")
	dir := t.TempDir()
	// ulimit -n sets the soft and the hard limit: Go raises a soft limit to the hard one.
	limited := filepath.Join(dir, "baton-256-fds")
	if err := os.WriteFile(limited, []byte("#!/bin/sh\nulimit -n 256 || exit 1\nexec "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	authFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(authFile, []byte("holder write "+server.HashToken("holder-token")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := batontest.Serve(t, limited, nil, "--store", "sqlite://"+filepath.Join(dir, "b.db"), "--auth-file", authFile)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := client.NewStore(client.Config{BaseURL: srv.URL, Token: "holder-token",
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	const ttl = 30 * time.Second
	lease, err := holder.Acquire(context.Background(), &store.AcquireParams{Key: "stall/held", LeaseID: "stall-holder", Holder: "h", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}

	// The stalled connections; each reader ends when the server closes its connection.
	const stalled = 500
	var (
		mu      sync.Mutex
		conns   []net.Conn
		dialErr int
		closed  sync.WaitGroup
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	var dialed sync.WaitGroup
	for i := range stalled {
		dialed.Add(1)
		go func() {
			defer dialed.Done()
			c, err := net.Dial("tcp", u.Host)
			if err != nil {
				mu.Lock()
				dialErr++
				mu.Unlock()
				return
			}
			authz := ""
			if i%2 == 1 {
				authz = "Authorization: Bearer not-a-token\r\n"
			}
			path := []string{"/v1/locks/renew", "/v1/jobs/batch", "/v1/locks/acquire"}[i%3]
			if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n%s\r\n",
				path, u.Host, authz); err != nil {
				c.Close()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			closed.Add(1)
			go func() {
				defer closed.Done()
				_, _ = io.Copy(io.Discard, bufio.NewReader(c))
			}()
		}()
	}
	dialed.Wait()

	// A renewal fails if it does not land before the lease would expire: like baton.Locker's
	// keepalive, the holder retries transient refusals (a connection refused at the cap, while
	// the server still closes the stalled ones) after a pause, until then.
	retried, firstRetry := 0, error(nil)
	for i := range 20 {
		ctx, cancel := context.WithDeadline(context.Background(), lease.ExpiresAt)
		for {
			l, err := holder.Renew(ctx, &store.RenewParams{Key: lease.Key, LeaseID: lease.ID, TTL: ttl})
			if err == nil {
				lease = l
				break
			}
			var pe *client.ProblemError
			if ctx.Err() != nil || errors.Is(err, store.ErrNotHeld) || (errors.As(err, &pe) && !pe.Retryable()) {
				cancel()
				t.Fatalf("renewal %d failed with %d connections stalled (%d dials failed): %v\nserver log:\n%.3000s", i, stalled, dialErr, err, srv.Log())
			}
			if retried++; firstRetry == nil {
				firstRetry = err
			}
			time.Sleep(100 * time.Millisecond) // the holder's pause before it tries again
		}
		cancel()
	}
	// Every stalled connection was closed by the server: refused at the cap, or answered and
	// closed without waiting for its body.
	allClosed := make(chan struct{})
	go func() { closed.Wait(); close(allClosed) }()
	select {
	case <-allClosed:
	case <-time.After(hangGuard):
		t.Fatalf("stalled connections still open %s after the renewals: the server holds them (hung)", hangGuard)
	}
	t.Logf("20 renewals with %d stalled connections (%d dials failed): 0 failed, %d attempts retried (the first: %v)", stalled, dialErr, retried, firstRetry)
}
