package sqlite

import (
	"context"
	"time"

	"github.com/batonhq/baton/store"
)

// ClearResourceCooldown ends a resource's cooldown in one write transaction: the resource's
// head, if the cooldown had postponed its start, becomes claimable now; the audit log (if the
// file is audited) records who and why.
func (s *Store) ClearResourceCooldown(ctx context.Context, p *store.ClearCooldownParams) (*store.ResourceCooldown, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.ResourceCooldown
	err := s.inTx(ctx, "clear resource cooldown", func(x *jobTx) error {
		r, err := x.cooling(p.Resource)
		if err != nil {
			return err
		}
		if r == nil {
			return store.ErrNotFound
		}
		until := time.Unix(0, r.coolUntil)
		out = &store.ResourceCooldown{Resource: r.key, Until: until, Left: until.Sub(x.now), Job: r.coolJob}
		r.coolUntil, r.coolJob = 0, 0
		if err := x.saveResource(r); err != nil {
			return err
		}
		head, err := x.headOf(r.key)
		if err != nil {
			return err
		}
		if head != nil && head.Head && head.ScheduledAt.Equal(until) {
			head.ScheduledAt = x.now
			if head.State == store.JobScheduled {
				head.State = store.JobAvailable
			}
			x.wake[head.Kind] = true
			if err := x.saveJob(head); err != nil {
				return err
			}
		}
		return x.auditCooldownCleared(out, p)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// auditCooldownCleared records the clear in the events table if the file is audited (its audit
// triggers exist: audit is a property of the file, see audit.sql).
func (x *jobTx) auditCooldownCleared(c *store.ResourceCooldown, p *store.ClearCooldownParams) error {
	_, err := x.q.ExecContext(x.ctx, `INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal)
		SELECT ?, ?, ?, '', '', ?, ?, ?, ? WHERE (`+auditedSQL+`)`,
		x.now.UnixNano(), store.EventResourceCooldownCleared, c.Resource, c.Job, p.Actor, p.Reason, p.Principal)
	return err
}
