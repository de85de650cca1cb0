package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/store"
)

type mvccKV = mvccpb.KeyValue

const maxAttempts = 8

// errReread tells Acquire to read the key's state again after a short pause.
var errReread = errors.New("etcd: read again")

// state is what a read of a key's lease, rest and delay keys found.
type state struct {
	lease, rest, delay, last *mvccKV
}

func first(r *clientv3.GetResponse) *mvccKV {
	if r == nil || len(r.Kvs) == 0 {
		return nil
	}
	return r.Kvs[0]
}

func (s *Store) readState(ctx context.Context, key string) (*state, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.LeaseKey(key)), clientv3.OpGet(s.restKey(key)),
		clientv3.OpGet(s.delayKey(key)), clientv3.OpGet(s.lastKey(key)),
	).Commit()
	if err != nil {
		return nil, s.closed.Wrap(err)
	}
	return stateOf(resp.Responses), nil
}

func stateOf(rs []*pb.ResponseOp) *state {
	get := func(i int) *mvccKV {
		if i >= len(rs) {
			return nil
		}
		return first((*clientv3.GetResponse)(rs[i].GetResponseRange()))
	}
	return &state{lease: get(0), rest: get(1), delay: get(2), last: get(3)}
}

func decode(kv *mvccKV) (*record, error) {
	var rec record
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return nil, fmt.Errorf("etcd: bad lease record at %s: %w", kv.Key, err)
	}
	return &rec, nil
}

// refuse turns a non-free state into the error Acquire returns, or reacquires for the same
// holder and owner: a live lease of the same holder and another owner is refused like any
// other, unchanged. extend's Txn is guarded by the ModRevision of the record whose owner was
// compared here, so the re-acquire applies to that record only. done is false if the key
// turned out to be free after all.
func (s *Store) refuse(ctx context.Context, p *store.AcquireParams, st *state) (*store.Lease, bool, error) {
	if st.lease != nil {
		rec, err := decode(st.lease)
		if err != nil {
			return nil, true, err
		}
		if rec.Holder == p.Holder && rec.Owner == p.Owner {
			l, err := s.extend(ctx, p.Key, st.lease, rec, p.TTL)
			if errors.Is(err, store.ErrNotHeld) {
				// It ended or changed meanwhile (or expired and etcd is about to delete it):
				// read again.
				return nil, false, errReread
			}
			return l, true, err
		}
		left, ok, err := s.remaining(ctx, clientv3.LeaseID(st.lease.Lease))
		if err != nil {
			return nil, true, err
		}
		if !ok || left <= 0 {
			left = time.Millisecond // expired, the server is about to delete it
		}
		return nil, true, &store.LockHeldError{Key: p.Key, Holder: rec.Holder, Token: uint64(st.lease.CreateRevision),
			ExpiresAt: time.Now().Add(left), RetryAfter: left}
	}
	for _, kv := range []*mvccKV{st.rest, st.delay} {
		if kv == nil {
			continue
		}
		reason, left, err := s.restLeft(ctx, st, kv)
		if err != nil {
			return nil, true, err
		}
		return nil, true, &store.RestingError{Key: p.Key, Reason: reason, Remaining: left}
	}
	return nil, false, nil
}

// restLeft says why the key rests (kv is st.rest or st.delay) and for how much longer.
func (s *Store) restLeft(ctx context.Context, st *state, kv *mvccKV) (string, time.Duration, error) {
	reason, capNs := store.ReasonLockDelay, int64(0)
	if kv == st.rest {
		var r rest
		if json.Unmarshal(kv.Value, &r) == nil {
			reason, capNs = r.Reason, r.Ns
		}
	}
	left, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return "", 0, err
	}
	if !ok {
		left = time.Millisecond
	}
	if capNs > 0 {
		left = min(left, time.Duration(capNs))
	}
	return reason, left, nil
}

// Acquire grants the key in one Txn guarded by "no lease, no rest, no lock-delay key".
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := store.RefuseBeyond("etcd", p); err != nil {
		return nil, err
	}
	// The first attempt is the grant itself: its Txn returns the key's state when it is taken.
	var st *state
	for attempt := range maxAttempts {
		if st != nil {
			l, done, err := s.refuse(ctx, p, st)
			if done {
				return l, err
			}
			if err == errReread {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
				}
				if st, err = s.readState(ctx, p.Key); err != nil {
					return nil, err
				}
				continue
			}
		}
		l, next, err := s.grant(ctx, p)
		if err != nil || l != nil {
			return l, err
		}
		st = next
	}
	return nil, fmt.Errorf("etcd: acquire %q: too much contention", p.Key)
}

// grant tries the grant Txn; on a lost race it returns the state the Txn found instead. It
// attaches the key to an idle etcd lease of the same TTL when the pool has one, restarting its
// TTL with a keepalive (renew.go) sent alongside the Txn, after this Acquire began: the key then lives
// at least the TTL from the start of the request, as with a fresh Grant. A pooled lease that
// expired meanwhile fails the Txn (etcd refuses a put on a missing lease) and a fresh one is
// granted.
func (s *Store) grant(ctx context.Context, p *store.AcquireParams) (*store.Lease, *state, error) {
	ttl := seconds(p.TTL)
	main, fromPool := s.pool.get(ttl, minLeft(ttl))
	for {
		l, st, err := s.grantWith(ctx, p, ttl, main, fromPool)
		if fromPool && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			main, fromPool = pooled{}, false
			continue
		}
		return l, st, err
	}
}

func (s *Store) grantWith(ctx context.Context, p *store.AcquireParams, ttl int64, main pooled, fromPool bool) (*store.Lease, *state, error) {
	ttlD := time.Duration(ttl) * time.Second
	if !fromPool {
		sent := time.Now()
		g, err := s.cli.Grant(ctx, ttl)
		if err != nil {
			return nil, nil, s.closed.Wrap(err)
		}
		main = pooled{id: g.ID, alive: sent.Add(ttlD)}
	}
	rec := &record{LeaseID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, Metadata: p.Metadata, TTLSeconds: ttl,
		CooldownNs: int64(p.Cooldown), LockDelayNs: int64(p.LockDelay), AcquiredAt: time.Now().UTC().Round(0)}
	if len(rec.Metadata) == 0 {
		rec.Metadata = nil
	}
	var delayID clientv3.LeaseID
	if p.LockDelay > 0 {
		d, err := s.cli.Grant(ctx, ttl+seconds(p.LockDelay))
		if err != nil {
			s.pool.put(ttl, main)
			return nil, nil, s.closed.Wrap(err)
		}
		delayID = d.ID
		rec.DelayLease = int64(d.ID)
	}
	var restarted <-chan error
	restartSent := time.Now()
	if fromPool {
		restarted = s.restarts.begin(main.id) // answered while the Txn runs
	}
	val, _ := json.Marshal(rec)
	lastVal, _ := json.Marshal(last{LeaseID: p.LeaseID, State: "held"})
	// last/<key>'s previous value (TookOver) comes back with its put.
	then := []clientv3.Op{
		clientv3.OpPut(s.LeaseKey(p.Key), string(val), clientv3.WithLease(main.id)),
		clientv3.OpPut(s.lastKey(p.Key), string(lastVal), clientv3.WithPrevKV()),
	}
	if delayID != 0 {
		then = append(then, clientv3.OpPut(s.delayKey(p.Key), p.LeaseID, clientv3.WithLease(delayID)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(s.LeaseKey(p.Key)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.restKey(p.Key)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.delayKey(p.Key)), "=", 0),
	).Then(then...).Else( // what refuse needs; not last/<key>
		clientv3.OpGet(s.LeaseKey(p.Key)), clientv3.OpGet(s.restKey(p.Key)), clientv3.OpGet(s.delayKey(p.Key)),
	).Commit()
	var restartErr error
	if restarted != nil {
		if restartErr = s.restarts.wait(ctx, restarted); restartErr == nil {
			main.alive = restartSent.Add(ttlD)
		}
	}
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.revoke(delayID)
			return nil, nil, err // the etcd lease had expired: nothing was written
		}
		// The outcome is unknown: keep the leases, which expire on their own if unused.
		return nil, nil, s.closed.Wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(delayID)
		s.pool.put(ttl, main)
		return nil, stateOf(resp.Responses), nil
	}
	if restartErr != nil {
		// The key is ours but its etcd lease may end before p.TTL: do not hand it out. A retry
		// by the same holder re-acquires it (and restarts the TTL); otherwise it expires.
		return nil, nil, fmt.Errorf("etcd: acquire %q: restart the TTL of a reused etcd lease: %w", p.Key, s.closed.Wrap(restartErr))
	}
	rev := resp.Header.Revision
	s.held.set(p.Key, &heldLease{leaseID: p.LeaseID, rev: rev, etcd: main, ttl: ttl, rec: rec})
	tookOver := false
	if kv := resp.Responses[1].GetResponsePut().GetPrevKv(); kv != nil {
		var l last
		tookOver = json.Unmarshal(kv.Value, &l) == nil && l.State == "held" && l.LeaseID != p.LeaseID
	}
	now := time.Now()
	return &store.Lease{
		Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, Token: uint64(rev),
		AcquiredAt: rec.AcquiredAt, ExpiresAt: now.Add(p.TTL), TTLLeft: p.TTL, Metadata: rec.Metadata,
		TookOver: tookOver,
	}, nil, nil
}

// revoke ends etcd leases, best effort: a lease that is not revoked expires on its own.
func (s *Store) revoke(ids ...clientv3.LeaseID) {
	var ctx context.Context // only made when there is something to revoke (not on a release's hot path)
	for _, id := range ids {
		if id == 0 {
			continue
		}
		if ctx == nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
		}
		_, _ = s.cli.Revoke(ctx, id)
	}
}

// extend renews the lease stored at kv for ttl from now: a KeepAliveOnce of its etcd leases if
// the TTL in seconds is unchanged, else a swap onto new etcd leases in a Txn guarded by the
// record's ModRevision. Either way it then checks that the key still holds this lease.
func (s *Store) extend(ctx context.Context, key string, kv *mvccKV, rec *record, ttl time.Duration) (*store.Lease, error) {
	secs := seconds(ttl)
	if secs == rec.TTLSeconds {
		// The lock-delay lease first: if this process stops between the two keepalives, the
		// lock-delay key still outlives the lease key by at least the lock-delay.
		if rec.DelayLease != 0 {
			if _, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(rec.DelayLease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, s.closed.Wrap(err)
			}
		}
		sent := time.Now()
		if _, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, store.ErrNotHeld
			}
			return nil, s.closed.Wrap(err)
		}
		// The key must still be this lease's, on this etcd lease, after the keepalive.
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.LeaseKey(key)), "=", kv.ModRevision),
			clientv3.Compare(clientv3.LeaseValue(s.LeaseKey(key)), "=", kv.Lease),
		).Commit()
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		if !resp.Succeeded {
			return nil, store.ErrNotHeld
		}
		if h := s.held.get(key); h != nil && h.etcd.id == clientv3.LeaseID(kv.Lease) {
			nh := *h
			nh.etcd.alive = sent.Add(time.Duration(secs) * time.Second)
			s.held.set(key, &nh)
		}
		return s.lease(key, kv, rec, ttl), nil
	}
	sent := time.Now()
	main, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, s.closed.Wrap(err)
	}
	nrec := *rec
	nrec.TTLSeconds = secs
	nrec.DelayLease = 0
	newIDs := []clientv3.LeaseID{main.ID}
	ops := []clientv3.Op{}
	if rec.LockDelayNs > 0 {
		d, err := s.cli.Grant(ctx, secs+seconds(time.Duration(rec.LockDelayNs)))
		if err != nil {
			s.revoke(newIDs...)
			return nil, s.closed.Wrap(err)
		}
		nrec.DelayLease = int64(d.ID)
		newIDs = append(newIDs, d.ID)
		ops = append(ops, clientv3.OpPut(s.delayKey(key), rec.LeaseID, clientv3.WithLease(d.ID)))
	}
	val, _ := json.Marshal(&nrec)
	ops = append(ops, clientv3.OpPut(s.LeaseKey(key), string(val), clientv3.WithLease(main.ID)))
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.LeaseKey(key)), "=", kv.ModRevision),
		clientv3.Compare(clientv3.LeaseValue(s.LeaseKey(key)), "=", kv.Lease),
	).Then(ops...).Commit()
	if err != nil {
		return nil, s.closed.Wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(newIDs...)
		return nil, store.ErrNotHeld
	}
	// The old etcd lease carries no key now; only this Txn freed it, so revoking it is safe.
	s.revoke(clientv3.LeaseID(kv.Lease), clientv3.LeaseID(rec.DelayLease))
	if h := s.held.get(key); h != nil && h.leaseID == rec.LeaseID {
		s.held.set(key, &heldLease{leaseID: h.leaseID, rev: h.rev, ttl: secs, rec: &nrec,
			etcd: pooled{id: main.ID, alive: sent.Add(time.Duration(secs) * time.Second)}})
	}
	return s.lease(key, kv, &nrec, ttl), nil
}

// Renew extends the lease (Key, LeaseID) by p.TTL if it is p.Owner's. The owner is compared on
// the record read, and extend's Txn is guarded by that record's ModRevision.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// extend refuses when the key changed after it was read; if it is still this lease's, a
	// concurrent renew of the same lease changed it (moved it to a new etcd lease for another
	// TTL): read it again.
	for range maxAttempts {
		resp, err := s.cli.Get(ctx, s.LeaseKey(p.Key))
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		kv := first(resp)
		if kv == nil {
			return nil, store.ErrNotHeld
		}
		rec, err := decode(kv)
		if err != nil {
			return nil, err
		}
		if rec.LeaseID != p.LeaseID || rec.Owner != p.Owner {
			return nil, store.ErrNotHeld
		}
		l, err := s.extend(ctx, p.Key, kv, rec, p.TTL)
		if !errors.Is(err, store.ErrNotHeld) {
			return l, err
		}
	}
	return nil, store.ErrNotHeld
}

// Release deletes the lease key in a Txn guarded by its ModRevision, records the release and
// starts the cooldown, then revokes the etcd leases. Only p.Owner's lease is released: the owner
// is compared on the record read (or the one granted here, whose CreateRevision guards the
// Txn), and a lease of another owner is ErrNotHeld.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if h := s.held.take(p.Key, p.LeaseID, p.Owner); h != nil {
		// Granted here: one Txn guarded by the grant's revision and etcd lease, no read first.
		ok, err := s.endHeld(ctx, p.Key, h, "released", store.ReasonCooldown, time.Duration(h.rec.CooldownNs))
		if err != nil {
			return nil, err
		}
		if ok {
			return &store.ReleaseResult{Held: max(time.Since(h.rec.AcquiredAt), time.Nanosecond)}, nil
		}
	}
	for range maxAttempts {
		st, err := s.readState(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		var rec *record
		if st.lease != nil {
			if rec, err = decode(st.lease); err != nil {
				return nil, err
			}
		}
		if rec == nil || rec.LeaseID != p.LeaseID {
			// Already released answers whoever names the ID: a lease that ended has no
			// owner left to protect, and nothing changes.
			var l last
			if st.last != nil && json.Unmarshal(st.last.Value, &l) == nil && l.LeaseID == p.LeaseID && l.State == "released" {
				return &store.ReleaseResult{AlreadyReleased: true}, nil
			}
			return nil, store.ErrNotHeld
		}
		if rec.Owner != p.Owner {
			return nil, store.ErrNotHeld
		}
		ok, err := s.end(ctx, p.Key, st.lease, rec, "released", store.ReasonCooldown, time.Duration(rec.CooldownNs))
		if err != nil {
			return nil, err
		}
		if ok {
			return &store.ReleaseResult{Held: max(time.Since(rec.AcquiredAt), time.Nanosecond)}, nil
		}
	}
	return nil, fmt.Errorf("etcd: release %q: too much contention", p.Key)
}

// end deletes the lease at kv if it is unchanged, puts the rest key for length, and records how
// the lease ended. ok is false if the lease key changed meanwhile.
func (s *Store) end(ctx context.Context, key string, kv *mvccKV, rec *record, how, reason string, length time.Duration) (bool, error) {
	ok, err := s.endIf(ctx, key, rec, how, reason, length,
		clientv3.Compare(clientv3.ModRevision(s.LeaseKey(key)), "=", kv.ModRevision))
	if err != nil || !ok {
		return ok, err
	}
	// The etcd lease now carries no key. If it is one granted here, reuse it; else revoke it.
	if h := s.held.get(key); h != nil && h.etcd.id == clientv3.LeaseID(kv.Lease) {
		s.held.drop(key)
		s.pool.put(h.ttl, h.etcd)
	} else {
		s.revoke(clientv3.LeaseID(kv.Lease))
	}
	s.revoke(clientv3.LeaseID(rec.DelayLease))
	return true, nil
}

// endHeld is end for a lease granted by this store, guarded by the grant's revision and its
// etcd lease instead of a read of the key; the etcd lease goes back to the pool.
func (s *Store) endHeld(ctx context.Context, key string, h *heldLease, how, reason string, length time.Duration) (bool, error) {
	ok, err := s.endIf(ctx, key, h.rec, how, reason, length,
		clientv3.Compare(clientv3.CreateRevision(s.LeaseKey(key)), "=", h.rev),
		clientv3.Compare(clientv3.LeaseValue(s.LeaseKey(key)), "=", int64(h.etcd.id)))
	if err != nil || !ok {
		return ok, err
	}
	s.pool.put(h.ttl, h.etcd)
	s.revoke(clientv3.LeaseID(h.rec.DelayLease))
	return true, nil
}

// endIf runs the ending Txn under cmps.
func (s *Store) endIf(ctx context.Context, key string, rec *record, how, reason string, length time.Duration, cmps ...clientv3.Cmp) (bool, error) {
	lastVal, _ := json.Marshal(last{LeaseID: rec.LeaseID, State: how})
	ops := []clientv3.Op{clientv3.OpDelete(s.LeaseKey(key)), clientv3.OpPut(s.lastKey(key), string(lastVal))}
	if rec.DelayLease != 0 || rec.LockDelayNs > 0 {
		ops = append(ops, clientv3.OpDelete(s.delayKey(key))) // only leases with a lock-delay have one
	}
	var restID clientv3.LeaseID
	if length > 0 {
		g, err := s.cli.Grant(ctx, seconds(length))
		if err != nil {
			return false, s.closed.Wrap(err)
		}
		restID = g.ID
		rv, _ := json.Marshal(rest{Reason: reason, Ns: int64(length)})
		ops = append(ops, clientv3.OpPut(s.restKey(key), string(rv), clientv3.WithLease(restID)))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, s.closed.Wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(restID)
		return false, nil
	}
	return true, nil
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, s.LeaseKey(key))
	if err != nil {
		return nil, s.closed.Wrap(err)
	}
	kv := first(resp)
	if kv == nil {
		return nil, store.ErrNotFound
	}
	l, err := s.live(ctx, key, kv)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, store.ErrNotFound
	}
	return l, nil
}

// live returns the lease at kv, or nil if its etcd lease has already expired.
func (s *Store) live(ctx context.Context, key string, kv *mvccKV) (*store.Lease, error) {
	rec, err := decode(kv)
	if err != nil {
		return nil, err
	}
	left, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil || !ok {
		return nil, err
	}
	return s.lease(key, kv, rec, left), nil
}

// List returns live leases in key order: a range read of leases/ from after p.After.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	base := s.prefix + "leases/"
	from := base + p.Prefix
	end := clientv3.GetPrefixRangeEnd(from)
	if a := base + p.After + "\x00"; p.After != "" && a > from {
		from = a
	}
	var out []*store.Lease
	for len(out) < p.Limit && from < end {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(p.Limit)),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		for _, kv := range resp.Kvs {
			if len(out) == p.Limit {
				break
			}
			key := string(kv.Key[len(base):])
			if p.Holder != "" {
				rec, err := decode(kv)
				if err != nil {
					return nil, err
				}
				if rec.Holder != p.Holder {
					continue
				}
			}
			l, err := s.live(ctx, key, kv)
			if err != nil {
				return nil, err
			}
			if l != nil {
				out = append(out, l)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ForceRelease deletes whatever lease holds key and starts its lock-delay.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	for range maxAttempts {
		resp, err := s.cli.Get(ctx, s.LeaseKey(p.Key))
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		kv := first(resp)
		if kv == nil {
			return nil, store.ErrNotFound
		}
		l, err := s.live(ctx, p.Key, kv)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, store.ErrNotFound
		}
		rec, _ := decode(kv)
		ok, err := s.end(ctx, p.Key, kv, rec, "forced", store.ReasonLockDelay, time.Duration(rec.LockDelayNs))
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
	}
	return nil, fmt.Errorf("etcd: force-release %q: too much contention", p.Key)
}
