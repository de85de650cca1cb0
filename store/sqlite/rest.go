package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// clearRestSQL ends the rest read just before, if the row is still as read (compare-and-set on
// available_at). ?1 key, ?2 now, ?3 actor, ?4 reason, ?5 the available_at read, ?6 principal.
const clearRestSQL = `UPDATE leases SET available_at = ?2, end_actor = ?3, end_reason = ?4, end_principal = ?6
	WHERE key = ?1 AND available_at = ?5 AND available_at > ?2 AND (ended <> 0 OR expires_at <= ?2)`

// ClearRest ends the cooldown or lock-delay of a key that no live lease holds. The audit
// trigger records it (leases_audit_clear_rest).
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	for {
		now := s.now().UnixNano()
		var r row
		err := r.scan(s.stmts.selectRow.QueryRowContext(ctx, p.Key))
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (r.availableAt <= now || (r.ended == 0 && r.expiresAt > now))) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, s.wrap("clear-rest", err)
		}
		res, err := s.db.ExecContext(ctx, clearRestSQL, p.Key, now, p.Actor, p.Reason, r.availableAt, p.Principal)
		if err != nil {
			return nil, s.wrap("clear-rest", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, s.wrap("clear-rest", err)
		} else if n == 0 {
			continue // changed since the read: read again
		}
		s.hub.Notify(p.Key)
		reason := store.ReasonLockDelay
		if r.ended == 1 {
			reason = store.ReasonCooldown
		}
		return &store.Rest{Key: p.Key, Reason: reason, Remaining: time.Duration(r.availableAt - now)}, nil
	}
}
