package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton/store"
)

const kindColumns = `name, policy, max_attempts, timeout_ns, cooldown_ns, from_states, running_state,
	success_state, failure_state, resource_cooldown_ns, mode, limits, debounce_ns`

func scanKind(sc interface{ Scan(...any) error }) (*store.Kind, error) {
	var k store.Kind
	var policy, from, limits string
	var timeout, cooldown, resourceCooldown, debounce int64
	if err := sc.Scan(&k.Name, &policy, &k.MaxAttempts, &timeout, &cooldown, &from, &k.RunningState,
		&k.SuccessState, &k.FailureState, &resourceCooldown, &k.Mode, &limits, &debounce); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(from), &k.FromStates); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(limits), &k.Limits); err != nil {
		return nil, err
	}
	if len(k.Limits) == 0 {
		k.Limits = nil
	}
	if len(k.FromStates) == 0 {
		k.FromStates = nil
	}
	k.Policy, k.Timeout, k.Cooldown = store.BusyPolicy(policy), time.Duration(timeout), time.Duration(cooldown)
	k.ResourceCooldown, k.Debounce = time.Duration(resourceCooldown), time.Duration(debounce)
	return &k, nil
}

// kind reads a kind definition (once per transaction). An unknown kind is an invalid argument.
func (x *jobTx) kind(name string) (*store.Kind, error) {
	if k, ok := x.kinds[name]; ok {
		return k, nil
	}
	k, err := scanKind(x.q.QueryRowContext(x.ctx, `SELECT `+kindColumns+` FROM job_kinds WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &store.InvalidArgumentError{Field: "kind", Rule: fmt.Sprintf("must name a registered kind (%q is not; register it first)", name)}
	}
	if err != nil {
		return nil, err
	}
	x.kinds[name] = k
	return k, nil
}

// RegisterKinds creates or replaces kind definitions, all or none. A name listed twice takes its
// last definition.
func (s *Store) RegisterKinds(ctx context.Context, kinds []store.Kind) error {
	defs := make([]store.Kind, len(kinds))
	for i := range kinds {
		defs[i] = kinds[i]
		defs[i].FromStates = append([]string(nil), kinds[i].FromStates...)
		defs[i].Limits = append([]string(nil), kinds[i].Limits...)
		if err := defs[i].Validate(); err != nil {
			return err
		}
	}
	return s.inTx(ctx, "register kinds", func(x *jobTx) error {
		for _, k := range defs {
			from := k.FromStates
			if from == nil {
				from = []string{}
			}
			fromJSON, err := json.Marshal(from)
			if err != nil {
				return err
			}
			limits := k.Limits
			if limits == nil {
				limits = []string{}
			}
			limitsJSON, err := json.Marshal(limits)
			if err != nil {
				return err
			}
			if _, err := x.q.ExecContext(x.ctx, `INSERT INTO job_kinds (`+kindColumns+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (name) DO UPDATE SET policy = excluded.policy, max_attempts = excluded.max_attempts,
					timeout_ns = excluded.timeout_ns, cooldown_ns = excluded.cooldown_ns,
					from_states = excluded.from_states, running_state = excluded.running_state,
					success_state = excluded.success_state, failure_state = excluded.failure_state,
					resource_cooldown_ns = excluded.resource_cooldown_ns, mode = excluded.mode, limits = excluded.limits,
					debounce_ns = excluded.debounce_ns`,
				k.Name, string(k.Policy), k.MaxAttempts, int64(k.Timeout), int64(k.Cooldown), string(fromJSON),
				k.RunningState, k.SuccessState, k.FailureState, int64(k.ResourceCooldown), k.Mode, string(limitsJSON),
				int64(k.Debounce)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Kinds lists the registered kinds, by name.
func (s *Store) Kinds(ctx context.Context) ([]store.Kind, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+kindColumns+` FROM job_kinds ORDER BY name`)
	if err != nil {
		return nil, s.wrap("kinds", err)
	}
	defer rows.Close()
	var out []store.Kind
	for rows.Next() {
		k, err := scanKind(rows)
		if err != nil {
			return nil, s.wrap("kinds", err)
		}
		out = append(out, *k)
	}
	return out, s.wrap("kinds", rows.Err())
}
