package sqlite

import (
	"context"
	"database/sql"
)

const leaseColumns = `key, lease_id, holder, token, acquired_at, expires_at, ended, available_at, metadata`

// statements are prepared once per Store.
type statements struct {
	selectRow, bumpToken, upsert, extend, renew, release, releasedBy, forceRelease, get, list *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.selectRow, `SELECT ` + leaseColumns + ` FROM leases WHERE key = ?`},
		{&st.bumpToken, `UPDATE counters SET value = value + 1 WHERE name = 'token' RETURNING value`},
		{&st.upsert, `INSERT INTO leases (key, lease_id, holder, token, acquired_at, expires_at, ended, available_at, cooldown_ns, lock_delay_ns, metadata)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?9, ?10)
			ON CONFLICT (key) DO UPDATE SET lease_id = ?2, holder = ?3, token = ?4, acquired_at = ?5,
				expires_at = ?6, ended = 0, available_at = ?7, cooldown_ns = ?8, lock_delay_ns = ?9, metadata = ?10`},
		{&st.extend, `UPDATE leases SET expires_at = ?2, available_at = ?2 + lock_delay_ns WHERE key = ?1`},
		{&st.renew, `UPDATE leases SET expires_at = ?3 + ?4, available_at = ?3 + ?4 + lock_delay_ns
			WHERE key = ?1 AND lease_id = ?2 AND ended = 0 AND expires_at > ?3
			RETURNING ` + leaseColumns},
		{&st.release, `UPDATE leases SET ended = 1, available_at = ?3 + cooldown_ns
			WHERE key = ?1 AND lease_id = ?2 AND ended = 0 AND expires_at > ?3`},
		{&st.releasedBy, `SELECT count(*) FROM leases WHERE key = ?1 AND lease_id = ?2 AND ended = 1`},
		{&st.forceRelease, `UPDATE leases SET ended = 2, expires_at = min(expires_at, ?2), available_at = ?2 + lock_delay_ns
			WHERE key = ?1 AND ended = 0 AND expires_at > ?2
			RETURNING ` + leaseColumns},
		{&st.get, `SELECT ` + leaseColumns + ` FROM leases WHERE key = ?1 AND ended = 0 AND expires_at > ?2`},
		{&st.list, `SELECT ` + leaseColumns + ` FROM leases
			WHERE key > ?1 AND substr(key, 1, length(?2)) = ?2 AND (?3 = '' OR holder = ?3)
				AND ended = 0 AND expires_at > ?4
			ORDER BY key LIMIT ?5`},
	} {
		stmt, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return err
		}
		*p.dst = stmt
	}
	return nil
}

func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.selectRow, st.bumpToken, st.upsert, st.extend, st.renew, st.release,
		st.releasedBy, st.forceRelease, st.get, st.list} {
		if s != nil {
			s.Close()
		}
	}
}
