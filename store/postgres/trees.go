package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonhq/baton/store"
)

// Trees (store.Treer, store/trees.go, migrations/0018_trees.sql).
//
// The trees table is the truth, and every statement that grants reads it: the plain acquire
// statement grants no key of a tree (it reports it, and the caller goes the way of holds), and
// a grant through holds finds the tree of each of its keys in the transaction that locks them
// (trees_grant.go). Reading the table takes ACCESS SHARE on it until the commit; SetTree and
// DeleteTree take ACCESS EXCLUSIVE, so a change of a tree waits for the grants in flight, checks
// that nothing under it is live, and every grant after it sees it.
//
// The store also keeps the prefixes in memory (store.TreeCache), only to choose the way of a key
// without a round trip: a stale copy (another process set or deleted a tree) costs one refused
// statement and a reload, never a wrong grant.

// treeQueries are the statements of trees, built once at open.
type treeQueries struct {
	probe, list, all, get, insert, remove, audit, lock string
	// The live things under a tree (root $1, descendants in [$2, $3)), one of each: a lease or
	// hold, or the lock-delay of one that expired or was force-released; a live ticket; an
	// unfinished job.
	inUseLease, inUseTicket, inUseJob, inUseJobResources string
}

// treeProbeSQL is the prefix of the only tree that may hold key $1, or no row: the greatest
// prefix at or below store.TreeProbe($1), if it is a prefix of it (one probe of the primary key).
const treeProbeSQL = `SELECT x.prefix FROM (SELECT t.prefix FROM {trees} t WHERE t.prefix <= $1 || '/' ORDER BY t.prefix DESC LIMIT 1) x
WHERE starts_with($1 || '/', x.prefix)`

// treeProbeCTE is the acquire statement's CTE tree: intree, whether key $1 is a key of a tree,
// or under a rated prefix (rates_scoped.go): either goes the way of holds. For each, the greatest
// prefix at or below the key (for a tree, store.TreeProbe($1)) is read first (one probe of the
// primary key), then tested: another prefix may lie between them only if the prefixes overlap.
func treeProbeCTE(schema string) string {
	t := pgx.Identifier{schema, "trees"}.Sanitize()
	r := pgx.Identifier{schema, "rate_prefixes"}.Sanitize()
	return `tree AS MATERIALIZED (SELECT coalesce((SELECT starts_with($1 || '/', t.prefix) FROM ` + t + ` t
	WHERE t.prefix <= $1 || '/' ORDER BY t.prefix DESC LIMIT 1), false) OR coalesce((SELECT starts_with($1, r.prefix) FROM ` + r + ` r
	WHERE r.prefix <= $1 ORDER BY r.prefix DESC LIMIT 1), false) AS intree)`
}

func buildTreeQueries(schema string) treeQueries {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	// The schema is [a-z0-9_]: its quoted forms hold no single quote.
	r := strings.NewReplacer("{trees}", id("trees"), "{leases}", id("leases"), "{tickets}", id("tickets"),
		"{jobs}", id("jobs"), "{events}", id("events"), "{leasesname}", "'"+id("leases")+"'")
	q := r.Replace
	under := func(col string) string { return `(` + col + ` = $1 OR ` + col + ` >= $2 AND ` + col + ` < $3)` }
	return treeQueries{
		probe: q(treeProbeSQL),
		// $1 after, $2 limit.
		list: q(`SELECT prefix, set_at FROM {trees} WHERE prefix > $1 ORDER BY prefix LIMIT $2`),
		all:  q(`SELECT prefix FROM {trees} ORDER BY prefix`),
		get:  q(`SELECT set_at FROM {trees} WHERE prefix = $1`),
		// $1 prefix.
		insert: q(`INSERT INTO {trees} (prefix, set_at) VALUES ($1, now()) RETURNING set_at`),
		remove: q(`DELETE FROM {trees} WHERE prefix = $1`),
		// In an audited schema (its triggers exist: audit is a property of the schema).
		// $1 kind, $2 prefix, $3 actor, $4 principal.
		audit: q(`INSERT INTO {events} (kind, key, lease_id, holder, token, actor, reason, principal)
SELECT $1, $2, '', '', 0, $3, '', $4
WHERE EXISTS (SELECT FROM pg_trigger WHERE tgrelid = {leasesname}::regclass AND tgname = 'leases_audit_update')`),
		// A change of a tree waits for every statement that read the table, and bounds its
		// wait: the grants that queue behind its lock wait with it.
		lock: q(`LOCK TABLE {trees} IN ACCESS EXCLUSIVE MODE`),
		inUseLease: q(`SELECT key FROM {leases} WHERE ` + under("key") + ` AND job_id = 0 AND ended IN (0, 2) AND available_at > now()
ORDER BY key LIMIT 1`),
		inUseTicket: q(`SELECT key FROM {tickets} WHERE ` + under("key") + ` AND expires_at > now() ORDER BY key LIMIT 1`),
		inUseJob: q(`SELECT resource FROM {jobs} WHERE ` + under("resource") + ` AND state IN ` + unfinished + `
ORDER BY resource LIMIT 1`),
		// A job's extra resources: read from every unfinished job that has some (a key of the
		// tree among them would be refused by its claims once the tree is set, or granted by
		// the flat rules if it is deleted). jobs.resources is not in C collation: the range
		// compares bytes only with it said.
		inUseJobResources: q(`SELECT r FROM {jobs} j, unnest(j.resources) r WHERE j.resources IS NOT NULL
	AND j.state IN ` + unfinished + ` AND ` + under(`r COLLATE "C"`) + ` ORDER BY r LIMIT 1`),
	}
}

// treeLockTimeout bounds how long SetTree and DeleteTree wait for the grants in flight: while
// they wait, the grants that arrive after them queue behind their lock.
const treeLockTimeout = 5 * time.Second

// loadTrees reads the trees' prefixes into the cache.
func (s *Store) loadTrees(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, s.tq.all)
	if err != nil {
		return err
	}
	ps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	s.trees.Set(ps)
	// The rated prefixes route keys too: a statement that refused a key for either reloads both.
	return s.loadRatePrefixes(ctx)
}

// treeOf returns the prefix of key's tree as the table says now; "" if none.
func (s *Store) treeOf(ctx context.Context, key string) (string, error) {
	var p string
	err := s.pool.QueryRow(ctx, s.tq.probe, key).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return p, err
}

// SetTree opts p.Prefix into a tree, unless it overlaps another tree or a key of it is live.
func (s *Store) SetTree(ctx context.Context, p *store.SetTreeParams) (*store.Tree, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	var t *store.Tree
	err := s.treeTx(ctx, func(tx pgx.Tx) error {
		t = &store.Tree{Prefix: p.Prefix, Root: store.TreeRoot(p.Prefix)}
		err := tx.QueryRow(ctx, s.tq.get, p.Prefix).Scan(&t.SetAt)
		if err == nil {
			return nil // a tree already: unchanged
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := tx.Query(ctx, s.tq.all)
		if err != nil {
			return err
		}
		prefixes, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if err := store.ValidateTreeOverlap(p.Prefix, prefixes); err != nil {
			return err
		}
		if err := s.treeInUse(ctx, tx, p.Prefix); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.tq.insert, p.Prefix).Scan(&t.SetAt); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.tq.audit, store.EventTreeSet, p.Prefix, p.Actor, p.Principal)
		return err
	})
	if err != nil {
		return nil, s.treeErr("set tree", p.Prefix, err)
	}
	return t, s.treeErr("set tree", p.Prefix, s.loadTrees(ctx))
}

// DeleteTree returns a tree's keys to the rules of flat keys, unless one of them is live.
func (s *Store) DeleteTree(ctx context.Context, p *store.DeleteTreeParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.closed.Check(); err != nil {
		return err
	}
	err := s.treeTx(ctx, func(tx pgx.Tx) error {
		var at time.Time
		err := tx.QueryRow(ctx, s.tq.get, p.Prefix).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := s.treeInUse(ctx, tx, p.Prefix); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.tq.remove, p.Prefix); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.tq.audit, store.EventTreeDelete, p.Prefix, p.Actor, p.Principal)
		return err
	})
	if err != nil {
		return s.treeErr("delete tree", p.Prefix, err)
	}
	return s.treeErr("delete tree", p.Prefix, s.loadTrees(ctx))
}

// Trees lists trees in prefix order.
func (s *Store) Trees(ctx context.Context, p *store.TreesParams) ([]*store.Tree, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.tq.list, p.After, p.Limit)
	if err != nil {
		return nil, s.fail("trees", p.After, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Tree, error) {
		t := &store.Tree{}
		err := r.Scan(&t.Prefix, &t.SetAt)
		t.Root = store.TreeRoot(t.Prefix)
		return t, err
	})
	if err != nil {
		return nil, s.fail("trees", p.After, err)
	}
	return out, nil
}

// treeTx runs fn in a transaction that holds the trees table in ACCESS EXCLUSIVE mode: it has
// waited for every statement in flight that read the table, and every one after it reads the
// table as it commits it.
func (s *Store) treeTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", treeLockTimeout.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.tq.lock); err != nil {
			return err
		}
		return fn(tx)
	})
}

// treeInUse returns a *store.TreeInUseError naming a live key of the tree of prefix, or nil:
// a lease or hold (or the lock-delay after one that expired or was force-released, during which
// its holder may still write, so that a grant under the tree's rules cannot overlap it), a
// live ticket, an unfinished job (its resource or one of its extra resources), on its root or
// below. Each but the last is one range of an index; the extra resources are read from every
// unfinished job that has some: an admin's price, paid once per change of a tree.
func (s *Store) treeInUse(ctx context.Context, tx pgx.Tx, prefix string) error {
	root := store.TreeRoot(prefix)
	lo, hi := store.DescendantRange(root)
	for _, c := range []struct{ what, sql string }{
		{"lease", s.tq.inUseLease}, {"ticket", s.tq.inUseTicket}, {"job", s.tq.inUseJob},
		{"job", s.tq.inUseJobResources},
	} {
		var key string
		err := tx.QueryRow(ctx, c.sql, root, lo, hi).Scan(&key)
		if err == nil {
			return &store.TreeInUseError{Prefix: prefix, Key: key, What: c.what}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	return nil
}

// treeErr passes the store's answers and wraps failures; a change of a tree that waited too long
// for the grants in flight says so.
func (s *Store) treeErr(op, prefix string, err error) error {
	var inUse *store.TreeInUseError
	if err == nil || passThrough(err) || errors.As(err, &inUse) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return s.fail(op, prefix, errors.New("grants in flight held the trees table past the lock timeout; retry"))
	}
	return s.fail(op, prefix, err)
}
