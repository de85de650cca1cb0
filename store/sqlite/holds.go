package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/batonhq/baton/store"
)

// Beyond one at a time (store/holds.go, migrations/0009_holds.sql): a request for a shared hold,
// several keys or units of limits runs as one write transaction that reads every key's row, its
// holds, its job side and its line, and every limit's use and line, then grants all or enqueues
// the caller in every line. SQLite runs one writer at a time, so the reads and the writes are one
// step.

// holdTx runs fn in one write transaction with the store's clock read once the write lock is held.
func (s *Store) holdTx(ctx context.Context, op string, fn func(tx *sql.Tx, now int64) error) error {
	if err := s.closed.Check(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	if err := fn(tx, s.now().UnixNano()); err != nil {
		_ = tx.Rollback()
		var invalid *store.InvalidArgumentError
		if errors.As(err, &invalid) || errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) ||
			errors.Is(err, store.ErrLimitInUse) || errors.Is(err, store.ErrTreeInUse) {
			return err
		}
		return s.wrap(op, err)
	}
	return s.wrap(op, tx.Commit())
}

// place is a request's place in its lines: the arrival and sequence its live tickets share, or
// none (a newcomer, behind every live ticket).
type place struct {
	at, seq int64
	has     bool
	job     int64 // the job whose attempt asks, if one does (its own readiness is no wait)
}

// beforeMeSQL selects the live tickets of line ?1 that are before the caller (lease ID ?2) at ?3:
// break-glass ones, and, if the caller has a place (?4 = 1, at ?5, seq ?6), those that arrived
// before it; without a place, every live ticket of another request.
const beforeMeSQL = `FROM tickets t WHERE t.key = ?1 AND t.lease_id <> ?2 AND t.expires_at > ?3
	AND (?4 = 0 OR t.first = 1 OR t.created_at < ?5 OR (t.created_at = ?5 AND (t.seq < ?6 OR (t.seq = ?6 AND t.lease_id < ?2))))`

// acquireBeyond grants a request that Beyond reports, or refuses it (enqueuing its tickets if it
// waits), in one transaction.
func (s *Store) acquireBeyond(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if p.First {
		return nil, &store.InvalidArgumentError{Field: "first", Rule: "cannot be combined with shared mode, resources or limits, nor used on a key under a rated prefix"}
	}
	var lease *store.Lease
	var refusal error
	var wake []string // the limits' lines with tickets, whose new front may go now
	err := s.holdTx(ctx, "acquire", func(tx *sql.Tx, now int64) error {
		lease, refusal = nil, nil
		trees, err := s.checkTreeKeys(ctx, tx, p)
		if err != nil {
			return err
		}
		l, err := s.reacquireHolds(ctx, tx, p, now)
		if err != nil || l != nil {
			lease = l
			return err
		}
		caps := make([]int, len(p.Limits))
		for i, name := range p.Limits {
			err := s.hq(ctx, tx, sqlLimitCapacity).QueryRowContext(ctx, name).Scan(&caps[i])
			if errors.Is(err, sql.ErrNoRows) {
				return store.UnknownLimit(name)
			}
			if err != nil {
				return err
			}
		}
		me, err := s.myPlace(ctx, tx, p, now)
		if err != nil {
			return err
		}
		for i, k := range p.Keys() {
			if refusal, err = s.keyRefusal(ctx, tx, p, k, trees[i], now, me); err != nil || refusal != nil {
				break
			}
		}
		wake = wake[:0]
		for i := 0; refusal == nil && err == nil && i < len(p.Limits); i++ {
			var ahead int
			refusal, err = s.limitRefusal(ctx, tx, p, p.Limits[i], caps[i], now, me, &ahead)
			if me.has || ahead > 0 {
				wake = append(wake, store.LimitLine(p.Limits[i]))
			}
		}
		var rates []store.ScopedRate
		if err == nil && refusal == nil {
			// The rates the grant counts in (rates.go): one reached refuses it until its
			// window frees.
			if rates, err = grantRates(ctx, tx, p.Keys(), p.Limits); err == nil && len(rates) > 0 {
				var w *store.RateWait
				if w, err = ratesReached(ctx, tx, rates, time.Unix(0, now)); w != nil {
					refusal = store.RateRefusal(p.Key, *w, time.Unix(0, now))
				}
			}
		}
		switch {
		case err != nil:
			return err
		case refusal != nil && p.Wait:
			return s.enqueueBeyond(ctx, tx, p, now, me)
		case refusal != nil:
			return nil
		}
		if lease, err = s.grantBeyond(ctx, tx, p, trees, now); err != nil {
			return err
		}
		return recordRates(ctx, tx, rates, time.Unix(0, now))
	})
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	// The next in a limit's line, or a shared request behind a shared one, may go too: wake the
	// new fronts. Each that cannot go waits again.
	for _, line := range wake {
		s.wakeFront(ctx, line)
	}
	if p.Shared {
		for _, k := range p.Keys() {
			s.wakeFront(ctx, k)
		}
	}
	return lease, nil
}

// myPlace reads the caller's place: the arrival its live tickets share, if it has one in every
// line of the request.
func (s *Store) myPlace(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, now int64) (place, error) {
	ls := p.Lines()
	rows, err := s.hq(ctx, tx, sqlMyPlace).QueryContext(ctx, p.LeaseID, now, jsonList(ls))
	if err != nil {
		return place{}, err
	}
	defer rows.Close()
	var me place
	n := 0
	for rows.Next() {
		var at, seq int64
		if err := rows.Scan(&at, &seq); err != nil {
			return place{}, err
		}
		if n > 0 && (at != me.at || seq != me.seq) {
			return place{}, rows.Close() // not one place: start again at the back
		}
		me, n = place{at: at, seq: seq, has: true}, n+1
	}
	if err := rows.Err(); err != nil {
		return place{}, err
	}
	if n != len(ls) {
		return place{}, nil
	}
	return me, nil
}

// keyRefusal says why key k cannot be granted to p now: a lease or an exclusive hold holds it
// (or, for an exclusive request, any hold), it rests, a job attempt holds it or it rests after a
// job, or a ticket or ready job before the caller waits in its line; for a key of the tree of
// prefix (if not ""), a related key (relatedRefusal). nil if it can be granted.
func (s *Store) keyRefusal(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, k, prefix string, now int64, me place) (error, error) {
	resource := ""
	if k != p.Key {
		resource = k
	}
	var r row
	err := r.scan(tx.StmtContext(ctx, s.stmts.selectRow).QueryRowContext(ctx, k))
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && r.availableAt <= now:
	case err != nil:
		return nil, err
	case r.leaseID != "" && r.ended == 0 && r.expiresAt > now:
		return &store.LockHeldError{Key: p.Key, Resource: resource, Holder: r.holder, Token: uint64(r.token),
			ExpiresAt: time.Unix(0, r.expiresAt), RetryAfter: time.Duration(r.expiresAt - now)}, nil
	case r.leaseID == "" && r.ended == 0 && r.expiresAt > now:
		// Holds: compatible only if all are shared and so is the request.
		var mode, holder string
		var token, expires int64
		err := s.hq(ctx, tx, sqlKeyHolds).QueryRowContext(ctx, k, now).
			Scan(&mode, &holder, &token, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return restOf(k, r, now), nil
		}
		if err != nil {
			return nil, err
		}
		if mode == "exclusive" || !p.Shared {
			return &store.LockHeldError{Key: p.Key, Resource: resource, Holder: holder, Token: uint64(token), Shared: mode == "shared",
				ExpiresAt: time.Unix(0, expires), RetryAfter: time.Duration(expires - now)}, nil
		}
	default:
		return restOf(k, r, now), nil
	}
	refusal, err := s.jobRefusalIn(ctx, tx, k, now)
	if err != nil || refusal != nil {
		if held, ok := refusal.(*store.LockHeldError); ok {
			held.Key, held.Resource = p.Key, resource
		}
		return refusal, err
	}
	// The line: an exclusive request waits for every ticket before it, a shared one for the
	// exclusive ones; both for the ready jobs submitted before them (a shared one for the
	// exclusive jobs).
	q := sqlAheadExclusive
	if p.Shared {
		q = sqlAheadShared
	}
	var ahead int
	var front sql.NullString
	err = s.hq(ctx, tx, q).QueryRowContext(ctx, k, p.LeaseID, now, me.has, me.at, me.seq).Scan(&ahead, &front)
	if err != nil {
		return nil, err
	}
	arrival := now
	if me.has {
		arrival = me.at
	}
	var jobs int
	var firstJob sql.NullInt64
	err = s.hq(ctx, tx, sqlJobsAhead).QueryRowContext(ctx, k, now, arrival, me.job, p.Shared).Scan(&jobs, &firstJob)
	if err != nil {
		return nil, err
	}
	if ahead+jobs == 0 {
		if prefix == "" {
			return nil, nil
		}
		return s.relatedRefusal(ctx, tx, p, k, prefix, now, me)
	}
	e := &store.LockHeldError{Key: p.Key, Resource: resource, Ahead: ahead + jobs, Holder: front.String}
	if firstJob.Valid {
		e.Holder = store.JobHolder(firstJob.Int64)
	}
	return e, nil
}

// restOf is the rest of a key whose row r is not available at now.
func restOf(k string, r row, now int64) error {
	reason := store.ReasonLockDelay
	if r.ended == 1 {
		reason = store.ReasonCooldown
	}
	return &store.RestingError{Key: k, Reason: reason, Remaining: time.Duration(r.availableAt - now)}
}

// limitRefusal says why limit name (of capacity c) cannot grant p a unit now: its units in use
// plus the live tickets before the caller in its line reach c. nil if it can.
// It sets *ahead to the number of live tickets before the caller.
func (s *Store) limitRefusal(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, name string, c int, now int64, me place,
	ahead *int) (error, error) {
	line := store.LimitLine(name)
	var inUse, n int
	var holder sql.NullString
	var soonest sql.NullInt64
	err := s.hq(ctx, tx, sqlLimitUse).QueryRowContext(ctx, line, p.LeaseID, now, me.has, me.at, me.seq).Scan(&inUse, &soonest, &holder, &n)
	if err != nil {
		return nil, err
	}
	*ahead = n
	if inUse+n < c {
		return nil, nil
	}
	e := &store.LockHeldError{Key: p.Key, Limit: name, InUse: inUse, Capacity: c, Ahead: n, Holder: holder.String}
	if soonest.Valid {
		e.ExpiresAt = time.Unix(0, soonest.Int64)
		e.RetryAfter = time.Duration(soonest.Int64 - now)
	}
	return e, nil
}

// enqueueBeyond puts a refused waiter in every line of its request with one arrival, or keeps its
// tickets alive if it has its place in all of them.
func (s *Store) enqueueBeyond(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, now int64, me place) error {
	ls := p.Lines()
	expires := now + int64(p.TTL)
	if me.has {
		_, err := s.hq(ctx, tx, sqlKeepTickets).ExecContext(ctx, expires, p.LeaseID, p.Owner, jsonList(ls))
		return err
	}
	if _, err := s.hq(ctx, tx, sqlEndTickets).ExecContext(ctx, p.LeaseID, jsonList(ls)); err != nil {
		return err
	}
	var seq int64
	if err := s.hq(ctx, tx, sqlNextSeq).QueryRowContext(ctx, jsonList(ls)).Scan(&seq); err != nil {
		return err
	}
	mode := p.HoldMode()
	for _, k := range ls {
		_, err := s.hq(ctx, tx, sqlEnqueueTicket).ExecContext(ctx, k, p.LeaseID, p.Holder, p.Owner, now, expires, seq, mode, p.Key)
		if err != nil {
			return err
		}
	}
	return nil
}

// grantBeyond grants every key and limit unit of the request under one token, and ends its
// tickets; trees are the prefixes of the trees of its keys (checkTreeKeys).
func (s *Store) grantBeyond(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, trees []string, now int64) (*store.Lease, error) {
	var token int64
	if err := s.hq(ctx, tx, sqlDrawToken).QueryRowContext(ctx).Scan(&token); err != nil {
		return nil, err
	}
	expires := now + int64(p.TTL)
	hold := func(key, mode string, md sql.NullString) error {
		_, err := s.hq(ctx, tx, sqlGrantHold).ExecContext(ctx, p.LeaseID, key, mode, p.Key, p.Holder, p.Owner, token, now, expires, int64(p.Cooldown), int64(p.LockDelay), md)
		return err
	}
	mode := p.HoldMode()
	for i, k := range p.Keys() {
		md := sql.NullString{}
		if i == 0 {
			md = nullable(p.Metadata)
		}
		if err := hold(k, mode, md); err != nil {
			return nil, err
		}
		// The key's summary row: held until its latest hold expires; a tree key's is marked so.
		_, err := s.hq(ctx, tx, sqlSummarise).ExecContext(ctx, k, p.Holder, p.Owner, token, now, expires, int64(p.LockDelay), int64(p.Cooldown),
			trees[i] != "")
		if err != nil {
			return nil, err
		}
	}
	var slots map[string]int
	for _, name := range p.Limits {
		var slot int
		err := s.hq(ctx, tx, sqlGrantUnit).QueryRowContext(ctx, p.LeaseID, store.LimitLine(name), p.Key, p.Holder, p.Owner, token, now, expires,
			int64(p.Cooldown), int64(p.LockDelay)).Scan(&slot)
		if err != nil {
			return nil, err
		}
		if slots == nil {
			slots = make(map[string]int, len(p.Limits))
		}
		slots[name] = slot
	}
	ls := p.Lines()
	if _, err := s.hq(ctx, tx, sqlEndTickets).ExecContext(ctx, p.LeaseID, jsonList(ls)); err != nil {
		return nil, err
	}
	return &store.Lease{Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, Token: uint64(token),
		AcquiredAt: time.Unix(0, now), ExpiresAt: time.Unix(0, expires), TTLLeft: p.TTL, Metadata: p.Metadata,
		Shared: p.Shared, Resources: p.Resources, Limits: p.Limits, Slots: slots}, nil
}

// reacquireHolds renews the caller's live lease of the same holder and owner on p.Key, if it has
// one made of holds, and returns it; nil if it has none.
func (s *Store) reacquireHolds(ctx context.Context, tx *sql.Tx, p *store.AcquireParams, now int64) (*store.Lease, error) {
	var id string
	err := s.hq(ctx, tx, sqlMyHolds).QueryRowContext(ctx, p.Key, p.Holder, p.Owner, now).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.renewHoldsTx(ctx, tx, &store.RenewParams{Key: p.Key, LeaseID: id, Owner: p.Owner, TTL: p.TTL}, now)
}

// renewHoldsTx extends every hold of the lease (Key, LeaseID) of p.Owner by p.TTL from now, and
// its keys' summary rows with them; ErrNotHeld if it has none live.
func (s *Store) renewHoldsTx(ctx context.Context, tx *sql.Tx, p *store.RenewParams, now int64) (*store.Lease, error) {
	expires := now + int64(p.TTL)
	rows, err := s.hq(ctx, tx, sqlRenewHolds).QueryContext(ctx, p.LeaseID, p.Key, p.Owner, expires, now)
	if err != nil {
		return nil, err
	}
	l := &store.Lease{Key: p.Key, ID: p.LeaseID, Owner: p.Owner, ExpiresAt: time.Unix(0, expires), TTLLeft: p.TTL}
	var keys []string
	found := false
	for rows.Next() {
		var key, mode string
		var token, acquired int64
		var md sql.NullString
		var slot sql.NullInt64
		if err := rows.Scan(&key, &mode, &l.Holder, &token, &acquired, &md, &slot); err != nil {
			rows.Close()
			return nil, err
		}
		found = true
		l.Token, l.AcquiredAt = uint64(token), time.Unix(0, acquired)
		var meta json.RawMessage
		if md.Valid {
			meta = json.RawMessage(md.String)
		}
		l.AddHold(key, mode, int(slot.Int64), meta)
		if mode != "unit" {
			keys = append(keys, key)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, store.ErrNotHeld
	}
	l.SortHolds()
	_, err = s.hq(ctx, tx, sqlRenewSummaries).ExecContext(ctx, expires, jsonList(keys))
	return l, err
}

// renewHolds renews a lease made of holds.
func (s *Store) renewHolds(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	var l *store.Lease
	err := s.holdTx(ctx, "renew", func(tx *sql.Tx, now int64) (err error) {
		l, err = s.renewHoldsTx(ctx, tx, p, now)
		return err
	})
	return l, err
}

// releaseHolds ends a lease made of holds and frees or shrinks its keys' summary rows; the
// lines of its keys and limits are woken after the commit.
func (s *Store) releaseHolds(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	var res *store.ReleaseResult
	var woken []string
	err := s.holdTx(ctx, "release", func(tx *sql.Tx, now int64) (err error) {
		res, woken, err = s.releaseHoldsTx(ctx, tx, p, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, k := range woken {
		s.wakeFront(ctx, k)
	}
	return res, nil
}

// releaseHoldsTx is releaseHolds in tx; it returns the lines to wake once tx commits.
func (s *Store) releaseHoldsTx(ctx context.Context, tx *sql.Tx, p *store.ReleaseParams, now int64) (*store.ReleaseResult, []string, error) {
	rows, err := s.hq(ctx, tx, sqlReleaseHolds).QueryContext(ctx, p.LeaseID, p.Key, p.Owner, now)
	if err != nil {
		return nil, nil, err
	}
	type ended struct {
		key      string
		cooldown int64
	}
	var keys []ended
	var woken []string
	var acquired int64
	for rows.Next() {
		var e ended
		var mode string
		if err := rows.Scan(&e.key, &mode, &acquired, &e.cooldown); err != nil {
			rows.Close()
			return nil, nil, err
		}
		woken = append(woken, e.key)
		if mode != "unit" {
			keys = append(keys, e)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(woken) == 0 {
		var released int
		err := s.hq(ctx, tx, sqlReleasedHolds).QueryRowContext(ctx, p.LeaseID, p.Key, p.Owner).Scan(&released)
		if err != nil {
			return nil, nil, err
		}
		if released == 0 {
			return nil, nil, store.ErrNotHeld
		}
		return &store.ReleaseResult{AlreadyReleased: true}, nil, nil
	}
	for _, e := range keys {
		if err := s.settleKey(ctx, tx, e.key, now, e.cooldown); err != nil {
			return nil, nil, err
		}
	}
	return &store.ReleaseResult{Held: time.Duration(now - acquired)}, woken, nil
}

// settleKey brings key's summary row in line with its holds after some ended: held until the
// latest live hold expires, or ended (released) and available after cooldown and after the
// lock-delay of holds that expired without being released.
func (s *Store) settleKey(ctx context.Context, tx *sql.Tx, key string, now, cooldown int64) error {
	var live sql.NullInt64 // latest expiry of a live hold
	var delay sql.NullInt64
	err := s.hq(ctx, tx, sqlSettleRead).QueryRowContext(ctx, key, now).Scan(&live, &delay)
	if err != nil {
		return err
	}
	if live.Valid {
		_, err = s.hq(ctx, tx, sqlSettleHeld).ExecContext(ctx, key, live.Int64, delay.Int64, now+cooldown)
		return err
	}
	_, err = s.hq(ctx, tx, sqlSettleFree).ExecContext(ctx, key, now, cooldown, delay)
	return err
}

// endHoldsOf force-ends every live lease made of holds that holds key (an admin's
// force-release of it), and settles its other keys; key's own row was ended by the caller. It
// returns the lines to wake.
func (s *Store) endHoldsOf(ctx context.Context, tx *sql.Tx, key string, now int64) ([]string, error) {
	rows, err := s.hq(ctx, tx, sqlForceHolds).QueryContext(ctx, key, now)
	if err != nil {
		return nil, err
	}
	var woken, settle []string
	for rows.Next() {
		var k, mode string
		if err := rows.Scan(&k, &mode); err != nil {
			rows.Close()
			return nil, err
		}
		woken = append(woken, k)
		if mode != "unit" && k != key {
			settle = append(settle, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, k := range settle {
		if err := s.settleKey(ctx, tx, k, now, 0); err != nil {
			return nil, err
		}
	}
	return woken, nil
}

// keyHolders reads the live holds of key as leases, in token order.
func (s *Store) keyHolders(ctx context.Context, tx *sql.Tx, key string, now int64) ([]*store.Lease, error) {
	rows, err := s.hq(ctx, tx, sqlKeyHolders).QueryContext(ctx, key, now, store.MaxListLimit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Lease
	for rows.Next() {
		l := &store.Lease{Key: key}
		var mode string
		var token, acquired, expires int64
		if err := rows.Scan(&l.ID, &mode, &l.Holder, &l.Owner, &token, &acquired, &expires); err != nil {
			return nil, err
		}
		l.Shared, l.Token = mode == "shared", uint64(token)
		l.AcquiredAt, l.ExpiresAt, l.TTLLeft = time.Unix(0, acquired), time.Unix(0, expires), time.Duration(expires-now)
		out = append(out, l)
	}
	return out, rows.Err()
}
