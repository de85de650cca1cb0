package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Store remembers the greatest fencing token seen per resource, for Middleware.
type Store interface {
	// Enter admits the holder of token to resource, or refuses it with a *StaleTokenError if a
	// greater token has been seen. Once admitted, the holder has the resource to itself until it
	// calls release (exactly once): no other holder of the resource is admitted meanwhile, so
	// writes made before release cannot land after those of a later holder. Bad input is an
	// *InvalidArgumentError; other errors mean the store could not tell.
	Enter(ctx context.Context, resource string, token uint64) (release func(), err error)
}

// MemoryStore is a ModeStore for a resource served by one process. It forgets everything when
// the process ends, and keeps one small entry per resource it has seen. The zero value is ready.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]*memEntry
}

// memEntry is one resource's fence, guarded by MemoryStore.mu.
type memEntry struct {
	token     uint64 // the greatest token seen in either mode
	exclusive uint64 // the greatest exclusive token seen
	writer    bool   // an exclusive holder is admitted
	readers   int    // shared holders admitted
	writers   int    // exclusive holders waiting: later shared ones wait behind them
	waiting   int    // holders waiting, of either mode
	// changed is closed (and replaced) whenever a holder leaves or a waiting writer gives up.
	changed chan struct{}
}

var _ ModeStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Enter implements Store: EnterMode in Exclusive mode.
func (s *MemoryStore) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	return s.EnterMode(ctx, resource, token, Exclusive)
}

// EnterMode implements ModeStore. A holder waits (or gives up with ctx) while the resource is
// held in a mode it cannot join.
func (s *MemoryStore) EnterMode(ctx context.Context, resource string, token uint64, mode Mode) (func(), error) {
	if err := validate(resource, token); err != nil {
		return nil, err
	}
	if err := validMode(mode); err != nil {
		return nil, err
	}
	shared := mode == Shared
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]*memEntry)
	}
	e := s.m[resource]
	if e == nil {
		e = &memEntry{changed: make(chan struct{})}
		s.m[resource] = e
	}
	if !shared {
		e.writers++
	}
	for {
		if shared && !e.writer && e.writers == 0 || !shared && !e.writer && e.readers == 0 {
			break
		}
		ch := e.changed
		e.waiting++
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			s.mu.Lock()
			e.waiting--
			if !shared {
				e.writers--
				e.wake()
			}
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
		e.waiting--
	}
	if !shared {
		e.writers--
	}
	defer s.mu.Unlock()
	if shared {
		if token < e.exclusive {
			return nil, &StaleTokenError{Resource: resource, Token: token, Current: e.exclusive}
		}
		e.token = max(e.token, token)
		e.readers++
	} else {
		if token < e.token {
			e.wake() // shared holders waiting behind this writer may go
			return nil, &StaleTokenError{Resource: resource, Token: token, Current: e.token}
		}
		e.token, e.exclusive = token, token
		e.writer = true
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if shared {
				e.readers--
			} else {
				e.writer = false
			}
			e.wake()
		})
	}, nil
}

// wake tells every waiter of e to look again; the caller holds MemoryStore.mu.
func (e *memEntry) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// SQLStore is a ModeStore in a fence table (see Migrate) shared by several processes:
// PostgreSQL (through a database/sql driver such as pgx's stdlib; for a pgxpool.Pool use
// stdlib.OpenDBFromPool) or SQLite.
//
// Enter raises the stored token in a transaction of its own, committed before the handler runs
// (so a write that happened is never followed by a lower token's), then holds the fence row
// locked in a second transaction until release. On PostgreSQL an exclusive holder locks the row
// FOR UPDATE and a shared one FOR KEY SHARE, which admits other shared holders and the shared
// raise (an update of no key column) but no exclusive holder. On SQLite that second transaction
// holds the whole database's write lock, so shared holders run one at a time too, and every
// other writer of that database waits for the handler: keep handlers short, or keep the fence
// table in a database of its own.
type SQLStore struct {
	db     *sql.DB
	sqlite bool
}

var _ ModeStore = (*SQLStore)(nil)

// NewSQLStore returns a Store on db, whose fence table Migrate has created.
func NewSQLStore(db *sql.DB) *SQLStore {
	return &SQLStore{db: db, sqlite: strings.Contains(strings.ToLower(fmt.Sprintf("%T", db.Driver())), "sqlite")}
}

// The statements that hold the fence row until release and read its marks: the token of either
// mode, and the greatest exclusive token (sqlHold). SQLite has no row locks: an update takes the
// database's write lock.
const (
	holdExclusivePG     = `SELECT token, 0 FROM baton_fences WHERE resource = $1 FOR UPDATE`
	holdSharedPG        = `SELECT token, ` + exclusiveMarkSQL + ` FROM baton_fences WHERE resource = $1 FOR KEY SHARE`
	holdExclusiveSQLite = `UPDATE baton_fences SET token = token WHERE resource = $1 RETURNING token, 0`
	holdSharedSQLite    = `UPDATE baton_fences SET token = token WHERE resource = $1 RETURNING token, ` + exclusiveMarkSQL
)

// Enter implements Store: EnterMode in Exclusive mode.
func (s *SQLStore) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	return s.EnterMode(ctx, resource, token, Exclusive)
}

// EnterMode implements ModeStore.
func (s *SQLStore) EnterMode(ctx context.Context, resource string, token uint64, mode Mode) (func(), error) {
	if err := validate(resource, token); err != nil {
		return nil, err
	}
	if err := validMode(mode); err != nil {
		return nil, err
	}
	raise, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("fence: begin: %w", err)
	}
	if err := CheckMode(ctx, raise, resource, token, mode); err != nil {
		_ = raise.Rollback()
		return nil, err
	}
	if err := raise.Commit(); err != nil {
		return nil, fmt.Errorf("fence: commit %q: %w", resource, err)
	}
	hold, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("fence: begin: %w", err)
	}
	var either, exclusive int64
	if err := hold.QueryRowContext(ctx, s.holdSQL(mode), resource).Scan(&either, &exclusive); err != nil {
		_ = hold.Rollback()
		if errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("the fence row vanished after it was written")
		}
		return nil, fmt.Errorf("fence: hold %q: %w", resource, err)
	}
	// A greater token raised between the two transactions: an exclusive holder is stale beside
	// any, a shared one beside an exclusive one.
	cur := either
	if mode == Shared {
		cur = exclusive
	}
	if uint64(cur) > token {
		_ = hold.Rollback()
		return nil, &StaleTokenError{Resource: resource, Token: token, Current: uint64(cur)}
	}
	var once sync.Once
	return func() { once.Do(func() { _ = hold.Rollback() }) }, nil
}

func (s *SQLStore) holdSQL(mode Mode) string {
	switch {
	case s.sqlite && mode == Shared:
		return holdSharedSQLite
	case s.sqlite:
		return holdExclusiveSQLite
	case mode == Shared:
		return holdSharedPG
	}
	return holdExclusivePG
}
