package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/batonhq/baton/store"
)

// Trees (store.Treer, store/trees.go, migrations/0014_trees.sql). The trees table is the truth,
// read inside every grant's write transaction or statement. The store also keeps the prefixes in
// memory (store.TreeCache) to pick the statement for a key and to wake related lines; a cache made
// stale by another process sharing the file is caught by the statements themselves (the plain
// grant refuses a key in a tree, the tree grant one in no tree) and reloaded.

// loadTrees reads the trees table into the cache.
func (s *Store) loadTrees(ctx context.Context) error {
	ps, err := s.prefixes(ctx, "trees", `SELECT prefix FROM trees ORDER BY prefix`)
	if err != nil {
		return err
	}
	s.trees.Set(ps)
	// The rated prefixes route keys too: a statement that refused a key for either reloads both.
	return s.loadRatePrefixes(ctx)
}

// prefixes reads the prefixes query selects (trees' or rated ones'), for the caches; errors
// name what.
func (s *Store) prefixes(ctx context.Context, what, query string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, s.wrap(what, err)
	}
	defer rows.Close()
	var ps []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, s.wrap(what, err)
		}
		ps = append(ps, p)
	}
	return ps, s.wrap(what, rows.Err())
}

// sqlTreeOf finds the only tree that may hold a key, from its store.TreeProbe ?1: the greatest
// prefix at or below it. The caller checks that it is a prefix of the probe.
var sqlTreeOf = hq(`SELECT max(prefix) FROM trees WHERE prefix <= ?1`)

// treeOfTx returns the prefix of key's tree as the trees table says in tx; "" if none.
func (s *Store) treeOfTx(ctx context.Context, tx *sql.Tx, key string) (string, error) {
	probe := store.TreeProbe(key)
	var p sql.NullString
	if err := s.hq(ctx, tx, sqlTreeOf).QueryRowContext(ctx, probe).Scan(&p); err != nil {
		return "", err
	}
	if !p.Valid || !strings.HasPrefix(probe, p.String) {
		return "", nil
	}
	return p.String, nil
}

// SetTree opts a prefix into a tree, unless a key of it is live or it overlaps another tree.
func (s *Store) SetTree(ctx context.Context, p *store.SetTreeParams) (*store.Tree, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var t *store.Tree
	err := s.holdTx(ctx, "set tree", func(tx *sql.Tx, now int64) error {
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT set_at FROM trees WHERE prefix = ?1`, p.Prefix).Scan(&at)
		if err == nil {
			t = &store.Tree{Prefix: p.Prefix, Root: store.TreeRoot(p.Prefix), SetAt: time.Unix(0, at)}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		all, err := readTrees(ctx, tx, &store.TreesParams{Limit: -1})
		if err != nil {
			return err
		}
		prefixes := make([]string, len(all))
		for i, t := range all {
			prefixes[i] = t.Prefix
		}
		if err := store.ValidateTreeOverlap(p.Prefix, prefixes); err != nil {
			return err
		}
		if err := treeInUse(ctx, tx, p.Prefix, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO trees (prefix, set_at) VALUES (?1, ?2)`, p.Prefix, now); err != nil {
			return err
		}
		if err := markTree(ctx, tx, p.Prefix, 1); err != nil {
			return err
		}
		t = &store.Tree{Prefix: p.Prefix, Root: store.TreeRoot(p.Prefix), SetAt: time.Unix(0, now)}
		return auditTree(ctx, tx, store.EventTreeSet, p.Prefix, p.Actor, p.Principal, now)
	})
	if err != nil {
		return nil, err
	}
	return t, s.loadTrees(ctx)
}

// DeleteTree returns a tree's keys to the rules of flat keys, unless one of them is live.
func (s *Store) DeleteTree(ctx context.Context, p *store.DeleteTreeParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	err := s.holdTx(ctx, "delete tree", func(tx *sql.Tx, now int64) error {
		if err := treeInUse(ctx, tx, p.Prefix, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM trees WHERE prefix = ?1`, p.Prefix)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		if err := markTree(ctx, tx, p.Prefix, 0); err != nil {
			return err
		}
		return auditTree(ctx, tx, store.EventTreeDelete, p.Prefix, p.Actor, p.Principal, now)
	})
	if err != nil {
		return err
	}
	return s.loadTrees(ctx)
}

// Trees lists trees in prefix order.
func (s *Store) Trees(ctx context.Context, p *store.TreesParams) ([]*store.Tree, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT prefix, set_at FROM trees WHERE prefix > ?1 ORDER BY prefix LIMIT ?2`, p.After, p.Limit)
	if err != nil {
		return nil, s.wrap("trees", err)
	}
	out, err := scanTrees(rows)
	return out, s.wrap("trees", err)
}

// readTrees reads trees in tx after p.After, at most p.Limit (-1: all).
func readTrees(ctx context.Context, tx *sql.Tx, p *store.TreesParams) ([]*store.Tree, error) {
	rows, err := tx.QueryContext(ctx, `SELECT prefix, set_at FROM trees WHERE prefix > ?1 ORDER BY prefix LIMIT ?2`, p.After, p.Limit)
	if err != nil {
		return nil, err
	}
	return scanTrees(rows)
}

func scanTrees(rows *sql.Rows) ([]*store.Tree, error) {
	defer rows.Close()
	var out []*store.Tree
	for rows.Next() {
		var prefix string
		var at int64
		if err := rows.Scan(&prefix, &at); err != nil {
			return nil, err
		}
		out = append(out, &store.Tree{Prefix: prefix, Root: store.TreeRoot(prefix), SetAt: time.Unix(0, at)})
	}
	return out, rows.Err()
}

// treeInUse returns a *store.TreeInUseError naming a live key of the tree of prefix: a live lease
// or hold (its leases row), a live ticket, or an unfinished job (its resource or one of its extra
// resources), on its root or below. Reading every row under the prefix, and the extra resources
// of every unfinished job, is an admin's price, paid once per change of a tree.
func treeInUse(ctx context.Context, tx *sql.Tx, prefix string, now int64) error {
	root := store.TreeRoot(prefix)
	lo, hi := store.DescendantRange(root)
	for _, c := range []struct {
		what, q string
		args    []any
	}{
		{"lease", `SELECT key FROM leases WHERE (key = ?1 OR key >= ?2 AND key < ?3) AND ended = 0 AND expires_at > ?4 ORDER BY key LIMIT 1`,
			[]any{root, lo, hi, now}},
		{"ticket", `SELECT key FROM tickets WHERE (key = ?1 OR key >= ?2 AND key < ?3) AND expires_at > ?4 ORDER BY key LIMIT 1`,
			[]any{root, lo, hi, now}},
		{"job", `SELECT resource FROM jobs WHERE (resource = ?1 OR resource >= ?2 AND resource < ?3)
			AND state IN ` + sqlUnfinished + ` ORDER BY resource LIMIT 1`, []any{root, lo, hi}},
		// A job's extra resources (jobs.beyond): read from every unfinished job that has some.
		{"job", `SELECT r.value FROM jobs j, json_each(j.beyond, '$.resources') r
			WHERE j.beyond IS NOT NULL AND j.state IN ` + sqlUnfinished + ` AND (r.value = ?1 OR r.value >= ?2 AND r.value < ?3)
			ORDER BY r.value LIMIT 1`, []any{root, lo, hi}},
	} {
		var key string
		err := tx.QueryRowContext(ctx, c.q, c.args...).Scan(&key)
		if err == nil {
			return &store.TreeInUseError{Prefix: prefix, Key: key, What: c.what}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return nil
}

// markTree sets the tree flag of the leases rows of prefix's keys (migrations/0014_trees.sql):
// their rests then refuse related grants, and the descendant range reads them.
func markTree(ctx context.Context, tx *sql.Tx, prefix string, tree int) error {
	root := store.TreeRoot(prefix)
	lo, hi := store.DescendantRange(root)
	_, err := tx.ExecContext(ctx, `UPDATE leases SET tree = ?4 WHERE key = ?1 OR key >= ?2 AND key < ?3`, root, lo, hi, tree)
	return err
}

// auditTree records a change of a tree in the audit log, if the file is audited.
func auditTree(ctx context.Context, tx *sql.Tx, kind, prefix, actor, principal string, now int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal)
		SELECT ?1, ?2, ?3, '', '', 0, ?4, '', ?5
		WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'leases_audit_end')`,
		now, kind, prefix, actor, principal)
	return err
}

// maxRelatedWake bounds the related lines one freed key wakes.
const maxRelatedWake = 64

// sqlRelatedWaiting lists the related lines of a tree key with someone waiting: the ancestors ?1
// (JSON) and the descendants in [?2, ?3) with a live ticket at ?4 or a claimable head job, at
// most ?5. In the common case (nobody waits) it reads nothing but index probes.
var sqlRelatedWaiting = `SELECT key FROM tickets WHERE key IN (SELECT value FROM json_each(?1)) AND expires_at > ?4
	UNION SELECT key FROM tickets WHERE key >= ?2 AND key < ?3 AND expires_at > ?4
	UNION SELECT resource FROM jobs INDEXED BY jobs_unfinished_by_resource WHERE resource IN (SELECT value FROM json_each(?1))
		AND head AND state IN ` + sqlUnfinished + ` AND state IN ` + sqlClaimable + `
	UNION SELECT resource FROM jobs INDEXED BY jobs_unfinished_by_resource WHERE resource >= ?2 AND resource < ?3
		AND head AND state IN ` + sqlUnfinished + ` AND state IN ` + sqlClaimable + `
	LIMIT ?5`

// wakeRelated wakes the fronts of the lines related to key, in the tree of prefix, that have
// someone waiting: a key that frees may let a request on an ancestor or a descendant go.
func (s *Store) wakeRelated(ctx context.Context, key, prefix string) {
	lo, hi := store.DescendantRange(key)
	rows, err := s.stmts.relatedWaiting.QueryContext(ctx, jsonList(store.TreeAncestors(key, prefix)), lo, hi, s.now().UnixNano(), maxRelatedWake)
	if err != nil {
		// Wake-ups are hints: the waiters poll.
		return
	}
	var keys []string
	for rows.Next() {
		var k string
		if rows.Scan(&k) == nil {
			keys = append(keys, k)
		}
	}
	rows.Close()
	for _, k := range keys {
		s.wakeLine(ctx, k)
	}
}

// sqlRelatedHolders reads the live holders of the keys related to a tree key at ?1: its
// ancestors ?2 (a JSON array) and its descendants in [?3, ?4), from the leases of single-key
// exclusive grants and from the holds (shared or several-key grants, and jobs), at most ?5, in
// token order.
var sqlRelatedHolders = hq(`SELECT key, lease_id, holder, owner, token, acquired_at, expires_at, 0 FROM leases
	WHERE tree AND ended = 0 AND lease_id <> '' AND expires_at > ?1
		AND (key IN (SELECT value FROM json_each(?2)) OR key >= ?3 AND key < ?4)
	UNION ALL
	SELECT key, lease_id, holder, owner, token, acquired_at, expires_at, mode = 'shared' FROM holds
	WHERE ended = 0 AND mode <> 'unit' AND expires_at > ?1
		AND (key IN (SELECT value FROM json_each(?2)) OR key >= ?3 AND key < ?4)
	ORDER BY token LIMIT ?5`)

// relatedHolders sets ResourceLine.Tree and Related of l.Key, read in tx at now.
func (s *Store) relatedHolders(ctx context.Context, tx *sql.Tx, l *store.ResourceLine, now int64, limit int) error {
	key := l.Key
	prefix, err := s.treeOfTx(ctx, tx, key)
	if err != nil || prefix == "" || store.ValidateTreeKey("key", key, prefix) != nil {
		return err
	}
	l.Tree = prefix
	lo, hi := store.DescendantRange(key)
	rows, err := s.hq(ctx, tx, sqlRelatedHolders).QueryContext(ctx, now, jsonList(store.TreeAncestors(key, prefix)), lo, hi, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		h := &store.Lease{}
		var token, acquired, expires int64
		if err := rows.Scan(&h.Key, &h.ID, &h.Holder, &h.Owner, &token, &acquired, &expires, &h.Shared); err != nil {
			return err
		}
		h.Token = uint64(token)
		h.AcquiredAt, h.ExpiresAt, h.TTLLeft = time.Unix(0, acquired), time.Unix(0, expires), time.Duration(expires-now)
		l.Related = append(l.Related, h)
	}
	return rows.Err()
}
