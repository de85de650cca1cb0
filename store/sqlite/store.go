// Package sqlite is Baton's embedded lease store: one SQLite file in WAL mode with durable
// commits, or ":memory:" for tests.
//
// Within one process, waiters are woken by an in-process signal on release. Other processes that
// share the file are not signalled; their waiters find the key free at their next poll.
// Expiry is decided by the clock of the process that runs the statement; processes sharing a
// file share the machine's clock.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// Config tunes a Store. The zero value is the default.
type Config struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (default; an acknowledged write
	// survives a power loss) or "NORMAL" (survives a crash of the process, not of the machine).
	Synchronous string
	// BusyTimeout bounds how long a write waits for another process's write lock (default 5s).
	BusyTimeout time.Duration
	// Now is the store's clock (default time.Now). Tests may inject one.
	Now func() time.Time
	// Audit records every grant, release, expiry takeover and force-release in the events
	// table (see Store.Events). It is a property of the file: once a store opens with it, every
	// process's changes are recorded. It costs one row insert per grant and per release.
	Audit bool
}

// Store is a store.Store on SQLite.
type Store struct {
	db *sql.DB
	// holdStmts are holds.go's statements, prepared once (holds_sql.go).
	holdStmts map[string]*sql.Stmt
	now       func() time.Time
	hub       *notify.Hub
	claims    store.ClaimClock // when workers last asked for each kind
	closed    store.Closed
	stmts     statements
	audit     bool
	renews    renewBatcher
	// trees is this process's copy of the trees' prefixes (trees.go).
	trees store.TreeCache
	// rated is this process's copy of the rated key prefixes (rates.go).
	rated store.RatePrefixCache
}

var _ store.Store = (*Store)(nil)

// DSN returns the driver data source name Open uses for path, with WAL, the synchronous level,
// the busy timeout and immediate write transactions. Benchmarks use it to give a baseline the
// same connection settings.
func DSN(path string, cfg Config) string {
	cfg = cfg.withDefaults()
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
	q.Add("_pragma", "foreign_keys(on)")
	if path != ":memory:" {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// defaultNow is the store's clock when Config.Now is unset: time.Now. Only a build with the
// chaosclock tag (clock_chaos.go, the fault harness's) changes it.
var defaultNow = time.Now

func (c Config) withDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = "FULL"
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = defaultNow
	}
	return c
}

// Open opens (creating if needed) the database at path and applies pending migrations.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if path == "" {
		return nil, &store.InvalidArgumentError{Field: "path", Rule: "must not be empty"}
	}
	if cfg.Synchronous != "" && cfg.Synchronous != "FULL" && cfg.Synchronous != "NORMAL" {
		return nil, &store.InvalidArgumentError{Field: "synchronous", Rule: `must be "FULL" or "NORMAL"`}
	}
	if err := checkDir(path); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	db, err := sql.Open("sqlite", DSN(path, cfg))
	if err != nil {
		return nil, err
	}
	// One connection: SQLite has one writer anyway, and a single connection serialises this
	// process's writers without busy-waiting (and keeps a :memory: database alive).
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, now: cfg.Now, hub: notify.NewHub(), audit: cfg.Audit}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Audit {
		if _, err := db.ExecContext(ctx, auditSQL); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: enable audit: %w", err)
		}
	}
	if err := s.loadTrees(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.stmts.prepare(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.prepareHolds(ctx); err != nil {
		s.stmts.close()
		db.Close()
		return nil, err
	}
	return s, nil
}

// Capabilities: fencing tokens yes; push wake-up only within this process; owners yes.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: false, Audit: s.audit, Owners: true, OneResource: true, Line: true, Limits: true}
}

// Subscribe wakes the subscriber when this process releases key.
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.hub.Subscribe(key) }

// Close closes the database. Leases stay in the file.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.hub.NotifyAll()
	s.stmts.close()
	return s.db.Close()
}

// DB returns the underlying database, for tests and benchmarks.
func (s *Store) DB() *sql.DB { return s.db }

// wrap maps driver errors after Close to store.ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("sqlite: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// Parallelism is 1: the store has one connection.
func (s *Store) Parallelism() int { return 1 }
