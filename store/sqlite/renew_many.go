package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"

	"github.com/batonhq/baton/store"
)

// Group commit of renewals. Every write transaction of a durable SQLite store ends in an fsync,
// and the store has one connection: with one transaction per renewal, a server with tens of
// thousands of held leases spends its whole write budget on renewals and leases expire while
// their renewals queue. Renewals that arrive while a batch waits for the connection join it, and
// the batch is one transaction: one fsync for all of them. Nothing waits on purpose: an
// uncontended renewal runs at once, alone; batches form only when renewals queue.
//
// Each renewal keeps its own answer (one not held does not fail the others), and none is
// answered before the transaction that contains it committed, so every acknowledged renewal is
// as durable as before.

// maxRenewBatch bounds a batch, so that one transaction does not hold the write lock for long.
const maxRenewBatch = 512

type renewReq struct {
	ctx   context.Context
	p     *store.RenewParams
	lease *store.Lease
	err   error
}

type renewBatch struct {
	reqs []*renewReq
	done chan struct{}
}

type renewBatcher struct {
	mu      sync.Mutex
	pending *renewBatch // the batch that renewals join, nil if none waits
	// commit is held by the batch that has the connection (one at a time: a second batch waits
	// for it, collecting renewals meanwhile).
	commit sync.Mutex
}

// renewBatched queues p in the pending batch (starting one if none waits) and waits for its
// answer.
func (s *Store) renewBatched(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	req := &renewReq{ctx: ctx, p: p}
	rb := &s.renews
	rb.mu.Lock()
	b := rb.pending
	start := b == nil
	if start {
		b = &renewBatch{done: make(chan struct{})}
		rb.pending = b
	}
	b.reqs = append(b.reqs, req)
	if len(b.reqs) >= maxRenewBatch {
		rb.pending = nil // full: the next renewal starts another
	}
	rb.mu.Unlock()
	if start {
		go s.runRenewBatch(b)
	}
	select {
	case <-b.done:
		return req.lease, req.err
	case <-ctx.Done():
		// The batch may still renew it; like any call that timed out, the caller cannot know.
		return nil, ctx.Err()
	}
}

// runRenewBatch waits for its turn and the connection, closes the batch to newcomers, and runs
// it in one transaction.
func (s *Store) runRenewBatch(b *renewBatch) {
	defer close(b.done)
	rb := &s.renews
	rb.commit.Lock()
	defer rb.commit.Unlock()
	// Not any caller's context: one giving up must not fail the others. The wait for the
	// connection ends with the operation holding it (SQLite's busy timeout bounds a write lock
	// held by another process), or with Close.
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	rb.mu.Lock()
	if rb.pending == b {
		rb.pending = nil
	}
	reqs := b.reqs // no longer appended to
	rb.mu.Unlock()
	if err != nil {
		setAll(reqs, s.wrap("renew", err))
		return
	}
	defer conn.Close()
	live := reqs[:0:0]
	for _, r := range reqs {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		setAll(live, s.wrap("renew", err))
		return
	}
	if len(live) == 1 {
		r := live[0]
		r.lease, r.err = s.renewOn(ctx, tx.StmtContext(ctx, s.stmts.renew), r.p)
		if r.err != nil && !errors.Is(r.err, store.ErrNotHeld) {
			_ = tx.Rollback()
			return
		}
	} else if err := s.renewAllOn(ctx, tx, live); err != nil {
		// A failing statement: nothing of the batch is committed, all are told.
		_ = tx.Rollback()
		setAll(live, err)
		return
	}
	if err := tx.Commit(); err != nil {
		setAll(live, s.wrap("renew", err))
	}
}

func setAll(reqs []*renewReq, err error) {
	for _, r := range reqs {
		r.lease, r.err = nil, err
	}
}

// renewManySQL renews, in one statement, the live leases among ?1, a JSON array of
// {"k": key, "i": lease ID, "o": owner, "t": TTL in ns}, at time ?2, each only if the owner is
// its own. A key given twice is renewed once.
const renewManySQL = `UPDATE leases SET
	expires_at = ?2 + b.ttl, available_at = ?2 + b.ttl + lock_delay_ns
FROM (SELECT json_extract(value, '$.k') AS k, json_extract(value, '$.i') AS i, json_extract(value, '$.o') AS o,
		max(json_extract(value, '$.t')) AS ttl
	FROM json_each(?1) GROUP BY 1, 2, 3) AS b
WHERE leases.key = b.k AND leases.lease_id = b.i AND leases.owner = b.o AND leases.ended = 0 AND leases.expires_at > ?2
RETURNING ` + leaseColumns

type renewItem struct {
	K string `json:"k"`
	I string `json:"i"`
	O string `json:"o"`
	T int64  `json:"t"`
}

// renewAllOn renews the leases of reqs in one statement of tx and sets each request's answer;
// an error is the statement's, and then no answer is set.
func (s *Store) renewAllOn(ctx context.Context, tx *sql.Tx, reqs []*renewReq) error {
	items := make([]renewItem, len(reqs))
	for i, r := range reqs {
		items[i] = renewItem{K: r.p.Key, I: r.p.LeaseID, O: r.p.Owner, T: int64(r.p.TTL)}
	}
	arg, err := json.Marshal(items)
	if err != nil {
		return err
	}
	now := s.now().UnixNano()
	rows, err := tx.QueryContext(ctx, renewManySQL, string(arg), now)
	if err != nil {
		return s.wrap("renew", err)
	}
	defer rows.Close()
	renewed := make(map[string]*store.Lease, len(reqs))
	for rows.Next() {
		var r row
		if err := r.scan(rows); err != nil {
			return s.wrap("renew", err)
		}
		renewed[r.key] = r.lease(now)
	}
	if err := rows.Err(); err != nil {
		return s.wrap("renew", err)
	}
	for _, r := range reqs {
		if l := renewed[r.p.Key]; l != nil && l.ID == r.p.LeaseID && l.Owner == r.p.Owner {
			r.lease = l
		} else {
			r.err = store.ErrNotHeld
		}
	}
	return nil
}

// renewOn runs the renew statement in a transaction.
func (s *Store) renewOn(ctx context.Context, stmt *sql.Stmt, p *store.RenewParams) (*store.Lease, error) {
	now := s.now().UnixNano()
	var r row
	err := r.scan(stmt.QueryRowContext(ctx, p.Key, p.LeaseID, now, int64(p.TTL), p.Owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotHeld
	}
	if err != nil {
		return nil, s.wrap("renew", err)
	}
	return r.lease(now), nil
}

// RenewMany renews every lease of ps in one transaction (or two, past maxRenewBatch); see
// store.ManyRenewer. The renewals join the same batches as single ones.
func (s *Store) RenewMany(ctx context.Context, ps []*store.RenewParams) ([]store.RenewResult, error) {
	if err := store.ValidateRenewMany(ps); err != nil {
		return nil, err
	}
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	out := make([]store.RenewResult, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Lease, out[i].Err = s.renewOne(ctx, p)
		}()
	}
	wg.Wait()
	// A failure of the store is the whole call's, as with any other store call.
	for _, r := range out {
		if r.Err != nil && !errors.Is(r.Err, store.ErrNotHeld) {
			return nil, r.Err
		}
	}
	return out, nil
}

var _ store.ManyRenewer = (*Store)(nil)
