package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// resourceRow is a resources row as a job transaction reads and changes it.
type resourceRow struct {
	key, state string
	version    int64
	updatedAt  int64
	cooldowns  map[string]int64 // kind → Unix ns before which no job of that kind starts
	// coolUntil: Unix ns until which the resource is cooling down (0: not); coolJob started it.
	coolUntil, coolJob int64
}

// resource reads a resource (once per transaction); store.ErrNotFound if it has no row.
func (x *jobTx) resource(key string) (*resourceRow, error) {
	if r, ok := x.res[key]; ok {
		return r, nil
	}
	r := &resourceRow{key: key}
	var cooldowns string
	err := x.q.QueryRowContext(x.ctx, `SELECT state, version, updated_at, cooldowns, cooldown_until, cooldown_job
		FROM resources WHERE key = ?`, key).
		Scan(&r.state, &r.version, &r.updatedAt, &cooldowns, &r.coolUntil, &r.coolJob)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(cooldowns), &r.cooldowns); err != nil {
		return nil, err
	}
	if r.cooldowns == nil {
		r.cooldowns = map[string]int64{}
	}
	x.res[key] = r
	return r, nil
}

// ensureResource creates the resource's row if it has none, and reads it.
func (x *jobTx) ensureResource(key string) (*resourceRow, error) {
	if r, ok := x.res[key]; ok {
		return r, nil // read in this transaction, so it exists
	}
	if _, err := x.q.ExecContext(x.ctx, `INSERT INTO resources (key, updated_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
		key, x.now.UnixNano()); err != nil {
		return nil, err
	}
	return x.resource(key)
}

// setResourceState sets the state and bumps the version.
func (x *jobTx) setResourceState(r *resourceRow, state string) error {
	r.state, r.version, r.updatedAt = state, r.version+1, x.now.UnixNano()
	return x.saveResource(r)
}

// saveResource writes the row back, dropping cooldowns that have ended.
func (x *jobTx) saveResource(r *resourceRow) error {
	for k, until := range r.cooldowns {
		if until <= x.now.UnixNano() {
			delete(r.cooldowns, k)
		}
	}
	if r.coolUntil <= x.now.UnixNano() {
		r.coolUntil, r.coolJob = 0, 0
	}
	cooldowns, err := json.Marshal(r.cooldowns)
	if err != nil {
		return err
	}
	_, err = x.q.ExecContext(x.ctx, `UPDATE resources SET state = ?, version = ?, updated_at = ?, cooldowns = ?,
		cooldown_until = ?, cooldown_job = ? WHERE key = ?`,
		r.state, r.version, r.updatedAt, string(cooldowns), r.coolUntil, r.coolJob, r.key)
	return err
}

// resourceSelect reads resources with their running job, unfinished count and cooldown; now is
// the parameter that holds the store's now (Unix ns).
func resourceSelect(now string) string {
	return `SELECT key, state, version, updated_at,
		coalesce((SELECT min(id) FROM jobs WHERE resource = r.key AND state = 'running'), 0),
		(SELECT count(*) FROM jobs WHERE resource = r.key AND state IN ` + sqlUnfinished + `),
		iif(cooldown_until > ` + now + `, cooldown_until, 0), cooldown_job, ` + now + `
	FROM resources AS r`
}

// resourceListSQL is ListResources' statement for one shape of keyRange; ?3 is the limit, ?4 now.
func resourceListSQL(shape int) string {
	return resourceSelect("?4") + ` WHERE ` + keyRangeSQL(shape) + ` ORDER BY key LIMIT ?3`
}

func scanResource(sc interface{ Scan(...any) error }) (*store.Resource, error) {
	var r store.Resource
	var updated, coolUntil, coolJob, now int64
	if err := sc.Scan(&r.Key, &r.State, &r.Version, &updated, &r.RunningJob, &r.Unfinished, &coolUntil, &coolJob, &now); err != nil {
		return nil, err
	}
	r.UpdatedAt = time.Unix(0, updated)
	if coolUntil > 0 {
		r.Cooldown = &store.ResourceCooldown{Resource: r.Key, Until: time.Unix(0, coolUntil),
			Left: time.Duration(coolUntil - now), Job: coolJob}
	}
	return &r, nil
}

func getResource(ctx context.Context, q querier, key string, now time.Time) (*store.Resource, error) {
	r, err := scanResource(q.QueryRowContext(ctx, resourceSelect("?2")+` WHERE key = ?1`, key, now.UnixNano()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return r, err
}

// GetResource returns a resource, or store.ErrNotFound if no job or state was ever recorded.
func (s *Store) GetResource(ctx context.Context, key string) (*store.Resource, error) {
	if err := store.ValidateResource(key); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	r, err := getResource(ctx, s.db, key, s.now())
	if err != nil {
		return nil, s.wrapJob("get resource", err)
	}
	return r, nil
}

// ListResources lists resources by key, after p.After, whose key starts with p.Prefix: one range
// of the primary key.
func (s *Store) ListResources(ctx context.Context, p *store.ResourceListParams) ([]*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	r := newKeyRange(p.After, p.Prefix)
	rows, err := s.db.QueryContext(ctx, resourceListSQL(r.shape()), r.lower, r.bound, p.Limit, s.now().UnixNano())
	if err != nil {
		return nil, s.wrap("list resources", err)
	}
	defer rows.Close()
	var out []*store.Resource
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return nil, s.wrap("list resources", err)
		}
		out = append(out, r)
	}
	return out, s.wrap("list resources", rows.Err())
}

// SetResourceState sets a resource's state, creating the resource if needed and bumping its
// version; with p.IfVersion, only if the version matches (a resource never recorded is at 0).
func (s *Store) SetResourceState(ctx context.Context, p *store.SetResourceStateParams) (*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.Resource
	err := s.inTx(ctx, "set resource state", func(x *jobTx) error {
		r, err := x.resource(p.Key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if p.IfVersion != nil && *p.IfVersion != 0 {
				return &store.VersionMismatchError{Key: p.Key, Want: *p.IfVersion, Current: 0}
			}
			if r, err = x.ensureResource(p.Key); err != nil {
				return err
			}
		case err != nil:
			return err
		case p.IfVersion != nil && *p.IfVersion != r.version:
			return &store.VersionMismatchError{Key: p.Key, Want: *p.IfVersion, Current: r.version}
		}
		if err := x.setResourceState(r, p.State); err != nil {
			return err
		}
		out, err = getResource(x.ctx, x.q, p.Key, x.now)
		return err
	})
	return out, err
}
