package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/batonhq/baton/store"
)

// SubmitJobSQLTx is SubmitJobTx for a database/sql transaction on pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx"), on the database and schema this store
// uses: the job exists, and wakes workers, only if that transaction commits. Other drivers
// (lib/pq) are not supported: they cannot pass the array parameters the submit statements use.
func (s *Store) SubmitJobSQLTx(ctx context.Context, tx *sql.Tx, p *store.SubmitParams) (*store.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, &store.InvalidArgumentError{Field: "tx", Rule: "must not be nil"}
	}
	res, err := s.submit(ctx, sqlTxQuerier{tx: tx, types: pgtype.NewMap()}, p)
	if err != nil {
		return nil, s.jobErr("submit job", err)
	}
	return res, nil
}

// sqlTxQuerier runs submit's statements in a database/sql transaction. pgx's stdlib driver
// passes every parameter to pgx as it is (arrays included); results come back as database/sql
// values, and the array columns, which it returns as text, are parsed with pgx's type map.
type sqlTxQuerier struct {
	tx    *sql.Tx
	types *pgtype.Map
}

func (q sqlTxQuerier) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	_, err := q.tx.ExecContext(ctx, query, args...)
	return pgconn.CommandTag{}, err
}

func (q sqlTxQuerier) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return sqlRow{row: q.tx.QueryRowContext(ctx, query, args...), types: q.types}
}

// sqlRow is a pgx.Row over a *sql.Row: sql.ErrNoRows becomes pgx.ErrNoRows, which submit checks.
type sqlRow struct {
	row   *sql.Row
	types *pgtype.Map
}

func (r sqlRow) Scan(dest ...any) error {
	for i, d := range dest {
		if a, ok := d.(*[]string); ok {
			dest[i] = textArray{dest: a, types: r.types}
		}
	}
	err := r.row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}

// textArray scans a text[] column that the stdlib driver returned in its text form.
type textArray struct {
	dest  *[]string
	types *pgtype.Map
}

func (a textArray) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*a.dest = nil
		return nil
	case string:
		return a.types.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, []byte(v), a.dest)
	case []byte:
		return a.types.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, v, a.dest)
	}
	return fmt.Errorf("text[] column: unexpected %T from the driver", src)
}
