package peers

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/batonhq/baton"
	batonetcd "github.com/batonhq/baton/store/etcd"
	"github.com/batonhq/baton/store/storetest"
)

// startEtcd runs a single-member etcd in process on free loopback ports, fsync on (as in
// production), and stops it when b ends. It returns the client URL.
func startEtcd(b *testing.B) string {
	b.Helper()
	free := func() url.URL {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		return url.URL{Scheme: "http", Host: ln.Addr().String()}
	}
	client, peer := free(), free()
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = b.TempDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("bench=%s", peer.String())
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		b.Fatal("embedded etcd not ready")
	}
	return client.String()
}

func etcdClient(b *testing.B, endpoint string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func batonEtcdLocker(b *testing.B, endpoint string) *baton.Locker {
	st, err := batonetcd.Open(context.Background(), batonetcd.Config{Endpoints: []string{endpoint}, Prefix: "baton-bench/"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	l, err := baton.NewLocker(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// mutexCycle is etcd's own recipe: concurrency.Mutex on a session (one etcd lease per client,
// kept alive by the session), TryLock then Unlock. A session per client is how it is meant to be
// used; creating one per lock would cost a lease grant and revoke more.
func mutexCycle(b *testing.B, c *clientv3.Client) storetest.CycleFunc {
	sessions := map[string]*concurrency.Session{}
	var mu = make(chan struct{}, 1)
	return func(ctx context.Context, key string) error {
		mu <- struct{}{}
		s := sessions[key]
		if s == nil {
			var err error
			if s, err = concurrency.NewSession(c, concurrency.WithTTL(15)); err != nil {
				<-mu
				return err
			}
			sessions[key] = s
			b.Cleanup(func() { s.Close() })
		}
		<-mu
		m := concurrency.NewMutex(s, "/mutex/"+key)
		if err := m.TryLock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
}

// BenchmarkEtcdCycle: uncontended acquire + release at 8 clients, Baton paired against
// concurrency.Mutex ("mutex": x-baseline = Mutex time / Baton time) and, in "sameWork", against
// a raw client doing the same requests as Baton's store (etcd_samework_test.go; x-baseline =
// its time / Baton's) and the Mutex again (x-mutex), all three alternating in one run. The
// floor's own ratio to the Mutex (x-mutex / x-baseline) is the cost of the design; Baton's to
// the floor (x-baseline) that of its code.
func BenchmarkEtcdCycle(b *testing.B) {
	ep := startEtcd(b)
	mutex := mutexCycle(b, etcdClient(b, ep))
	baton := storetest.LockerCycle(batonEtcdLocker(b, ep))
	floor := etcdSameWorkCycle(b, etcdClient(b, ep))
	b.Run("mutex", func(b *testing.B) { storetest.BenchPaired(b, 8, mutex, baton) })
	b.Run("sameWork", func(b *testing.B) {
		storetest.BenchAgainst(b, 8, baton, storetest.Baseline{Name: "sameWork", Cycle: floor},
			storetest.Baseline{Name: "mutex", Cycle: mutex})
	})
}

// BenchmarkEtcdHandoff16: 16 waiters on one key, release to next acquire.
func BenchmarkEtcdHandoff16(b *testing.B) {
	ep := startEtcd(b)
	b.Run("baton", func(b *testing.B) {
		storetest.BenchHandoff(b, batonEtcdLocker(b, ep), 16)
	})
	b.Run("mutex", func(b *testing.B) {
		c := etcdClient(b, ep)
		// One session (etcd lease) per waiter, as a long-lived worker would hold.
		sessions := make(chan *concurrency.Session, 16)
		for range 16 {
			s, err := concurrency.NewSession(c, concurrency.WithTTL(15))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			sessions <- s
		}
		benchHandoff(b, 16, func(ctx context.Context) (func(context.Context) error, error) {
			s := <-sessions
			m := concurrency.NewMutex(s, "/mutex/handoff")
			if err := m.Lock(ctx); err != nil {
				sessions <- s
				return nil, err
			}
			return func(ctx context.Context) error { defer func() { sessions <- s }(); return m.Unlock(ctx) }, nil
		})
	})
}
