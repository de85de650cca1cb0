package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the name of the fence table Check reads and writes.
const Table = "baton_fences"

// DDL creates the fence table; it is the same for PostgreSQL and SQLite, and safe to run again.
// Migrate runs it; run it yourself with your own migration tool if you prefer.
const DDL = `CREATE TABLE IF NOT EXISTS baton_fences (
	resource text PRIMARY KEY,
	token    bigint NOT NULL CHECK (token > 0)
)`

// checkSQL raises the stored token to $2 unless a greater one is stored, and returns the token
// now stored only if it did. On PostgreSQL the conflicting row stays locked (even when the
// WHERE fails) until the transaction ends, and on SQLite the statement takes the database's
// write lock: either way, transactions checking the same resource run one after another, so
// a transaction whose check passed commits before any later one checks. $1 comes before $2
// in the text, so SQLite (where $N is a named parameter numbered in order of first use) binds
// them as PostgreSQL does.
const checkSQL = `INSERT INTO baton_fences (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE baton_fences.token <= excluded.token
RETURNING token`

const currentSQL = `SELECT token FROM baton_fences WHERE resource = $1`

type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Migrate creates the fence table if it does not exist. db is a *sql.DB, *sql.Conn or *sql.Tx
// (PostgreSQL or SQLite), or a pgx connection, pool or transaction.
func Migrate(ctx context.Context, db any) error {
	var err error
	switch d := db.(type) {
	case sqlExecer:
		_, err = d.ExecContext(ctx, DDL)
	case pgxExecer:
		_, err = d.Exec(ctx, DDL)
	default:
		return &InvalidArgumentError{Field: "db", Rule: fmt.Sprintf("must be a database/sql or pgx handle, not %T", db)}
	}
	if err != nil {
		return fmt.Errorf("fence: create table %s: %w", Table, err)
	}
	return nil
}

// Check records that the holder of token writes to resource, inside tx, the caller's own
// transaction on the resource's database: a *sql.Tx (PostgreSQL or SQLite) or a pgx.Tx. Call
// it before (or with) the writes it protects, and commit only if it returns nil.
//
// It returns nil if no greater token has been seen for resource (equal tokens pass: the same
// holder may write twice), and a *StaleTokenError (errors.Is ErrStaleToken) carrying both
// tokens if one has. On a stale token Check rolls tx back itself, so that nothing written in
// it can commit even if the caller goes on: a later Commit fails (sql.ErrTxDone,
// pgx.ErrTxClosed). Pass the outermost transaction: rolling back a pgx savepoint would undo
// only the writes made since it.
//
// Until tx ends, other transactions checking the same resource wait (PostgreSQL: a row lock;
// SQLite: the database's write lock), so a passing check and the writes after it commit before
// any later holder's check: commit soon after. Under REPEATABLE READ or SERIALIZABLE,
// PostgreSQL may fail the waiting transaction with a serialization error instead; it has
// written nothing, and may retry. An empty or over-long resource, or a token of 0 or above
// 2^63-1, is an *InvalidArgumentError naming the field, and tx is left as it was.
func Check(ctx context.Context, tx any, resource string, token uint64) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	var stored, current int64
	var err error
	switch t := tx.(type) {
	case *sql.Tx:
		if t == nil {
			return &InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
		}
		err = t.QueryRowContext(ctx, checkSQL, resource, int64(token)).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			if err = t.QueryRowContext(ctx, currentSQL, resource).Scan(&current); err == nil {
				_ = t.Rollback()
				return &StaleTokenError{Resource: resource, Token: token, Current: uint64(current)}
			}
		}
	case pgx.Tx:
		err = t.QueryRow(ctx, checkSQL, resource, int64(token)).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			if err = t.QueryRow(ctx, currentSQL, resource).Scan(&current); err == nil {
				_ = t.Rollback(ctx)
				return &StaleTokenError{Resource: resource, Token: token, Current: uint64(current)}
			}
		}
	case nil:
		return &InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
	default:
		return &InvalidArgumentError{Field: "tx", Rule: fmt.Sprintf("must be a *sql.Tx or a pgx.Tx, not %T", tx)}
	}
	if err != nil {
		return fmt.Errorf("fence: check %q: %w", resource, err)
	}
	return nil
}
