package postgres

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A request beyond one key runs a dozen statements; one round trip each would cost it several
// times a plain lease. Its statements are sent in batches instead (pgx pipelines a batch: one
// round trip, the statements run one after the other as if sent one by one, and the first that
// fails skips the rest): BEGIN with the first batch (the locks), the reads that depend only on
// the locked rows in the next, and the writes with COMMIT in the last. Nothing is read before
// the locks are taken, and every statement still reads a fresh snapshot taken after them.

// txQuerier is what the statements of a transaction run on: a pgx.Tx, or the connection of a
// pipeTx once its transaction has begun.
type txQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pipeTx is a transaction on one connection of the pool whose statements are sent in batches:
// BEGIN goes with the first, COMMIT with the one that asks for it.
type pipeTx struct {
	conn      *pgxpool.Conn
	begun     bool
	committed bool
}

// nowSetting is the transaction's instant after its locks, kept in the session for the
// statements of the batch that reads it (setNow), whose values Go learns only after the batch.
const nowSetting = `current_setting('baton.now')::timestamptz`

// setNow reads the database's clock and keeps it as nowSetting until the transaction ends.
const setNow = `SELECT set_config('baton.now', clock_timestamp()::text, true)::timestamptz`

// nowOr makes the parameters params of sql, instants, the one setNow kept where they are NULL.
func nowOr(sql string, params ...int) string {
	for _, n := range params {
		re := regexp.MustCompile(`\$` + strconv.Itoa(n) + `\b`)
		sql = re.ReplaceAllLiteralString(sql, "coalesce($"+strconv.Itoa(n)+"::timestamptz, "+nowSetting+")")
	}
	return sql
}

// batch sends the statements queue adds as one round trip (after BEGIN, if the transaction has
// not begun; before COMMIT, if commit) and passes their results, in order, to read. If commit,
// read must fail only with the error of a statement: COMMIT has run when the batch returns.
func (pt *pipeTx) batch(ctx context.Context, queue func(b *pgx.Batch), commit bool, read func(br pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	begin := !pt.begun
	if begin {
		b.Queue("BEGIN")
	}
	queue(b)
	if commit {
		b.Queue("COMMIT")
	}
	br := pt.conn.SendBatch(ctx, b)
	pt.begun = true
	if begin {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	if read != nil {
		if err := read(br); err != nil {
			br.Close()
			return err
		}
	}
	if commit {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if tag.String() != "COMMIT" {
			br.Close()
			return pgx.ErrTxCommitRollback
		}
		pt.committed = true
	}
	return br.Close()
}

// pipeRun runs fn in one transaction of batches, again (up to a few times) if the database broke
// a deadlock by aborting it, as holdTx. If fn returns nil without committing, the transaction
// commits; if it fails, it rolls back.
func (s *Store) pipeRun(ctx context.Context, fn func(pt *pipeTx) error) error {
	return s.pipeRunOn(ctx, nil, fn)
}

// pipeGrant is pipeRun for a grant of key: on a connection the failover guard passed (grantConn).
func (s *Store) pipeGrant(ctx context.Context, key string, fn func(pt *pipeTx) error) error {
	return s.pipeRunOn(ctx, &key, fn)
}

func (s *Store) pipeRunOn(ctx context.Context, grant *string, fn func(pt *pipeTx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.pipeOnce(ctx, grant, fn)
		var pgErr *pgconn.PgError
		if attempt < 5 && errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			continue
		}
		return err
	}
}

func (s *Store) pipeOnce(ctx context.Context, grant *string, fn func(pt *pipeTx) error) error {
	var conn *pgxpool.Conn
	var err error
	if grant != nil {
		conn, err = s.grantConn(ctx, *grant)
	} else {
		conn, err = s.pool.Acquire(ctx)
	}
	if err != nil {
		return err
	}
	// The pool destroys a connection left in a transaction (a ROLLBACK that failed).
	defer conn.Release()
	pt := &pipeTx{conn: conn}
	err = fn(pt)
	if err == nil && pt.begun && !pt.committed {
		err = pt.batch(ctx, func(*pgx.Batch) {}, true, nil)
	}
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	return err
}

// scanCaps reads the limits lockLimits locked.
func scanCaps(rows pgx.Rows, n int) (map[string]int, error) {
	defer rows.Close()
	caps := make(map[string]int, n)
	for rows.Next() {
		var name string
		var c int
		if err := rows.Scan(&name, &c); err != nil {
			return nil, err
		}
		caps[name] = c
	}
	return caps, rows.Err()
}

// scanPlace reads the caller's place from the place statement's rows: the arrival its live
// tickets share, if it has one in each of its n lines.
func scanPlace(rows pgx.Rows, n int) (place, error) {
	defer rows.Close()
	var me place
	found, one := 0, true
	for rows.Next() {
		var at time.Time
		var seq int64
		if err := rows.Scan(&at, &seq); err != nil {
			return place{}, err
		}
		if found > 0 && (!at.Equal(me.at) || seq != me.seq) {
			one = false // not one place: start again at the back
		}
		me, found = place{at: at, seq: seq, has: true}, found+1
	}
	if err := rows.Err(); err != nil {
		return place{}, err
	}
	if !one || found != n {
		return place{}, nil
	}
	return me, nil
}

// scanWoken reads the payloads the wake statement NOTIFYs.
func scanWoken(rows pgx.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		var ignored *string
		if err := rows.Scan(&p, &ignored); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
