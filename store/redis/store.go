// Package redis is Baton's Redis lease store: a single Redis server (Open), or Redlock over
// several independent servers (OpenRedlock).
//
// Every lease operation is one Lua script, so one round trip and one atomic step on the server
// (see scripts.go for the key layout). Expiry is Redis's own PX expiry, on the server's clock.
// Fencing tokens come from one counter key INCRed inside the grant script. A server restart
// without persistence forgets that counter: a Store remembers the highest token it has seen and
// refuses to grant below it (ErrTokensReset) instead of handing out tokens that go backwards;
// see docs/guarantees.md for what that does and does not cover.
//
// Requirements: Redis 5 or later (scripts call TIME before writing, which needs effects
// replication), a standalone server or a primary; not Redis Cluster, because each script touches
// several keys of one lock and the store-wide token counter.
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// DefaultKeyPrefix is the prefix of every key the store writes when Config.KeyPrefix is empty.
const DefaultKeyPrefix = "baton:"

// DefaultShadowRetention is how long the record of a key's last lease outlives the lease by
// default.
const DefaultShadowRetention = time.Hour

// ErrTokensReset is returned by Acquire when the server's token counter is lower than a token
// this Store has already seen, or when the server behind the client was replaced by one that may
// have lost counter increments (see Config.TrustServerChange): typically a restart without
// persistence, or a failover to a replica that had not received the last writes. Granting would
// hand out fencing tokens that go backwards, so the store refuses; the way back is an operator's:
// raise the counter (Config.TokenFloor, or SET <prefix>token N) above every token ever issued,
// and reopen the stores that refused.
var ErrTokensReset = errors.New("baton: redis token counter went backwards (server data lost); refusing to grant")

// Config configures a single-node Store. Exactly one of URL, Options and Addr is used, in that
// order of preference.
type Config struct {
	// URL is a redis:// or rediss:// (TLS) URL, parsed by go-redis's ParseURL.
	URL string
	// Options are go-redis client options, used as given (a copy).
	Options *goredis.Options
	// Addr is host:port of the server.
	Addr string
	// KeyPrefix prefixes every key (DefaultKeyPrefix if empty). Stores sharing a prefix on a
	// server share their leases.
	KeyPrefix string
	// ShadowRetention is how long the record of a key's last lease (see scripts.go) outlives
	// the lease and its lock-delay, or its cooldown after a release: a takeover later than that
	// is not reported as TookOver, and a second release of a lease ID later than that returns
	// ErrNotHeld instead of AlreadyReleased.
	// DefaultShadowRetention if zero.
	ShadowRetention time.Duration
	// TokenFloor, if set, raises the server's token counter to at least this value at Open.
	// It is the way back from ErrTokensReset: set it above every token ever issued.
	TokenFloor uint64
	// TrustServerChange keeps granting after the server behind the client changes in a way
	// that may have lost token increments: its run_id changed (a restart or a failover) and it
	// is not known to persist every write (appendonly yes with appendfsync always), or its
	// replication history changed other than by a restart (master_replid; a promoted replica,
	// or a server resynced from another, even if it persists every write). By default such a
	// change, seen on a new connection, makes every later grant of this Store fail with
	// ErrTokensReset, because the counter may have lost increments that another process already
	// handed out; reopen the store (with TokenFloor if needed) after checking.
	TrustServerChange bool
	// Logger receives the warning that Open logs when the server does not persist every write
	// (see Persistence); slog.Default() if nil.
	Logger *slog.Logger
}

// Persistence is what the server said at Open about its persistence settings (CONFIG GET).
type Persistence struct {
	AppendOnly  string // appendonly: "yes" or "no"
	AppendFsync string // appendfsync: "always", "everysec" or "no"
	Save        string // save: the RDB snapshot rules ("" if none)
	// Err is set if the settings could not be read (CONFIG renamed, disabled or not permitted
	// by the user's ACL); the server then counts as not durable.
	Err error
}

// Durable reports whether every acknowledged write survives a crash of the server (appendonly
// yes and appendfsync always), which fencing tokens need across restarts: otherwise a restart
// can forget the token counter, and a store opened after it hands out tokens that repeat ones
// already issued.
func (p Persistence) Durable() bool {
	return p.Err == nil && p.AppendOnly == "yes" && p.AppendFsync == "always"
}

// String names the settings, for messages.
func (p Persistence) String() string {
	if p.Err != nil {
		return fmt.Sprintf("persistence settings unknown (CONFIG GET failed: %v)", p.Err)
	}
	return fmt.Sprintf("appendonly=%s appendfsync=%s save=%q", p.AppendOnly, p.AppendFsync, p.Save)
}

// readPersistence asks the server for its persistence settings.
func readPersistence(ctx context.Context, rdb *goredis.Client) Persistence {
	var p Persistence
	app, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		p.Err = err
		return p
	}
	save, err := rdb.ConfigGet(ctx, "save").Result()
	if err != nil {
		p.Err = err
		return p
	}
	p.AppendOnly, p.AppendFsync, p.Save = app["appendonly"], app["appendfsync"], save["save"]
	if p.AppendOnly == "" || p.AppendFsync == "" {
		p.Err = errors.New("the server did not report appendonly and appendfsync")
	}
	return p
}

func (c Config) options() (*goredis.Options, error) {
	switch {
	case c.URL != "":
		o, err := goredis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("redis: parse URL: %w", err)
		}
		return o, nil
	case c.Options != nil:
		o := *c.Options
		return &o, nil
	case c.Addr != "":
		return &goredis.Options{Addr: c.Addr}, nil
	}
	return nil, &store.InvalidArgumentError{Field: "addr", Rule: "one of URL, Options or Addr must be set"}
}

func prefixOr(p string) string {
	if p == "" {
		return DefaultKeyPrefix
	}
	return p
}

func retentionOr(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultShadowRetention
	}
	return d
}

// Store is a store.Store on one Redis server. It is safe for concurrent use.
type Store struct {
	store.NoAudit // Events lists nothing: no audit log

	rdb *goredis.Client
	n   *node
	hub *notify.Hub
	lis *listener
	// maxSeen is the highest token this Store has seen the server issue; a grant is refused if
	// the counter is below it.
	maxSeen   atomic.Uint64
	server    serverWatch
	persist   Persistence
	closed    store.Closed
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects, pings, applies cfg.TokenFloor, reads the token counter (the first floor of
// ErrTokensReset) and starts the Pub/Sub listener. Close closes the client.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	s := &Store{hub: notify.NewHub()}
	s.NoAudit = store.NewNoAudit(&s.closed)
	if !cfg.TrustServerChange {
		prev := opts.OnConnect
		opts.OnConnect = func(ctx context.Context, cn *goredis.Conn) error {
			if prev != nil {
				if err := prev(ctx, cn); err != nil {
					return err
				}
			}
			s.server.check(ctx, cn)
			return nil
		}
	}
	rdb := goredis.NewClient(opts)
	s.rdb = rdb
	s.n = newNode(rdb, prefixOr(cfg.KeyPrefix), retentionOr(cfg.ShadowRetention))
	if err := s.open(ctx, cfg.TokenFloor); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	s.persist = readPersistence(ctx, rdb)
	if !s.persist.Durable() {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		msg := "redis server does not persist every write: after a restart it may forget leases and the token counter, and stores opened after the restart hand out fencing tokens that repeat earlier ones; run it with appendonly yes and appendfsync always (docs/guarantees.md)"
		if s.persist.Err != nil {
			msg = "could not check the redis server's persistence (CONFIG GET failed): fencing tokens survive a restart only with appendonly yes and appendfsync always; if it does not persist every write, stores opened after a restart hand out fencing tokens that repeat earlier ones (docs/guarantees.md)"
			log.Warn(msg, "addr", opts.Addr, "err", s.persist.Err)
		} else {
			log.Warn(msg, "addr", opts.Addr, "appendonly", s.persist.AppendOnly, "appendfsync", s.persist.AppendFsync, "save", s.persist.Save)
		}
	}
	return s, nil
}

// Persistence returns the server's persistence settings as read at Open.
func (s *Store) Persistence() Persistence { return s.persist }

func (s *Store) open(ctx context.Context, floor uint64) error {
	counter, err := floorScript.Run(ctx, s.rdb, []string{s.n.tokenKey()}, floor).Int64()
	if err != nil {
		return fmt.Errorf("redis: open %s: %w", s.rdb.Options().Addr, err)
	}
	s.maxSeen.Store(uint64(counter))
	if s.lis, err = startListener(ctx, s.rdb, s.n, s.hub, true); err != nil {
		return fmt.Errorf("redis: subscribe: %w", err)
	}
	return nil
}

func (s *Store) observe(tok uint64) {
	for {
		cur := s.maxSeen.Load()
		if tok <= cur || s.maxSeen.CompareAndSwap(cur, tok) {
			return
		}
	}
}

// Acquire runs the grant script: one round trip.
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := store.RefuseBeyond("redis", p); err != nil {
		return nil, err
	}
	if err := s.server.err(); err != nil {
		return nil, err
	}
	r, err := s.n.acquire(ctx, p, s.maxSeen.Load(), 0)
	if err != nil {
		return nil, s.wrap(err)
	}
	if err := s.server.err(); err != nil && r.status == "ok" && !r.renew {
		// The script ran on a connection to a server that replaced the one this store knew
		// (OnConnect noticed while dialing it): undo the grant, whose token may be stale.
		_ = s.n.rollback(context.WithoutCancel(ctx), p.Key, p.LeaseID)
		return nil, err
	}
	switch r.status {
	case "ok":
		s.observe(r.lease.Token)
		r.lease.TookOver = r.took
		return r.lease, nil
	case "held":
		s.observe(r.lease.Token)
		return nil, heldError(r.lease)
	case "rest":
		return nil, &store.RestingError{Key: p.Key, Reason: r.reason, Remaining: r.wait}
	case "reset":
		return nil, fmt.Errorf("%w: counter %d, this store has seen token %d", ErrTokensReset, r.n, s.maxSeen.Load())
	}
	return nil, fmt.Errorf("redis: unexpected acquire reply %q", r.status)
}

func heldError(l *store.Lease) error {
	return &store.LockHeldError{Key: l.Key, Holder: l.Holder, Token: l.Token, ExpiresAt: l.ExpiresAt, RetryAfter: l.TTLLeft}
}

// Renew extends the lease by p.TTL from the server's now.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := s.n.renew(ctx, p)
	if err != nil {
		return nil, s.wrap(err)
	}
	if r.status != "ok" {
		return nil, store.ErrNotHeld
	}
	return r.lease, nil
}

// Release ends the lease, starts its cooldown and, if a waiting Acquire marked the lease,
// publishes the key on the released channel.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := s.n.release(ctx, p)
	if err != nil {
		return nil, s.wrap(err)
	}
	switch r.status {
	case "ok":
		s.hub.Notify(p.Key)
		return &store.ReleaseResult{Held: max(time.Duration(r.n)*time.Microsecond, time.Microsecond)}, nil
	case "already":
		return &store.ReleaseResult{AlreadyReleased: true}, nil
	}
	return nil, store.ErrNotHeld
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	r, err := s.n.get(ctx, key)
	if err != nil {
		return nil, s.wrap(err)
	}
	if r.status != "ok" {
		return nil, store.ErrNotFound
	}
	return r.lease, nil
}

// List scans the lease keys with SCAN (so it costs O(keys under the prefix) per page), sorts
// them and fetches the page's leases in one pipeline.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	keys, err := s.n.scanKeys(ctx, p.Prefix)
	if err != nil {
		return nil, s.wrap(err)
	}
	keys = sortAfter(keys, p.After)
	return pageOf(ctx, keys, p, func(ctx context.Context, batch []string) ([]*store.Lease, error) {
		rs, err := s.n.getMany(ctx, batch)
		if err != nil {
			return nil, s.wrap(err)
		}
		out := make([]*store.Lease, len(rs))
		for i, r := range rs {
			if r.status == "ok" {
				out[i] = r.lease
			}
		}
		return out, nil
	})
}

func sortAfter(keys []string, after string) []string {
	sort.Strings(keys)
	i := sort.SearchStrings(keys, after)
	for i < len(keys) && keys[i] <= after {
		i++
	}
	return keys[i:]
}

// pageOf fetches sorted keys in batches and keeps live leases that match the holder filter until
// the page is full.
func pageOf(ctx context.Context, keys []string, p *store.ListParams,
	fetch func(context.Context, []string) ([]*store.Lease, error)) ([]*store.Lease, error) {
	var out []*store.Lease
	for len(keys) > 0 && len(out) < p.Limit {
		batch := keys[:min(len(keys), p.Limit)]
		keys = keys[len(batch):]
		leases, err := fetch(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, l := range leases {
			if l != nil && (p.Holder == "" || l.Holder == p.Holder) && len(out) < p.Limit {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// ForceRelease ends the live lease on the key and starts its lock-delay.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := s.n.forceRelease(ctx, p.Key)
	if err != nil {
		return nil, s.wrap(err)
	}
	if r.status != "ok" {
		return nil, store.ErrNotFound
	}
	s.hub.Notify(p.Key)
	return r.lease, nil
}

// Subscribe registers interest in key; wake-ups come from releases in this process and, through
// Pub/Sub, in any process (and from expiry events if the server publishes them).
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) {
	return s.closed.Subscribe(s.hub.Subscribe, key)
}

// Capabilities: fencing tokens (one INCR counter inside the grant script; see ErrTokensReset for
// restarts without persistence), cross-process wake-ups (Pub/Sub), owners (kept in the lease's
// record and checked by the scripts), no audit log.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: true, Owners: true}
}

// Close stops the listener, wakes every subscriber and closes the client. Leases stay in Redis.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.lis.stop()
		s.hub.NotifyAll()
		_ = s.rdb.Close()
	})
	return nil
}

func (s *Store) wrap(err error) error {
	if s.closed.Load() || errors.Is(err, goredis.ErrClosed) {
		return store.ErrClosed
	}
	return fmt.Errorf("redis: %w", err)
}

// serverWatch notices, on every new connection, that the server behind the client is not the
// one this store first knew, in a way that may have lost token increments:
//   - its replication history changed (master_replid) other than by a restart of a server that
//     persists every write: in particular a promoted replica of the server this store knew
//     (its master_replid2 is that server's replication ID), whose data came by asynchronous
//     replication and may lack the last grants, even if the replica itself persists every
//     write;
//   - or its run_id changed (a restart or another server) and it does not persist every write.
//
// A restart of a server with appendonly yes and appendfsync always gets a new run_id and a new
// master_replid but no master_replid2 (all zeros): trusted.
type serverWatch struct {
	mu     sync.Mutex
	runID  string
	replID string // master_replid of the server this store knows ("" if not reported)
	reason string // set once the change is seen; sticky
}

// noReplID is master_replid2 of a server whose replication history began at its start.
const noReplID = "0000000000000000000000000000000000000000"

func (w *serverWatch) check(ctx context.Context, cn *goredis.Conn) {
	var srv, repl *goredis.StringCmd
	// Two sections in one round trip; INFO with several sections needs Redis 7.
	if _, err := cn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		srv, repl = p.Info(ctx, "server"), p.Info(ctx, "replication")
		return nil
	}); err != nil {
		return
	}
	id := infoField(srv.Val(), "run_id")
	if id == "" {
		return
	}
	replID, replID2 := infoField(repl.Val(), "master_replid"), infoField(repl.Val(), "master_replid2")
	w.mu.Lock()
	first, firstRepl, known := w.runID, w.replID, w.runID != ""
	if !known {
		w.runID, w.replID = id, replID
	}
	w.mu.Unlock()
	if !known || (first == id && firstRepl == replID) {
		return
	}
	var reason string
	historyChanged := firstRepl != "" && replID != firstRepl
	switch {
	case historyChanged && replID2 == firstRepl:
		reason = fmt.Sprintf("server run_id %s is a promoted replica of the server this store knew (its master_replid2 is that server's replication ID %s): its data came by asynchronous replication and may lack the last grants", id, firstRepl)
	case historyChanged && (first == id || (replID2 != "" && replID2 != noReplID)):
		reason = fmt.Sprintf("server replication ID changed from %s to %s (run_id %s, master_replid2 %s): its data came from another server, by replication that may have missed the last grants", firstRepl, replID, id, replID2)
	case first != id:
		durable := false
		if v, err := cn.ConfigGet(ctx, "append*").Result(); err == nil {
			durable = v["appendonly"] == "yes" && v["appendfsync"] == "always"
		}
		if !durable {
			reason = fmt.Sprintf("server run_id changed from %s to %s and it does not persist every write (appendonly yes, appendfsync always)", first, id)
		}
	}
	// The new identity and the refusal are recorded together: a connection dialed meanwhile
	// either still compares with the old identity (and reaches the same verdict) or sees both.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runID, w.replID = id, replID
	if reason != "" && w.reason == "" {
		w.reason = reason
	}
}

func (w *serverWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason == "" {
		return nil
	}
	return fmt.Errorf("%w: %s; reopen the store once the counter is known to be above every token issued", ErrTokensReset, w.reason)
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
