package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// DefaultDriftFactor is RedlockConfig.DriftFactor when zero: the share of a TTL allowed for clock
// drift between the client and the servers.
const DefaultDriftFactor = 0.01

// DefaultNodeTimeout bounds one call to one Redlock node.
const DefaultNodeTimeout = 2 * time.Second

// RedlockConfig configures a RedlockStore.
type RedlockConfig struct {
	// Addrs are host:port of independent Redis servers (not replicas of each other, not one
	// cluster): an odd number, at least 3.
	Addrs []string
	// Options, if set, is the template of every node's client options (password, TLS, ...);
	// its Addr is replaced by each of Addrs.
	Options *goredis.Options
	// KeyPrefix as in Config.
	KeyPrefix string
	// DriftFactor is the share of the TTL subtracted from a grant's validity for clock drift
	// (DefaultDriftFactor if zero).
	DriftFactor float64
	// NodeTimeout bounds each call to one node (DefaultNodeTimeout if zero); acquire and renew
	// are further bounded by half the TTL, so a slow node cannot eat the validity.
	NodeTimeout time.Duration
	// ShadowRetention as in Config.
	ShadowRetention time.Duration
}

// RedlockStore is a store.Store over N independent Redis servers with the Redlock algorithm:
// a lease exists when a majority (N/2+1) of the nodes granted it, with the same lease ID, within
// its validity (TTL - elapsed - DriftFactor*TTL - 2ms).
//
// It provides no fencing tokens (Capabilities.FencingTokens is false). Each node has its own
// counter, so there is no single sequence: two quorums can share a single node and the maximum of
// a quorum's tokens can be lower than a token of an earlier grant whose quorum was other nodes;
// a node restarted without persistence restarts its counter and forgets its grants. Lease.Token is
// the maximum token of the granting quorum, useful for logs, not for fencing.
type RedlockStore struct {
	store.NoAudit // Events lists nothing: no audit log

	nodes       []*node
	clients     []*goredis.Client
	lis         []*listener
	hub         *notify.Hub
	quorum      int
	drift       float64
	nodeTimeout time.Duration
	maxSeen     atomic.Uint64 // the highest token this store has returned: a Lamport clock
	closed      store.Closed
	closeOnce   sync.Once
}

var _ store.Store = (*RedlockStore)(nil)

// OpenRedlock connects to every node. A node that is down at Open is tolerated as long as a
// quorum answers PING; its Pub/Sub connection is retried in the background.
func OpenRedlock(ctx context.Context, cfg RedlockConfig) (*RedlockStore, error) {
	if len(cfg.Addrs) < 3 || len(cfg.Addrs)%2 == 0 {
		return nil, &store.InvalidArgumentError{Field: "addrs", Rule: fmt.Sprintf("must be an odd number of at least 3 servers (got %d)", len(cfg.Addrs))}
	}
	if cfg.DriftFactor < 0 || cfg.DriftFactor >= 0.5 {
		return nil, &store.InvalidArgumentError{Field: "drift_factor", Rule: "must be in [0, 0.5)"}
	}
	s := &RedlockStore{hub: notify.NewHub(), quorum: len(cfg.Addrs)/2 + 1, drift: cfg.DriftFactor, nodeTimeout: cfg.NodeTimeout}
	s.NoAudit = store.NewNoAudit(&s.closed)
	if s.drift == 0 {
		s.drift = DefaultDriftFactor
	}
	if s.nodeTimeout <= 0 {
		s.nodeTimeout = DefaultNodeTimeout
	}
	prefix, retention := prefixOr(cfg.KeyPrefix), retentionOr(cfg.ShadowRetention)
	for _, addr := range cfg.Addrs {
		var o goredis.Options
		if cfg.Options != nil {
			o = *cfg.Options
		}
		o.Addr = addr
		// A retried script could land after the caller gave up on the quorum; a node that fails
		// is a lost vote, not something to retry.
		o.MaxRetries = -1
		rdb := goredis.NewClient(&o)
		s.clients = append(s.clients, rdb)
		n := newNode(rdb, prefix, retention)
		n.always = "1" // waiters may be marked on other nodes only
		s.nodes = append(s.nodes, n)
	}
	up := 0
	var errs []error
	for i, rdb := range s.clients {
		pctx, cancel := context.WithTimeout(ctx, s.nodeTimeout)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.Addrs[i], err))
		} else {
			up++
		}
	}
	if up < s.quorum {
		s.closeClients()
		return nil, fmt.Errorf("redlock: only %d of %d nodes answer: %w", up, len(cfg.Addrs), errors.Join(errs...))
	}
	for i, rdb := range s.clients {
		l, err := startListener(ctx, rdb, s.nodes[i], s.hub, false)
		if err != nil {
			s.stopListeners()
			s.closeClients()
			return nil, fmt.Errorf("redlock: subscribe %s: %w", cfg.Addrs[i], err)
		}
		s.lis = append(s.lis, l)
	}
	return s, nil
}

// each runs fn on every node in parallel, each call bounded by timeout, and returns the replies
// and errors by node.
func (s *RedlockStore) each(ctx context.Context, timeout time.Duration, fn func(context.Context, *node) (*reply, error)) ([]*reply, []error) {
	replies := make([]*reply, len(s.nodes))
	errs := make([]error, len(s.nodes))
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			replies[i], errs[i] = fn(nctx, n)
		})
	}
	wg.Wait()
	return replies, errs
}

func (s *RedlockStore) opTimeout(ttl time.Duration) time.Duration {
	return min(s.nodeTimeout, ttl/2)
}

// validity is what is left of a grant made on a quorum after elapsed: the TTL, minus the time
// the round took, minus the allowance for clock drift, minus 2 ms.
func (s *RedlockStore) validity(ttl, elapsed time.Duration) time.Duration {
	return ttl - elapsed - time.Duration(s.drift*float64(ttl)) - 2*time.Millisecond
}

// majority groups live leases by ID and returns the largest group, combined: the holder, the
// maximum token, the earliest acquisition, the earliest expiry.
func majority(replies []*reply, status string) (*store.Lease, int, []*reply) {
	groups := map[string][]*reply{}
	var best string
	for _, r := range replies {
		if r == nil || r.status != status || r.lease == nil {
			continue
		}
		id := r.lease.ID
		groups[id] = append(groups[id], r)
		if len(groups[id]) > len(groups[best]) {
			best = id
		}
	}
	g := groups[best]
	if len(g) == 0 {
		return nil, 0, nil
	}
	l := *g[0].lease
	for _, r := range g[1:] {
		l.Token = max(l.Token, r.lease.Token)
		if r.lease.AcquiredAt.Before(l.AcquiredAt) {
			l.AcquiredAt = r.lease.AcquiredAt
		}
		if r.lease.ExpiresAt.Before(l.ExpiresAt) {
			l.ExpiresAt = r.lease.ExpiresAt
		}
		l.TTLLeft = min(l.TTLLeft, r.lease.TTLLeft)
		l.TookOver = l.TookOver || r.took
	}
	l.TookOver = l.TookOver || g[0].took
	return &l, len(g), g
}

func noQuorum(op string, got, n int, errs []error) error {
	return fmt.Errorf("redlock: %s: no quorum (%d of %d nodes): %w", op, got, n, errors.Join(errs...))
}

// Acquire runs the grant script on every node in parallel with the same lease ID. It succeeds if
// a quorum granted (or renewed the holder's own lease with one ID) and time is left of the TTL;
// otherwise the fresh grants it made are rolled back on every node and the majority's answer
// (the holder, or the resting reason) is returned.
func (s *RedlockStore) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := store.RefuseBeyond("redlock", p); err != nil {
		return nil, err
	}
	start := time.Now()
	replies, errs := s.each(ctx, s.opTimeout(p.TTL), func(ctx context.Context, n *node) (*reply, error) {
		return n.acquire(ctx, p, 0, s.maxSeen.Load())
	})
	elapsed := time.Since(start)
	l, votes, _ := majority(replies, "ok")
	if votes >= s.quorum {
		if v := s.validity(p.TTL, elapsed); v > 0 {
			l.TTLLeft = v
			l.ExpiresAt = time.Now().Add(v)
			s.writeBack(ctx, l.Token)
			if l.ID != p.LeaseID {
				// The holder's existing lease was renewed on a quorum; a node that had lost it
				// (restarted empty) granted p.LeaseID instead: undo that stray grant.
				s.rollbackWhere(p.Key, p.LeaseID, replies, errs, false)
			}
			return l, nil
		}
	}
	s.rollback(p.Key, p.LeaseID, replies, errs)
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if votes >= s.quorum {
		return nil, fmt.Errorf("redlock: acquire of %q took %s of a %s TTL: no validity left", p.Key, elapsed, p.TTL)
	}
	if held, n, _ := majority(replies, "held"); n > 0 {
		for _, r := range replies {
			if r != nil && r.status == "held" && r.lease.ID == held.ID {
				held.TTLLeft = max(held.TTLLeft, r.lease.TTLLeft)
			}
		}
		return nil, heldError(held)
	}
	var rest *reply
	for _, r := range replies {
		if r != nil && r.status == "rest" && (rest == nil || r.wait > rest.wait) {
			rest = r
		}
	}
	if rest != nil {
		return nil, &store.RestingError{Key: p.Key, Reason: rest.reason, Remaining: rest.wait}
	}
	return nil, noQuorum("acquire "+p.Key, votes, len(s.nodes), errs)
}

// writeBack raises every node's counter to tok (best effort). Any later quorum shares a node
// with this grant's quorum, and if that node got the write-back before the later grant, the
// later token is larger: without failures, the tokens of one key grow in real-time order. With
// a failed write-back, a restarted node or a partition they need not; hence no fencing claim.
func (s *RedlockStore) writeBack(ctx context.Context, tok uint64) {
	for {
		cur := s.maxSeen.Load()
		if tok <= cur || s.maxSeen.CompareAndSwap(cur, tok) {
			break
		}
	}
	_, _ = s.each(context.WithoutCancel(ctx), s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		return nil, n.raise(ctx, tok)
	})
}

// rollback deletes the fresh grants of id (not renewals of an existing lease), on every node:
// a node whose reply was lost may have granted.
func (s *RedlockStore) rollback(key, id string, replies []*reply, errs []error) {
	s.rollbackWhere(key, id, replies, errs, true)
}

// rollbackWhere deletes id's fresh grants, and with failed also tries the nodes whose reply was
// lost.
func (s *RedlockStore) rollbackWhere(key, id string, replies []*reply, errs []error, failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.nodeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		r := replies[i]
		if errs[i] != nil {
			if !failed {
				continue
			}
		} else if r == nil || r.status != "ok" || r.renew || r.lease.ID != id {
			continue
		}
		wg.Go(func() { _ = n.rollback(ctx, key, id) })
	}
	wg.Wait()
}

// Renew extends the lease on every node, and puts it back on every node that lost it where the
// key is free (restore). It needs a quorum of renewed and restored nodes again, within the
// validity.
//
// Without the restore, the set of nodes holding a lease kept alive for long would only shrink: a
// node restarted empty answers "not held" to every later renew (a lost vote, nothing more), and
// once a second node restarts empty, however much later, fewer than a quorum hold the lease and
// a contender is granted the key while the holder's context is still live. With it, a restart
// is healed by the next renew (TTL/3 later under keepalive), so only nodes that lose the key
// faster than renewals heal them can make a majority forget it (docs/guarantees.md).
func (s *RedlockStore) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	replies, errs := s.each(ctx, s.opTimeout(p.TTL), func(ctx context.Context, n *node) (*reply, error) {
		return n.renew(ctx, p)
	})
	s.restore(ctx, p, replies, errs)
	elapsed := time.Since(start)
	l, votes, _ := majority(replies, "ok")
	if votes >= s.quorum {
		if v := s.validity(p.TTL, elapsed); v > 0 {
			l.TTLLeft = v
			l.ExpiresAt = time.Now().Add(v)
			return l, nil
		}
		return nil, fmt.Errorf("redlock: renew of %q took %s of a %s TTL: no validity left", p.Key, elapsed, p.TTL)
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	// Nodes that answered for certain that the lease is not theirs: not held and not restorable
	// (or nothing renewed to restore from), held by another lease, or resting.
	notHeld := 0
	for _, r := range replies {
		if r != nil && r.status != "ok" {
			notHeld++
		}
	}
	if notHeld > len(s.nodes)-s.quorum {
		return nil, store.ErrNotHeld
	}
	return nil, noQuorum("renew "+p.Key, votes, len(s.nodes), errs)
}

// restore runs restoreScript on every node that answered the renew with "not held", if at least
// one node renewed the lease (the source of its holder, token and options), and replaces those
// nodes' replies (and errors) with the restore's. A node that failed the renew is left alone: it
// may hold the lease, and it is a lost vote either way.
func (s *RedlockStore) restore(ctx context.Context, p *store.RenewParams, replies []*reply, errs []error) {
	var src *reply
	var lost []int
	for i, r := range replies {
		switch {
		case errs[i] != nil || r == nil:
		case r.status == "ok" && r.lease != nil && r.lease.ID == p.LeaseID:
			if src == nil {
				src = r
			}
		case r.status == "nothld":
			lost = append(lost, i)
		}
	}
	if src == nil || len(lost) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, i := range lost {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, s.opTimeout(p.TTL))
			defer cancel()
			replies[i], errs[i] = s.nodes[i].restore(nctx, src, p.TTL)
		})
	}
	wg.Wait()
}

// Release releases the lease on every node. It is released if any node released it (the
// others had lost or expired it); AlreadyReleased if no node released it and one had.
func (s *RedlockStore) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	replies, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		return n.release(ctx, p)
	})
	var released, already, failed int
	var held int64
	for i, r := range replies {
		switch {
		case errs[i] != nil:
			failed++
		case r.status == "ok":
			released++
			held = max(held, r.n)
		case r.status == "already":
			already++
		}
	}
	switch {
	case released > 0:
		s.hub.Notify(p.Key)
		return &store.ReleaseResult{Held: max(time.Duration(held)*time.Microsecond, time.Microsecond)}, nil
	case already > 0:
		return &store.ReleaseResult{AlreadyReleased: true}, nil
	case s.closed.Load():
		return nil, store.ErrClosed
	case failed >= s.quorum:
		return nil, noQuorum("release "+p.Key, 0, len(s.nodes), errs)
	}
	return nil, store.ErrNotHeld
}

// Get returns the lease that a quorum of nodes hold.
func (s *RedlockStore) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	replies, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		return n.get(ctx, key)
	})
	return s.quorumLease(replies, errs, "get "+key)
}

func (s *RedlockStore) quorumLease(replies []*reply, errs []error, op string) (*store.Lease, error) {
	l, votes, _ := majority(replies, "ok")
	if votes >= s.quorum {
		return l, nil
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed > len(s.nodes)-s.quorum {
		return nil, noQuorum(op, votes, len(s.nodes), errs)
	}
	return nil, store.ErrNotFound
}

// List lists the keys that a quorum of nodes hold, in key order.
func (s *RedlockStore) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	_, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		keys, err := n.scanKeys(ctx, p.Prefix)
		mu.Lock()
		for _, k := range keys {
			seen[k] = true
		}
		mu.Unlock()
		return nil, err
	})
	if err := s.tooManyFailed(errs, "list"); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	keys = sortAfter(keys, p.After)
	return pageOf(ctx, keys, p, func(ctx context.Context, batch []string) ([]*store.Lease, error) {
		per := make([][]*reply, len(s.nodes))
		_, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
			for i, x := range s.nodes {
				if x == n {
					rs, err := n.getMany(ctx, batch)
					per[i] = rs
					return nil, err
				}
			}
			return nil, nil
		})
		if err := s.tooManyFailed(errs, "list"); err != nil {
			return nil, err
		}
		out := make([]*store.Lease, len(batch))
		for k := range batch {
			col := make([]*reply, len(s.nodes))
			for i := range s.nodes {
				if errs[i] == nil && k < len(per[i]) {
					col[i] = per[i][k]
				}
			}
			if l, votes, _ := majority(col, "ok"); votes >= s.quorum {
				out[k] = l
			}
		}
		return out, nil
	})
}

func (s *RedlockStore) tooManyFailed(errs []error, op string) error {
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed > len(s.nodes)-s.quorum {
		if err := s.closed.Check(); err != nil {
			return err
		}
		return noQuorum(op, len(s.nodes)-failed, len(s.nodes), errs)
	}
	return nil
}

// ForceRelease ends the lease on every node that has one and starts its lock-delay there.
func (s *RedlockStore) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	replies, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		return n.forceRelease(ctx, p.Key)
	})
	l, votes, _ := majority(replies, "ok")
	if votes > 0 {
		s.hub.Notify(p.Key)
		return l, nil
	}
	if err := s.tooManyFailed(errs, "force-release "+p.Key); err != nil {
		return nil, err
	}
	return nil, store.ErrNotFound
}

// Subscribe: releases published by any node wake local waiters (a release on N nodes may wake
// up to N of them; wake-ups are hints).
func (s *RedlockStore) Subscribe(key string) (<-chan struct{}, func()) {
	return s.closed.Subscribe(s.hub.Subscribe, key)
}

// Capabilities: no fencing tokens (see RedlockStore), cross-process wake-ups, owners (each node
// checks them, and a restore writes the owner with the lease), no audit.
func (s *RedlockStore) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: false, PushWakeup: true, Owners: true}
}

// Close stops the listeners, wakes every subscriber and closes the clients.
func (s *RedlockStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stopListeners()
		s.hub.NotifyAll()
		s.closeClients()
	})
	return nil
}

func (s *RedlockStore) stopListeners() {
	for _, l := range s.lis {
		l.stop()
	}
}

func (s *RedlockStore) closeClients() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}
