package postgres

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/combine"
	"github.com/batonhq/baton/store"
)

// Group commit of renewals. A server with tens of thousands of held leases receives thousands
// of renewals a second; one statement and one commit each spends the database's write budget
// on renewals. Renewals that find renewSlots statements already running queue, and the next
// free slot renews all of them in one statement (RenewMany): one round trip, one commit. An
// uncontended renewal runs at once, alone, with the single-row statement.
//
// Each renewal keeps its own answer, and none is answered before the statement that contains
// it committed.

// renewManyQuery renews the live leases among ($1 keys, $2 lease IDs, $3 TTLs in ms, $4 owners),
// each only if the owner is its own. The rows are locked in key order before the update, so that
// two batches with keys in common cannot deadlock. A key given twice is renewed once.
func renewManyQuery(schema string) string {
	t := pgx.Identifier{schema, "leases"}.Sanitize()
	return `WITH b AS (
	SELECT DISTINCT ON (k, lid, o) k, lid, o, ttl_ms
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS u(k, lid, ttl_ms, o)
	ORDER BY k, lid, o, ttl_ms DESC
), locked AS (
	SELECT t.key AS lk, b.ttl_ms AS lttl
	FROM ` + t + ` t JOIN b ON t.key = b.k AND t.lease_id = b.lid AND t.owner = b.o
	WHERE t.ended = 0 AND t.expires_at > now()
	ORDER BY t.key
	FOR UPDATE OF t
)
UPDATE ` + t + ` SET
	expires_at   = now() + locked.lttl * interval '1 millisecond',
	available_at = now() + (locked.lttl + lock_delay_ms) * interval '1 millisecond'
FROM locked WHERE key = locked.lk
RETURNING ` + leaseCols
}

// renewSlots is how many renew statements may run at once before renewals combine; at least
// two, so that one slow batch does not stall every renewal.
func renewSlots(maxConns int32) int { return max(2, int(maxConns)/2) }

func newRenewCombiner(s *Store) *combine.Combiner[*store.RenewParams, *store.Lease] {
	return &combine.Combiner[*store.RenewParams, *store.Lease]{
		Slots:    renewSlots(s.pool.Config().MaxConns),
		MaxBatch: store.MaxRenewMany,
		Run: func(ctx context.Context, calls []*combine.Call[*store.RenewParams, *store.Lease]) {
			if len(calls) == 1 {
				calls[0].Res, calls[0].Err = s.renewOne(ctx, calls[0].Req)
				return
			}
			ps := make([]*store.RenewParams, len(calls))
			for i, c := range calls {
				ps[i] = c.Req
			}
			res, err := s.renewMany(ctx, ps)
			for i, c := range calls {
				if err != nil {
					c.Err = err
					continue
				}
				c.Res, c.Err = res[i].Lease, res[i].Err
			}
		},
	}
}

// RenewMany renews every lease of ps in one statement; see store.ManyRenewer.
func (s *Store) RenewMany(ctx context.Context, ps []*store.RenewParams) ([]store.RenewResult, error) {
	if err := store.ValidateRenewMany(ps); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out, err := s.renewMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	for i, r := range out {
		if errors.Is(r.Err, store.ErrNotHeld) {
			// A lease made of holds (shared, several keys, limits) is renewed through them.
			out[i].Lease, out[i].Err = s.renewHolds(ctx, ps[i])
		}
	}
	return out, nil
}

func (s *Store) renewMany(ctx context.Context, ps []*store.RenewParams) ([]store.RenewResult, error) {
	keys := make([]string, len(ps))
	ids := make([]string, len(ps))
	ttls := make([]int64, len(ps))
	owners := make([]string, len(ps))
	for i, p := range ps {
		keys[i], ids[i], ttls[i], owners[i] = p.Key, p.LeaseID, p.TTL.Milliseconds(), p.Owner
	}
	rows, err := s.pool.Query(ctx, s.q.renewMany, keys, ids, ttls, owners)
	if err != nil {
		return nil, s.fail("renew", batchName(keys), err)
	}
	renewed := make(map[string]*store.Lease, len(ps))
	for rows.Next() {
		l, err := scanLease(rows, nil)
		if err != nil {
			rows.Close()
			return nil, s.fail("renew", batchName(keys), err)
		}
		renewed[l.Key] = l
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("renew", batchName(keys), err)
	}
	out := make([]store.RenewResult, len(ps))
	for i, p := range ps {
		if l := renewed[p.Key]; l != nil && l.ID == p.LeaseID && l.Owner == p.Owner {
			out[i].Lease = l
		} else {
			out[i].Err = store.ErrNotHeld
		}
	}
	return out, nil
}

// batchName names a batch in an error by its first key.
func batchName(keys []string) string {
	if len(keys) == 1 {
		return keys[0]
	}
	return keys[0] + " (and " + strconv.Itoa(len(keys)-1) + " more)"
}

var _ store.ManyRenewer = (*Store)(nil)
