package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// GetResource returns a resource's state and its jobs' summary.
func (s *Store) GetResource(ctx context.Context, key string) (*store.Resource, error) {
	if err := store.ValidateResource(key); err != nil {
		return nil, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, s.jq.resourceGet, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: resource %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.jobErr("get resource", err)
	}
	return r, nil
}

// ListResources lists resources by key.
func (s *Store) ListResources(ctx context.Context, p *store.ResourceListParams) ([]*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	var err error
	if end, ok := store.PrefixEnd(p.Prefix); ok {
		rows, err = s.pool.Query(ctx, s.jq.resourceListBounded, p.Prefix, p.After, p.Limit, end)
	} else {
		rows, err = s.pool.Query(ctx, s.jq.resourceList, p.Prefix, p.After, p.Limit)
	}
	if err != nil {
		return nil, s.jobErr("list resources", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Resource, error) { return scanResource(r) })
	if err != nil {
		return nil, s.jobErr("list resources", err)
	}
	return out, nil
}

// SetResourceState sets a resource's state, optionally only at an expected version.
func (s *Store) SetResourceState(ctx context.Context, p *store.SetResourceStateParams) (*store.Resource, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out store.Resource
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if p.IfVersion != nil {
			var v int64
			err := tx.QueryRow(ctx, s.jq.resourceVersion, p.Key).Scan(&v)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if v != *p.IfVersion {
				return &store.VersionMismatchError{Key: p.Key, Want: *p.IfVersion, Current: v}
			}
		}
		return tx.QueryRow(ctx, s.jq.resourceSet, p.Key, p.State).Scan(&out.Key, &out.State, &out.Version, &out.UpdatedAt)
	})
	if err != nil {
		return nil, s.jobErr("set resource state", err)
	}
	return &out, nil
}

func scanResource(r pgx.Row) (*store.Resource, error) {
	var out store.Resource
	var coolUntil *time.Time
	var coolJob int64
	var leftUs *int64
	err := r.Scan(&out.Key, &out.State, &out.Version, &out.UpdatedAt, &out.RunningJob, &out.Unfinished, &coolUntil, &coolJob, &leftUs)
	if coolUntil != nil && leftUs != nil {
		out.Cooldown = &store.ResourceCooldown{Resource: out.Key, Until: *coolUntil, Left: micros(*leftUs), Job: coolJob}
	}
	return &out, err
}
