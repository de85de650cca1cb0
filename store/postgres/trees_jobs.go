package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
)

// Jobs in trees (store.Job.Tree): a job whose resource is a key of a tree is submitted the way of
// jobs beyond one key (jobs_beyond.go: the pipelined statements refuse it, inTreeSQL), marked
// tree and holds, and its attempts are granted through holds (trees_grant.go), by the tree's
// rules, at its place in the lines (its submit).

// checkTreeResources reads, in the submit's transaction (q), the trees of the resources a job
// submitted with p holds, and checks those that lie in one ("resource", "resources"). It reports
// whether p.Resource is a key of a tree: the job's attempts are then granted by the tree's rules.
func (s *Store) checkTreeResources(ctx context.Context, q querier, p *store.SubmitParams) (bool, error) {
	tree := false
	for i, k := range append([]string{p.Resource}, p.Resources...) {
		var prefix string
		err := q.QueryRow(ctx, s.tq.probe, k).Scan(&prefix)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return false, err
		}
		field := "resource"
		if i > 0 {
			field = "resources"
		}
		if err := store.ValidateTreeKey(field, k, prefix); err != nil {
			return false, err
		}
		tree = tree || i == 0
	}
	return tree, nil
}
