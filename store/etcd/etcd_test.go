package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/etcd"
	"github.com/batonhq/baton/store/storetest"
)

// node is one embedded etcd member on loopback ports, with its data in dir.
type node struct {
	dir          string
	client, peer url.URL
	e            *embed.Etcd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func newNode(dir string) (*node, error) {
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &node{dir: dir}
	n.client = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	n.peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	return n, n.start()
}

// start runs (or re-runs, on the same data dir and ports) the member.
func (n *node) start() error {
	cfg := embed.NewConfig()
	cfg.Name = "baton-test"
	cfg.Dir = n.dir
	cfg.ListenClientUrls = []url.URL{n.client}
	cfg.AdvertiseClientUrls = []url.URL{n.client}
	cfg.ListenPeerUrls = []url.URL{n.peer}
	cfg.AdvertisePeerUrls = []url.URL{n.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Short election timeouts make etcd's minimum lease TTL one second, as Baton's MinTTL.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("embedded etcd not ready after 30s")
	}
	n.e = e
	return nil
}

func (n *node) stop() {
	if n.e != nil {
		n.e.Close()
		n.e = nil
	}
}

func (n *node) endpoints() []string { return []string{n.client.String()} }

var shared *node

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = newNode(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded etcd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func open(t testing.TB, n *node, prefix string) *etcd.Store {
	t.Helper()
	s, err := etcd.Open(context.Background(), etcd.Config{Endpoints: n.endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var prefixes atomic.Int64

func harness() storetest.Harness {
	return storetest.Harness{NewBackend: func(t testing.TB) storetest.Backend {
		prefix := fmt.Sprintf("test-%d/", prefixes.Add(1))
		return storetest.Backend{
			Open: func(t testing.TB) store.Store { return open(t, shared, prefix) },
			DeleteRow: func(t testing.TB, key string) {
				s := open(t, shared, prefix)
				if _, err := s.Client().Delete(context.Background(), s.LeaseKey(key)); err != nil {
					t.Fatal(err)
				}
			},
		}
	}}
}

// Both tests run in parallel: the restart test has its own etcd.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness())
}

// Tokens are etcd revisions: they keep increasing after the etcd server restarts on its data
// directory, and a lease held across the restart is still held (etcd restores its leases).
func TestRestartKeepsTokensMonotonic(t *testing.T) {
	t.Parallel()
	n, err := newNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer n.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := open(t, n, "")
	first, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a", Holder: "h", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "a"}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.Acquire(ctx, &store.AcquireParams{Key: "kept", LeaseID: "b", Holder: "h", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	n.stop()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	s = open(t, n, "")
	second, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "c", Holder: "h", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if second.Token <= first.Token || second.Token <= kept.Token {
		t.Fatalf("token after restart %d, not greater than %d and %d before it", second.Token, first.Token, kept.Token)
	}
	got, err := s.Get(ctx, "kept")
	if err != nil || got.ID != "b" || got.Token != kept.Token {
		t.Fatalf("lease held across the restart: %+v, %v", got, err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "kept", LeaseID: "b", TTL: 30 * time.Second}); err != nil {
		t.Fatalf("renew after restart: %v", err)
	}
	t.Logf("tokens: %d before the restart, %d after", first.Token, second.Token)
}
