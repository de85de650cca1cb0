package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// Limits (store.Limiter): a limit is a row of limits; its units are holds of mode 'unit' on its
// line key (store.LimitLine). A grant of units locks the limits' rows, so a change of capacity or a
// deletion waits for grants in flight, and they for it.

var _ store.Limiter = (*Store)(nil)

// SetLimit creates a limit or changes its capacity; a lowered capacity evicts nobody.
func (s *Store) SetLimit(ctx context.Context, p *store.SetLimitParams) (*store.Limit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var l *store.Limit
	var woken []string
	err := s.holdTx(ctx, func(tx pgx.Tx) error {
		l, woken = nil, nil
		var rm int
		var rw int64
		if p.Rate != nil {
			rm, rw = p.Rate.Max, p.Rate.Window.Milliseconds()
		}
		if _, err := tx.Exec(ctx, s.hq.setLimit, p.Name, p.Capacity, rm, rw); err != nil {
			return err
		}
		ls, err := s.readLimits(ctx, tx, &store.LimitsParams{Name: p.Name, Limit: 1})
		if err != nil {
			return err
		}
		if len(ls) == 1 {
			l = ls[0]
		}
		// A raised capacity may let waiters go.
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		woken, err = s.wakeLines(ctx, tx, []string{store.LimitLine(p.Name)}, now, false)
		return err
	})
	if err != nil {
		return nil, s.holdErr("set limit", p.Name, err)
	}
	s.wakePayloads(woken)
	return l, nil
}

// DeleteLimit deletes a limit that no live lease holds, and its line.
func (s *Store) DeleteLimit(ctx context.Context, p *store.DeleteLimitParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.closed.Check(); err != nil {
		return err
	}
	err := s.holdTx(ctx, func(tx pgx.Tx) error {
		var capacity int
		err := tx.QueryRow(ctx, s.hq.lockLimit, p.Name).Scan(&capacity)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		var inUse int
		if err := tx.QueryRow(ctx, s.hq.limitInUse, store.LimitLine(p.Name)).Scan(&inUse); err != nil {
			return err
		}
		if inUse > 0 {
			return &store.LimitInUseError{Name: p.Name, InUse: inUse}
		}
		if _, err := tx.Exec(ctx, s.hq.deleteLimit, p.Name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.jq.scoped.forget, store.LimitRateScope(p.Name)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.hq.dropLine, store.LimitLine(p.Name))
		return err
	})
	return s.holdErr("delete limit", p.Name, err)
}

// Limits lists limits with their use, holders and waiters, read in one repeatable-read
// transaction.
func (s *Store) Limits(ctx context.Context, p *store.LimitsParams) ([]*store.Limit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var out []*store.Limit
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		out, err = s.readLimits(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, s.fail("limits", p.Name, err)
	}
	return out, nil
}

func (s *Store) readLimits(ctx context.Context, tx pgx.Tx, p *store.LimitsParams) ([]*store.Limit, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, s.hq.readLimits, p.Name, p.After, now, p.Limit)
	if err != nil {
		return nil, err
	}
	var out []*store.Limit
	for rows.Next() {
		l := &store.Limit{}
		var rm int
		var rw int64
		if err := rows.Scan(&l.Name, &l.Capacity, &l.UpdatedAt, &rm, &rw, &l.Waiting, &l.InUse); err != nil {
			rows.Close()
			return nil, err
		}
		if rm > 0 {
			l.Rate = &store.Rate{Max: rm, Window: time.Duration(rw) * time.Millisecond}
		}
		out = append(out, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, l := range out {
		hs, err := tx.Query(ctx, s.hq.limitHolders, store.LimitLine(l.Name), now, store.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for hs.Next() {
			h := &store.Lease{}
			var token int64
			var slot int32
			if err := hs.Scan(&h.Key, &h.ID, &h.Holder, &h.Owner, &token, &h.AcquiredAt, &h.ExpiresAt, &slot); err != nil {
				hs.Close()
				return nil, err
			}
			h.Token, h.TTLLeft = uint64(token), h.ExpiresAt.Sub(now)
			h.Limits, h.Slots = []string{l.Name}, map[string]int{l.Name: int(slot)}
			l.Holders = append(l.Holders, h)
		}
		hs.Close()
		if err := hs.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
