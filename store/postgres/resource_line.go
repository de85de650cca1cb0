package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// One resource, one line (migration 0010): a key's leases row is the one record of who holds it
// once the key is a lock key. The first grant of a key inserts the row, and its trigger refuses
// that insert (SQLSTATE BTN01) when the key is already a resource: jobs may be queued on it or
// running, and a claim whose snapshot predates the new row would not see it. markLockKey makes
// such a key a lock key first.

// isFirstGrantOfResource reports whether err is the first-grant trigger's refusal.
func isFirstGrantOfResource(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "BTN01"
}

// markLockKey makes key, a resource never locked, a lock key, in one transaction that:
//  1. inserts the key's leases row, free, unless one exists (a concurrent markLockKey's or
//     claim's): from here to the commit, an acquire or a claim of the key waits for this one;
//  2. locks the resources row (submits to the key wait from here to the commit; a submit that
//     committed before is seen by the next statements) and marks it locked;
//  3. locks the key's unfinished jobs without waiting and marks them gated, so that a claim
//     that locks one of them after the commit, with a snapshot from before, sees the mark on the
//     row it re-reads and takes the gate (claimSQL). A claim in flight holds its job's row: the
//     lock fails at once (55P03) and the transaction is retried, after which that claim has
//     committed and its attempt is seen running;
//  4. if the row is still the free one of step 1, makes it the running attempt's gate, or a rest
//     after a job until the resource cooldown ends (ended 3). Its token is the attempt's or 0;
//     the next lease draws its own under the row lock, above every earlier token.
//
// Taking the new row before the resources row keeps the order in which a first grant takes them
// (its insert, then its trigger's read), so the two cannot wait for each other. The acquire that
// called it is then retried and meets the row.
func (s *Store) markLockKey(ctx context.Context, key string) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for _, q := range s.markLock {
				if _, err := tx.Exec(ctx, q, key); err != nil {
					return err
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" && pgErr.Code != "40P01" || attempt == 100 {
			if err != nil {
				return fmt.Errorf("make %q a lock key: %w", key, err)
			}
			return nil
		}
		// A claim or an end of a job on the key holds its row: it commits within one statement.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * time.Millisecond):
		}
	}
}

// markLockSQL are markLockKey's statements; $1 is the key.
func markLockSQL(schema string) []string {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return []string{
		`INSERT INTO ` + id("leases") + ` (key, lease_id, holder, owner, token, acquired_at, expires_at, ended,
	available_at, cooldown_ms, lock_delay_ms, job_id)
VALUES ($1, '', '', '', 0, now(), now(), 1, now(), 0, 0, 0)
ON CONFLICT (key) DO NOTHING`,
		`INSERT INTO ` + id("resources") + ` AS r (key, locks) VALUES ($1, true)
ON CONFLICT (key) DO UPDATE SET locks = true`,
		`UPDATE ` + id("jobs") + ` SET gated = true WHERE id = ANY (ARRAY(
	SELECT id FROM ` + id("jobs") + ` WHERE resource = $1 AND state IN ` + unfinished + ` FOR UPDATE NOWAIT)) AND gated IS NOT TRUE`,
		`UPDATE ` + id("leases") + ` l SET holder = 'job:' || j.id, owner = j.owner, token = j.token,
	expires_at = j.lease_expires_at, available_at = j.lease_expires_at, ended = 0, job_id = j.id
FROM ` + id("jobs") + ` j
WHERE l.key = $1 AND l.lease_id = '' AND l.job_id = 0 AND l.available_at <= now()
	AND j.resource = $1 AND j.state = 'running' AND j.lease_expires_at > now() AND NOT j.holds`,
		`UPDATE ` + id("leases") + ` l SET available_at = r.cooldown_until, ended = 3
FROM ` + id("resources") + ` r
WHERE l.key = $1 AND l.lease_id = '' AND l.job_id = 0 AND l.available_at <= now()
	AND r.key = $1 AND r.cooldown_until > now()`,
	}
}
