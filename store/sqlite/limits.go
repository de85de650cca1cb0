package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// Limits (store.Limiter): a limit is a row of limits; its units are holds of mode 'unit' on its
// line key (store.LimitLine).

// SetLimit creates a limit or changes its capacity; a lowered capacity evicts nobody.
func (s *Store) SetLimit(ctx context.Context, p *store.SetLimitParams) (*store.Limit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var l *store.Limit
	err := s.holdTx(ctx, "set limit", func(tx *sql.Tx, now int64) error {
		var rm, rw int64
		if p.Rate != nil {
			rm, rw = int64(p.Rate.Max), int64(p.Rate.Window)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO limits (name, capacity, updated_at, rate_max, rate_window_ns) VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (name) DO UPDATE SET capacity = excluded.capacity, updated_at = excluded.updated_at,
				rate_max = excluded.rate_max, rate_window_ns = excluded.rate_window_ns`,
			p.Name, p.Capacity, now, rm, rw)
		if err != nil {
			return err
		}
		ls, err := s.readLimits(ctx, tx, &store.LimitsParams{Name: p.Name, Limit: 1}, now)
		if err == nil && len(ls) == 1 {
			l = ls[0]
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// A raised capacity may let waiters go.
	s.wakeFront(ctx, store.LimitLine(p.Name))
	return l, nil
}

// DeleteLimit deletes a limit that no live lease holds.
func (s *Store) DeleteLimit(ctx context.Context, p *store.DeleteLimitParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.holdTx(ctx, "delete limit", func(tx *sql.Tx, now int64) error {
		var inUse int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM holds WHERE key = ?1 AND ended = 0 AND expires_at > ?2`,
			store.LimitLine(p.Name), now).Scan(&inUse); err != nil {
			return err
		}
		if inUse > 0 {
			return &store.LimitInUseError{Name: p.Name, InUse: inUse}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM limits WHERE name = ?1`, p.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM rate_grants WHERE scope = ?1`, store.LimitRateScope(p.Name)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM tickets WHERE key = ?1`, store.LimitLine(p.Name))
		return err
	})
}

// Limits lists limits with their use, holders and waiters, read in one transaction.
func (s *Store) Limits(ctx context.Context, p *store.LimitsParams) ([]*store.Limit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("limits", err)
	}
	defer func() { _ = tx.Rollback() }()
	ls, err := s.readLimits(ctx, tx, p, s.now().UnixNano())
	return ls, s.wrap("limits", err)
}

func (s *Store) readLimits(ctx context.Context, tx *sql.Tx, p *store.LimitsParams, now int64) ([]*store.Limit, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, capacity, updated_at, rate_max, rate_window_ns,
			(SELECT count(*) FROM tickets t WHERE t.key = char(30) || name AND t.expires_at > ?3)
		FROM limits WHERE (?1 = '' OR name = ?1) AND name > ?2 ORDER BY name LIMIT ?4`, p.Name, p.After, now, p.Limit)
	if err != nil {
		return nil, err
	}
	var out []*store.Limit
	for rows.Next() {
		l := &store.Limit{}
		var updated, rw int64
		var rm int
		if err := rows.Scan(&l.Name, &l.Capacity, &updated, &rm, &rw, &l.Waiting); err != nil {
			rows.Close()
			return nil, err
		}
		if rm > 0 {
			l.Rate = &store.Rate{Max: rm, Window: time.Duration(rw)}
		}
		l.UpdatedAt = time.Unix(0, updated)
		out = append(out, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, l := range out {
		hs, err := tx.QueryContext(ctx, `SELECT lease_key, lease_id, holder, owner, token, acquired_at, expires_at, coalesce(slot, 0) FROM holds
			WHERE key = ?1 AND ended = 0 AND expires_at > ?2 ORDER BY token LIMIT ?3`, store.LimitLine(l.Name), now, store.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for hs.Next() {
			h := &store.Lease{}
			var token, acquired, expires int64
			var slot int
			if err := hs.Scan(&h.Key, &h.ID, &h.Holder, &h.Owner, &token, &acquired, &expires, &slot); err != nil {
				hs.Close()
				return nil, err
			}
			h.Token, h.AcquiredAt, h.ExpiresAt, h.TTLLeft = uint64(token), time.Unix(0, acquired), time.Unix(0, expires), time.Duration(expires-now)
			h.Limits, h.Slots = []string{l.Name}, map[string]int{l.Name: slot}
			l.Holders = append(l.Holders, h)
		}
		hs.Close()
		if err := hs.Err(); err != nil {
			return nil, err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM holds WHERE key = ?1 AND ended = 0 AND expires_at > ?2`,
			store.LimitLine(l.Name), now).Scan(&l.InUse); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var (
	_ store.Limiter = (*Store)(nil)
	_               = errors.New
)
