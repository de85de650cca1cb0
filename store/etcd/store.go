// Package etcd is a Baton lease store on etcd v3 (go.etcd.io/etcd/client/v3).
//
// It lives in its own Go module (github.com/batonhq/baton/store/etcd) so that the etcd client,
// gRPC and their dependencies stay out of the core module. See docs/guarantees.md ("etcd") for
// what it promises.
//
// Layout under Config.Prefix (default "baton/"):
//
//	leases/<key>  the live lease: JSON record, attached to one etcd lease per Baton lease
//	              (reused from a released Baton lease when one is idle, see pool.go)
//	delay/<key>   only for leases with a lock-delay: attached to a second etcd lease of
//	              TTL+lock-delay, kept alive with the first; if the lease key expires, this key
//	              outlives it by the lock-delay and keeps the key resting
//	rest/<key>    a cooldown (after a clean release) or lock-delay (after a force-release),
//	              attached to an etcd lease of that duration
//	last/<key>    the last lease granted on the key and how it ended (held, released,
//	              forced), without an etcd lease: it answers "already released" and marks a
//	              grant after an expiry as a takeover. One such key stays per key ever used.
//
// Fencing token: the CreateRevision of leases/<key>, i.e. the etcd revision of the Txn that
// granted it. Revisions increase store-wide and survive restarts and compaction.
//
// TTLs: etcd lease TTLs are whole seconds, so the etcd lease is granted with the requested TTL
// rounded up (and at least the cluster's minimum lease TTL). The key may thus stay held up to
// a second longer than asked; the holder-side deadline in package baton still uses the
// requested TTL, so a holder stops trusting its lease before the store could hand it on.
package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// Config configures a Store.
type Config struct {
	// Endpoints of the etcd cluster (used by Open only).
	Endpoints []string
	// Prefix of every key the store writes; "baton/" if empty. Stores with different prefixes
	// on one cluster are independent.
	Prefix string
	// DialTimeout bounds connecting in Open; 5 s if zero.
	DialTimeout time.Duration
	// TLS, if set, is used to connect (Open only).
	TLS *tls.Config
	// Username and Password authenticate to etcd, if set (Open only).
	Username, Password string
}

// Store is a store.Store on etcd.
type Store struct {
	store.NoAudit // Events lists nothing: no audit log

	cli      *clientv3.Client
	ownsCli  bool
	prefix   string
	hub      *notify.Hub
	closed   store.Closed
	closeMu  sync.Once
	cancel   context.CancelFunc
	watchEnd chan struct{}
	pool     leasePool // idle etcd leases for reuse (pool.go)
	held     heldCache // leases granted here, for one-Txn releases
	restarts restarter // TTL restarts of reused etcd leases (renew.go)
}

var _ store.Store = (*Store)(nil)

// Open connects to etcd and returns a store that owns the connection.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		Context:     context.Background(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connect: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, prefixOf(cfg)+"leases/", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd: connect: %w", err)
	}
	s := New(cli, cfg)
	s.ownsCli = true
	return s, nil
}

// New returns a store on an existing client. Close does not close the client.
func New(cli *clientv3.Client, cfg Config) *Store {
	prefix := prefixOf(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{cli: cli, prefix: prefix, hub: notify.NewHub(), cancel: cancel, watchEnd: make(chan struct{})}
	s.NoAudit = store.NewNoAudit(&s.closed)
	s.restarts.cli = cli
	go s.watch(ctx)
	return s
}

func prefixOf(cfg Config) string {
	if cfg.Prefix == "" {
		return "baton/"
	}
	return cfg.Prefix
}

// Client returns the etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

// LeaseKey is the etcd key holding the lease on key.
func (s *Store) LeaseKey(key string) string { return s.prefix + "leases/" + key }

func (s *Store) delayKey(key string) string { return s.prefix + "delay/" + key }
func (s *Store) restKey(key string) string  { return s.prefix + "rest/" + key }
func (s *Store) lastKey(key string) string  { return s.prefix + "last/" + key }

// record is the value of leases/<key>.
type record struct {
	LeaseID     string          `json:"lease_id"`
	Holder      string          `json:"holder"`
	Owner       string          `json:"owner,omitempty"` // none: "" (as in records of earlier versions)
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	TTLSeconds  int64           `json:"ttl_s"`
	CooldownNs  int64           `json:"cooldown_ns,omitempty"`
	LockDelayNs int64           `json:"lock_delay_ns,omitempty"`
	AcquiredAt  time.Time       `json:"acquired_at"`
	DelayLease  int64           `json:"delay_lease,omitempty"`
}

// rest is the value of rest/<key>.
type rest struct {
	Reason string `json:"reason"`
	Ns     int64  `json:"ns"`
}

// last is the value of last/<key>.
type last struct {
	LeaseID string `json:"lease_id"`
	State   string `json:"state"` // held, released, forced
}

func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return max(s, 1)
}

// remaining asks the server how long an etcd lease has left: whole seconds, rounded down by
// etcd, so the estimate adds a second and is capped at the granted TTL. ok is false if the
// lease is gone.
func (s *Store) remaining(ctx context.Context, id clientv3.LeaseID) (time.Duration, bool, error) {
	r, err := s.cli.TimeToLive(ctx, id)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, false, nil
		}
		return 0, false, s.closed.Wrap(err)
	}
	if r.TTL < 0 {
		return 0, false, nil
	}
	d := time.Duration(min(r.TTL+1, max(r.GrantedTTL, 1))) * time.Second
	return d, true, nil
}

func (s *Store) lease(key string, kv *mvccKV, rec *record, ttlLeft time.Duration) *store.Lease {
	now := time.Now()
	return &store.Lease{
		Key: key, ID: rec.LeaseID, Holder: rec.Holder, Owner: rec.Owner, Token: uint64(kv.CreateRevision),
		AcquiredAt: rec.AcquiredAt, ExpiresAt: now.Add(ttlLeft), TTLLeft: ttlLeft, Metadata: rec.Metadata,
	}
}

func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: true, Audit: false, Owners: true}
}

// Subscribe wakes on deletion of the lease key (release, force-release, expiry, a deleted
// record) and on the end of a rest or lock-delay, in this and every other process.
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.hub.Subscribe(key) }

// Close stops the watch and, for a store from Open, closes the client.
func (s *Store) Close() error {
	var err error
	s.closeMu.Do(func() {
		s.closed.Store(true)
		s.cancel()
		<-s.watchEnd
		s.restarts.close()
		s.hub.NotifyAll()
		if s.ownsCli {
			err = s.cli.Close()
			if errors.Is(err, context.Canceled) {
				err = nil
			}
		}
	})
	return err
}

// watch dispatches deletions under the prefix to the hub, re-watching after cancellation or
// compaction (and then waking everyone, since events may have been missed).
func (s *Store) watch(ctx context.Context) {
	defer close(s.watchEnd)
	var rev int64
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := s.cli.Watch(wctx, s.prefix, opts...)
		for resp := range ch {
			if resp.CompactRevision != 0 {
				rev = 0
				s.hub.NotifyAll()
				break
			}
			if err := resp.Err(); err != nil || resp.Canceled {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypeDelete {
					continue
				}
				k := strings.TrimPrefix(string(ev.Kv.Key), s.prefix)
				for _, sub := range []string{"leases/", "rest/", "delay/"} {
					if strings.HasPrefix(k, sub) {
						s.hub.Notify(k[len(sub):])
						break
					}
				}
			}
			rev = resp.Header.Revision + 1
		}
		wcancel()
		if ctx.Err() != nil {
			return
		}
		s.hub.NotifyAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
