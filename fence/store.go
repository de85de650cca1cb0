package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// MemoryStore is a Store for a resource served by one process. It forgets everything when the
// process ends, and keeps one small entry per resource it has seen. The zero value is ready.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]*memEntry
}

type memEntry struct {
	turn  chan struct{} // a token in the channel is the resource being held
	token uint64        // guarded by turn
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Enter implements Store. A holder waits (or gives up with ctx) while another holds the resource.
func (s *MemoryStore) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	if err := validate(resource, token); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]*memEntry)
	}
	e := s.m[resource]
	if e == nil {
		e = &memEntry{turn: make(chan struct{}, 1)}
		s.m[resource] = e
	}
	s.mu.Unlock()
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if token < e.token {
		cur := e.token
		<-e.turn
		return nil, &StaleTokenError{Resource: resource, Token: token, Current: cur}
	}
	e.token = token
	var once sync.Once
	return func() { once.Do(func() { <-e.turn }) }, nil
}

// SQLStore is a Store in a fence table (see Migrate) shared by several processes: PostgreSQL
// (through a database/sql driver such as pgx's stdlib; for a pgxpool.Pool use
// stdlib.OpenDBFromPool) or SQLite.
//
// Enter raises the stored token in a transaction of its own, committed before the handler runs
// (so a write that happened is never followed by a lower token's), then holds the fence row
// locked in a second transaction until release. On SQLite that second transaction holds the
// whole database's write lock, so every other writer of that database waits for the handler:
// keep handlers short, or keep the fence table in a database of its own.
type SQLStore struct {
	db *sql.DB
}

var _ Store = (*SQLStore)(nil)

// NewSQLStore returns a Store on db, whose fence table Migrate has created.
func NewSQLStore(db *sql.DB) *SQLStore { return &SQLStore{db: db} }

// holdSQL locks the fence row (PostgreSQL: the row; SQLite: the database) and reads its token.
const holdSQL = `UPDATE baton_fences SET token = token WHERE resource = $1 RETURNING token`

// Enter implements Store.
func (s *SQLStore) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	if err := validate(resource, token); err != nil {
		return nil, err
	}
	raise, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("fence: begin: %w", err)
	}
	if err := Check(ctx, raise, resource, token); err != nil {
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
	var cur int64
	if err := hold.QueryRowContext(ctx, holdSQL, resource).Scan(&cur); err != nil {
		_ = hold.Rollback()
		if errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("the fence row vanished after it was written")
		}
		return nil, fmt.Errorf("fence: hold %q: %w", resource, err)
	}
	if uint64(cur) > token {
		_ = hold.Rollback()
		return nil, &StaleTokenError{Resource: resource, Token: token, Current: uint64(cur)}
	}
	var once sync.Once
	return func() { once.Do(func() { _ = hold.Rollback() }) }, nil
}
