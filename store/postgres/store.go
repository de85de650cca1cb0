// Package postgres is Baton's PostgreSQL lease store.
//
// All lease state lives in one table, <schema>.leases, with one row per key that is never deleted
// by the store: a released lease stays as a tombstone so that the next grant of its key draws its
// fencing token under that row's lock (see Acquire). Every expiry decision uses the database clock,
// now(). Waiters are woken across processes by LISTEN/NOTIFY on a channel named after the schema.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/internal/combine"
	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// DefaultSchema is the schema used when Config.Schema is empty.
const DefaultSchema = "baton"

// Config configures a Store.
type Config struct {
	// Schema holds the store's tables: 1..63 bytes of [a-z0-9_], not starting with a digit or
	// "pg_". DefaultSchema if empty. Created on open unless SkipMigrate is set.
	Schema string
	// Audit records every grant, release, expiry takeover and force-release in the schema's
	// events table (see Store.Events). It is a property of the schema: once a store opens with
	// it, every writer is recorded. It costs one row insert per grant and per release.
	Audit bool
	// SkipMigrate leaves the schema alone on open, for deployments that run Migrate separately
	// with a more privileged role. Open then fails unless the schema is at the latest version.
	SkipMigrate bool
	// MaxConns is how many connections Open's pool keeps for statements; the store holds one
	// more for LISTEN. Zero means DefaultMaxConns(), unless the DSN sets pgx's pool_max_conns
	// (the whole pool, LISTEN included, as before). At most MaxMaxConns. New uses the caller's
	// pool as it is.
	MaxConns int
	// FailoverQuarantine is how long the store grants nothing after it finds its database
	// promoted from a replica (a new timeline after an earlier one; failover.go): every lease
	// granted before the failover, some of them lost with the old primary, must have expired.
	// Zero means store.MaxTTL, the longest lease there can be. Shorten it knowingly: to the
	// longest TTL (plus lock-delay) your holders use.
	FailoverQuarantine time.Duration
}

// minPoolConns is the smallest pool Open builds: one connection is held by LISTEN for the life of
// the store, and lease operations need the rest.
const minPoolConns = 4

// MaxMaxConns bounds Config.MaxConns.
const MaxMaxConns = 1000

// DefaultMaxConns is the default of Config.MaxConns: max(8, 2 × GOMAXPROCS). Lease statements
// are short and mostly wait for the database's commit (its fsync), not for this process's CPU,
// so the pool is larger than pgx's default (max(4, NumCPU)): concurrent commits share the
// database's WAL flushes. Past a few dozen connections per server the database's own contention
// grows; raise it with several servers in mind (each holds its own pool).
func DefaultMaxConns() int { return max(8, 2*runtime.GOMAXPROCS(0)) }

var errNilPool = &store.InvalidArgumentError{Field: "pool", Rule: "must not be nil"}

// Store is a store.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	channel  string   // NOTIFY channel, sent as a bind parameter to pg_notify
	markLock []string // markLockKey's statements
	q        queries
	lineSQL  string           // lineQuery
	leaveSQL string           // leaveQuery
	claims   store.ClaimClock // when workers last asked this process for each kind
	// resourceLineSQL is resourceLineQuery.
	resourceLineSQL string
	lastClaimSQL    string // lastClaimQuery
	clearRest       string // clearRestQuery
	// clearCooldown is clearCooldownSQL.
	clearCooldown string
	jq            jobQueries
	hq            holdQueries // holds.go, limits.go
	tq            treeQueries // trees.go
	trees         store.TreeCache
	rated         store.RatePrefixCache // rates_scoped.go
	sq            submitQueries
	hub           *notify.Hub
	lis           *listener
	renews        *combine.Combiner[*store.RenewParams, *store.Lease]
	guard         *failoverGuard // failover.go
	unregister    func()         // New's: the guard leaves AfterConnect's registry

	audit     bool
	closed    store.Closed
	closeOnce sync.Once
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Treer = (*Store)(nil)
)

// Open connects to dsn with a pool of its own (cfg.MaxConns connections for statements, by
// default DefaultMaxConns(), plus one for LISTEN; or pool_max_conns from the DSN; at least four
// in all; plan_cache_mode=force_generic_plan unless the DSN sets it, which New's callers may set
// on their pool too), migrates the schema unless cfg.SkipMigrate, and starts listening for
// wake-ups. Close closes the pool.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	schema, err := checkSchema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConns < 0 || cfg.MaxConns > MaxMaxConns {
		return nil, &store.InvalidArgumentError{Field: "max_conns", Rule: fmt.Sprintf("must be between 1 and %d (0: the default)", MaxMaxConns)}
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	switch {
	case cfg.MaxConns > 0:
		pc.MaxConns = int32(cfg.MaxConns) + 1 // the statements' connections, and LISTEN's
	case !strings.Contains(dsn, "pool_max_conns"):
		pc.MaxConns = int32(DefaultMaxConns()) + 1
	}
	if pc.MaxConns < minPoolConns {
		pc.MaxConns = minPoolConns
	}
	if _, set := pc.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// Every statement of the store is written so that its generic plan is the custom one
		// (index lookups whatever the parameters); planning was half the cost of a job claim.
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	if _, set := pc.ConnConfig.RuntimeParams["jit"]; !set {
		// The store's statements are short lookups by index. A generic plan's cost estimate
		// can still pass jit_above_cost (a claim over a large jobs table), and PostgreSQL then
		// compiles the plan with LLVM on every execution: about a second of CPU per claim.
		pc.ConnConfig.RuntimeParams["jit"] = "off"
	}
	guard := newGuard(schema, cfg.FailoverQuarantine)
	// Every connection raises the token sequence to its timeline's epoch before its first
	// statement, and reports a failover (failover.go).
	pc.AfterConnect = guard.prepare
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	cfg.Schema = schema
	s, err := newStore(ctx, pool, cfg, true, guard)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New builds a Store on the caller's pool, which it does not close. The pool must allow at least
// two connections: the store holds one for LISTEN until Close. Open's pool sets
// plan_cache_mode=force_generic_plan and jit=off on its connections; a caller's pool should too
// (ConnConfig.RuntimeParams), or a claim over a large jobs table may be compiled by JIT each time.
// For tokens that never go back across a failover to a replica, the pool should also run
// AfterConnect(cfg.Schema) on each new connection (pgxpool.Config.AfterConnect), as Open's does.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	schema, err := checkSchema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errNilPool
	}
	if pool.Config().MaxConns < 2 {
		return nil, &store.InvalidArgumentError{Field: "pool",
			Rule: "must allow at least 2 connections (one is held for LISTEN)"}
	}
	cfg.Schema = schema
	guard := newGuard(schema, cfg.FailoverQuarantine)
	unregister := registerGuard(guard) // the caller's pool reports through AfterConnect
	s, err := newStore(ctx, pool, cfg, false, guard)
	if err != nil {
		unregister()
		return nil, err
	}
	s.unregister = unregister
	return s, nil
}

func newStore(ctx context.Context, pool *pgxpool.Pool, cfg Config, ownsPool bool, guard *failoverGuard) (*Store, error) {
	if cfg.SkipMigrate {
		v, err := schemaVersion(ctx, pool, cfg.Schema)
		if err != nil {
			return nil, err
		}
		if v < latestVersion() {
			return nil, fmt.Errorf("postgres: schema %q is at version %d, want %d: run Migrate", cfg.Schema, v, latestVersion())
		}
	} else if err := migrate(ctx, pool, cfg.Schema); err != nil {
		return nil, err
	}
	if cfg.Audit {
		if err := enableAudit(ctx, pool, cfg.Schema); err != nil {
			return nil, fmt.Errorf("postgres: enable audit: %w", err)
		}
	}
	s := &Store{
		pool:            pool,
		ownsPool:        ownsPool,
		schema:          cfg.Schema,
		channel:         channelName(cfg.Schema),
		q:               buildQueries(cfg.Schema),
		lineSQL:         lineQuery(cfg.Schema),
		leaveSQL:        leaveQuery(cfg.Schema),
		resourceLineSQL: resourceLineQuery(cfg.Schema),
		lastClaimSQL:    lastClaimQuery(cfg.Schema),
		clearRest:       clearRestQuery(cfg.Schema),
		markLock:        markLockSQL(cfg.Schema),
		clearCooldown:   buildClearCooldownSQL(cfg.Schema, channelName(cfg.Schema)),
		hq:              buildHoldQueries(cfg.Schema, channelName(cfg.Schema)),
		jq:              buildJobQueries(cfg.Schema, channelName(cfg.Schema)),
		sq:              buildSubmitQueries(cfg.Schema, channelName(cfg.Schema)),
		tq:              buildTreeQueries(cfg.Schema),
		hub:             notify.NewHub(),
		audit:           cfg.Audit,
		guard:           guard,
	}
	if err := s.prepareOne(ctx); err != nil {
		return nil, fmt.Errorf("postgres: read the timeline: %w", err)
	}
	if err := s.loadTrees(ctx); err != nil {
		return nil, fmt.Errorf("postgres: read the trees: %w", err)
	}
	s.renews = newRenewCombiner(s)
	lis, err := startListener(ctx, pool, s.channel, s.hub)
	if err != nil {
		return nil, err
	}
	s.lis = lis
	return s, nil
}

// Close stops the LISTEN goroutine and waits for it, wakes every subscriber (their next Acquire
// sees ErrClosed), and closes the pool if Open created it; that waits for operations in flight.
// Leases stay in the database. Closing again returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.lis.stop()
		s.hub.NotifyAll()
		if s.unregister != nil {
			s.unregister()
		}
		if s.ownsPool {
			s.pool.Close()
		}
	})
	return nil
}

// Capabilities reports fencing tokens (one database sequence, drawn under the row lock of the
// grant), cross-process wake-ups (LISTEN/NOTIFY), owners, the line, and limits, shared holds
// and leases on several keys (holds.go).
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: true, Audit: s.audit, Owners: true, OneResource: true, Line: true, Limits: true}
}

// Subscribe registers interest in key. Wake-ups come from releases in this process at once and
// from any process through NOTIFY; after a lost LISTEN connection every subscriber is woken once.
// After Close the channel fires at once so that a waiter retries and sees ErrClosed.
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.subscribe(key) }

// subscribe is the hub's subscription to keys (lease keys, or job kinds' wake-up keys), or a
// fired wake-up once the store is closed.
func (s *Store) subscribe(keys ...string) (<-chan struct{}, func()) {
	return s.closed.Subscribe(s.hub.Subscribe, keys...)
}

// checkSchema applies the default and the naming rule. The rule keeps names that need no quoting
// and fit PostgreSQL's 63-byte identifiers, so they are never truncated into another schema.
func checkSchema(schema string) (string, error) {
	if schema == "" {
		return DefaultSchema, nil
	}
	bad := func(rule string) error { return &store.InvalidArgumentError{Field: "schema", Rule: rule} }
	if len(schema) > 63 {
		return "", bad(fmt.Sprintf("must be at most 63 bytes (got %d)", len(schema)))
	}
	for i := 0; i < len(schema); i++ {
		c := schema[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return "", bad("must match [a-z_][a-z0-9_]*")
		}
	}
	if len(schema) >= 3 && schema[:3] == "pg_" {
		return "", bad(`must not start with "pg_" (reserved by PostgreSQL)`)
	}
	return schema, nil
}

// channelName is the NOTIFY channel of a schema, so stores in different schemas of one database do
// not wake each other. Channel names share the 63-byte identifier limit; long schema names are
// shortened with a hash to stay distinct.
func channelName(schema string) string {
	const prefix = "baton_"
	if len(prefix)+len(schema) <= 63 {
		return prefix + schema
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("%s%s_%016x", prefix, schema[:63-len(prefix)-17], h.Sum64())
}

// fail turns a database error into the store's error: ErrClosed once the store is closed (the
// pool refuses work then), otherwise the error wrapped with the operation.
func (s *Store) fail(op, key string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s %q: %w", op, key, store.ErrClosed)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// Callers map ErrNoRows themselves; reaching here is a bug, not a store answer.
		return fmt.Errorf("postgres: %s %q: unexpected empty result", op, key)
	}
	return fmt.Errorf("postgres: %s %q: %w", op, key, err)
}

// Pool returns the connection pool the store uses (one of its connections is held by LISTEN).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Parallelism is the pool's connections for statements.
func (s *Store) Parallelism() int { return int(s.pool.Config().MaxConns) }
