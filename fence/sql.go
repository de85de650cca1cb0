package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the name of the fence table Check reads and writes.
const Table = "baton_fences"

// DDL creates the fence table; it is the same for PostgreSQL and SQLite, and safe to run again.
// Migrate runs it (and ModeDDL on a table created without the mode columns); run them yourself
// with your own migration tool if you prefer.
//
// token is the greatest token seen in either mode. shared_token is the greatest shared token
// (NULL until a shared check), and exclusive_token the greatest exclusive token when
// shared_token is the greatest of all (otherwise token is): an exclusive check leaves both
// alone, so that it runs unchanged on a table without them.
const DDL = `CREATE TABLE IF NOT EXISTS baton_fences (
	resource        text PRIMARY KEY,
	token           bigint NOT NULL CHECK (token > 0),
	shared_token    bigint,
	exclusive_token bigint
)`

// ModeDDL adds the columns that shared checks need to a fence table created by an earlier DDL,
// one statement each (PostgreSQL and SQLite). Exclusive checks run without them.
var ModeDDL = []string{
	`ALTER TABLE baton_fences ADD COLUMN shared_token bigint`,
	`ALTER TABLE baton_fences ADD COLUMN exclusive_token bigint`,
}

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

// exclusiveMarkSQL is the greatest exclusive token of the fence row baton_fences.
const exclusiveMarkSQL = `CASE WHEN baton_fences.shared_token IS NULL OR baton_fences.token > baton_fences.shared_token
	THEN baton_fences.token ELSE baton_fences.exclusive_token END`

// checkSharedSQL is checkSQL for a shared holder: it raises token (the greatest of either
// mode) and shared_token to $2 unless they are greater, keeps the exclusive mark in
// exclusive_token, and passes only if no greater exclusive token is stored.
const checkSharedSQL = `INSERT INTO baton_fences (resource, token, shared_token, exclusive_token) VALUES ($1, $2, $2, 0)
ON CONFLICT (resource) DO UPDATE SET
	token = CASE WHEN baton_fences.token > excluded.token THEN baton_fences.token ELSE excluded.token END,
	shared_token = CASE WHEN baton_fences.shared_token > excluded.token THEN baton_fences.shared_token ELSE excluded.token END,
	exclusive_token = ` + exclusiveMarkSQL + `
WHERE ` + exclusiveMarkSQL + ` <= excluded.token
RETURNING token`

const currentExclusiveSQL = `SELECT ` + exclusiveMarkSQL + ` FROM baton_fences WHERE resource = $1`

type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

type sqlQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type pgxQueryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// dialectSQL tells PostgreSQL (a boolean) from SQLite (an integer) without an error, which would
// end a PostgreSQL transaction.
const dialectSQL = `SELECT 1 = 1`

// hasModeColumnsSQLite counts the mode columns of the fence table on SQLite. On PostgreSQL
// ModeDDL runs with IF NOT EXISTS instead.
const hasModeColumnsSQLite = `SELECT count(*) FROM pragma_table_info('baton_fences') WHERE name = 'shared_token'`

// Migrate creates the fence table if it does not exist, and adds the columns of shared checks
// (ModeDDL) to a table created without them. db is a *sql.DB, *sql.Conn or *sql.Tx (PostgreSQL
// or SQLite), or a pgx connection, pool or transaction. It is safe to run again.
func Migrate(ctx context.Context, db any) error {
	var exec func(q string) error
	var queryRow func(q string, dest any) error
	switch d := db.(type) {
	case sqlExecer:
		q, ok := db.(sqlQueryer)
		if !ok {
			return &InvalidArgumentError{Field: "db", Rule: fmt.Sprintf("must be a database/sql or pgx handle, not %T", db)}
		}
		exec = func(s string) error { _, err := d.ExecContext(ctx, s); return err }
		queryRow = func(s string, dest any) error { return q.QueryRowContext(ctx, s).Scan(dest) }
	case pgxExecer:
		q, ok := db.(pgxQueryer)
		if !ok {
			return &InvalidArgumentError{Field: "db", Rule: fmt.Sprintf("must be a database/sql or pgx handle, not %T", db)}
		}
		exec = func(s string) error { _, err := d.Exec(ctx, s); return err }
		queryRow = func(s string, dest any) error { return q.QueryRow(ctx, s).Scan(dest) }
	default:
		return &InvalidArgumentError{Field: "db", Rule: fmt.Sprintf("must be a database/sql or pgx handle, not %T", db)}
	}
	if err := exec(DDL); err != nil {
		return fmt.Errorf("fence: create table %s: %w", Table, err)
	}
	var truth any
	if err := queryRow(dialectSQL, &truth); err != nil {
		return fmt.Errorf("fence: tell the database: %w", err)
	}
	if _, postgres := truth.(bool); postgres {
		for _, q := range ModeDDL {
			if err := exec(strings.Replace(q, "ADD COLUMN", "ADD COLUMN IF NOT EXISTS", 1)); err != nil {
				return fmt.Errorf("fence: add the mode columns to %s: %w", Table, err)
			}
		}
		return nil
	}
	var n int
	if err := queryRow(hasModeColumnsSQLite, &n); err != nil {
		return fmt.Errorf("fence: read the columns of %s: %w", Table, err)
	}
	if n == 0 {
		for _, q := range ModeDDL {
			if err := exec(q); err != nil {
				return fmt.Errorf("fence: add the mode columns to %s: %w", Table, err)
			}
		}
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
	return CheckMode(ctx, tx, resource, token, Exclusive)
}

// CheckMode is Check for a holder in mode. An exclusive check is Check. A shared check passes if
// no greater exclusive token has been seen for resource (shared holders' tokens interleave, so a
// greater shared token does not make it stale), raises the greatest token of either mode (which
// a later exclusive check must reach), and its *StaleTokenError's Current is the greatest
// exclusive token. A shared check needs the mode columns (Migrate adds them); an exclusive one
// runs on a table without them. Like exclusive checks, shared checks of one resource wait for
// each other until their transactions end (the row is updated): use SQLStore, or
// fence.Middleware over it, for shared holders that must run side by side.
func CheckMode(ctx context.Context, tx any, resource string, token uint64, mode Mode) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if err := validMode(mode); err != nil {
		return err
	}
	check, current := checkSQL, currentSQL
	if mode == Shared {
		check, current = checkSharedSQL, currentExclusiveSQL
	}
	var stored, cur int64
	var err error
	switch t := tx.(type) {
	case *sql.Tx:
		if t == nil {
			return &InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
		}
		err = t.QueryRowContext(ctx, check, resource, int64(token)).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			if err = t.QueryRowContext(ctx, current, resource).Scan(&cur); err == nil {
				_ = t.Rollback()
				return &StaleTokenError{Resource: resource, Token: token, Current: uint64(cur)}
			}
		}
	case pgx.Tx:
		err = t.QueryRow(ctx, check, resource, int64(token)).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			if err = t.QueryRow(ctx, current, resource).Scan(&cur); err == nil {
				_ = t.Rollback(ctx)
				return &StaleTokenError{Resource: resource, Token: token, Current: uint64(cur)}
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
