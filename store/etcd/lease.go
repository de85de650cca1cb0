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
		return nil, s.wrap(err)
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
// holder. done is false if the key turned out to be free after all.
func (s *Store) refuse(ctx context.Context, p *store.AcquireParams, st *state) (*store.Lease, bool, error) {
	if st.lease != nil {
		rec, err := decode(st.lease)
		if err != nil {
			return nil, true, err
		}
		if rec.Holder == p.Holder {
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
		reason, capNs := store.ReasonLockDelay, int64(0)
		if kv == st.rest {
			var r rest
			if json.Unmarshal(kv.Value, &r) == nil {
				reason, capNs = r.Reason, r.Ns
			}
		}
		left, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return nil, true, err
		}
		if !ok {
			left = time.Millisecond
		}
		if capNs > 0 {
			left = min(left, time.Duration(capNs))
		}
		return nil, true, &store.CooldownError{Key: p.Key, Reason: reason, Remaining: left}
	}
	return nil, false, nil
}

// Acquire grants the key in one Txn guarded by "no lease, no rest, no lock-delay key".
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	st, err := s.readState(ctx, p.Key)
	if err != nil {
		return nil, err
	}
	for attempt := range maxAttempts {
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
		l, next, err := s.grant(ctx, p)
		if err != nil || l != nil {
			return l, err
		}
		st = next
	}
	return nil, fmt.Errorf("etcd: acquire %q: too much contention", p.Key)
}

// grant tries the grant Txn; on a lost race it returns the state the Txn found instead.
func (s *Store) grant(ctx context.Context, p *store.AcquireParams) (*store.Lease, *state, error) {
	ttl := seconds(p.TTL)
	main, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	leases := []clientv3.LeaseID{main.ID}
	rec := &record{LeaseID: p.LeaseID, Holder: p.Holder, Metadata: p.Metadata, TTLSeconds: ttl,
		CooldownNs: int64(p.Cooldown), LockDelayNs: int64(p.LockDelay), AcquiredAt: time.Now().UTC().Round(0)}
	if len(rec.Metadata) == 0 {
		rec.Metadata = nil
	}
	var delayID clientv3.LeaseID
	if p.LockDelay > 0 {
		d, err := s.cli.Grant(ctx, ttl+seconds(p.LockDelay))
		if err != nil {
			s.revoke(leases...)
			return nil, nil, s.wrap(err)
		}
		delayID = d.ID
		rec.DelayLease = int64(d.ID)
		leases = append(leases, d.ID)
	}
	val, _ := json.Marshal(rec)
	lastVal, _ := json.Marshal(last{LeaseID: p.LeaseID, State: "held"})
	then := []clientv3.Op{
		clientv3.OpGet(s.lastKey(p.Key)),
		clientv3.OpPut(s.LeaseKey(p.Key), string(val), clientv3.WithLease(main.ID)),
		clientv3.OpPut(s.lastKey(p.Key), string(lastVal)),
	}
	if delayID != 0 {
		then = append(then, clientv3.OpPut(s.delayKey(p.Key), p.LeaseID, clientv3.WithLease(delayID)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(s.LeaseKey(p.Key)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.restKey(p.Key)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.delayKey(p.Key)), "=", 0),
	).Then(then...).Else(
		clientv3.OpGet(s.LeaseKey(p.Key)), clientv3.OpGet(s.restKey(p.Key)),
		clientv3.OpGet(s.delayKey(p.Key)), clientv3.OpGet(s.lastKey(p.Key)),
	).Commit()
	if err != nil {
		// The outcome is unknown: keep the leases, which expire on their own if unused.
		return nil, nil, s.wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(leases...)
		return nil, stateOf(resp.Responses), nil
	}
	tookOver := false
	if kv := first((*clientv3.GetResponse)(resp.Responses[0].GetResponseRange())); kv != nil {
		var l last
		tookOver = json.Unmarshal(kv.Value, &l) == nil && l.State == "held"
	}
	now := time.Now()
	return &store.Lease{
		Key: p.Key, ID: p.LeaseID, Holder: p.Holder, Token: uint64(resp.Header.Revision),
		AcquiredAt: rec.AcquiredAt, ExpiresAt: now.Add(p.TTL), TTLLeft: p.TTL, Metadata: rec.Metadata,
		TookOver: tookOver,
	}, nil, nil
}

// revoke ends etcd leases, best effort: a lease that is not revoked expires on its own.
func (s *Store) revoke(ids ...clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range ids {
		if id != 0 {
			_, _ = s.cli.Revoke(ctx, id)
		}
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
				return nil, s.wrap(err)
			}
		}
		if _, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, store.ErrNotHeld
			}
			return nil, s.wrap(err)
		}
		// The key must still be this lease's, on this etcd lease, after the keepalive.
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.LeaseKey(key)), "=", kv.ModRevision),
			clientv3.Compare(clientv3.LeaseValue(s.LeaseKey(key)), "=", kv.Lease),
		).Commit()
		if err != nil {
			return nil, s.wrap(err)
		}
		if !resp.Succeeded {
			return nil, store.ErrNotHeld
		}
		return s.lease(key, kv, rec, ttl), nil
	}
	main, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return nil, s.wrap(err)
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
			return nil, s.wrap(err)
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
		return nil, s.wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(newIDs...)
		return nil, store.ErrNotHeld
	}
	s.revoke(clientv3.LeaseID(kv.Lease), clientv3.LeaseID(rec.DelayLease))
	return s.lease(key, kv, &nrec, ttl), nil
}

// Renew extends the lease (Key, LeaseID) by p.TTL.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, s.LeaseKey(p.Key))
	if err != nil {
		return nil, s.wrap(err)
	}
	kv := first(resp)
	if kv == nil {
		return nil, store.ErrNotHeld
	}
	rec, err := decode(kv)
	if err != nil {
		return nil, err
	}
	if rec.LeaseID != p.LeaseID {
		return nil, store.ErrNotHeld
	}
	return s.extend(ctx, p.Key, kv, rec, p.TTL)
}

// Release deletes the lease key in a Txn guarded by its ModRevision, records the release and
// starts the cooldown, then revokes the etcd leases.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
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
			var l last
			if st.last != nil && json.Unmarshal(st.last.Value, &l) == nil && l.LeaseID == p.LeaseID && l.State == "released" {
				return &store.ReleaseResult{AlreadyReleased: true}, nil
			}
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

// end deletes the lease at kv if it is unchanged, puts the rest key for pause, and records how
// the lease ended. ok is false if the lease key changed meanwhile.
func (s *Store) end(ctx context.Context, key string, kv *mvccKV, rec *record, how, reason string, pause time.Duration) (bool, error) {
	lastVal, _ := json.Marshal(last{LeaseID: rec.LeaseID, State: how})
	ops := []clientv3.Op{
		clientv3.OpDelete(s.LeaseKey(key)), clientv3.OpDelete(s.delayKey(key)),
		clientv3.OpPut(s.lastKey(key), string(lastVal)),
	}
	var restID clientv3.LeaseID
	if pause > 0 {
		g, err := s.cli.Grant(ctx, seconds(pause))
		if err != nil {
			return false, s.wrap(err)
		}
		restID = g.ID
		rv, _ := json.Marshal(rest{Reason: reason, Ns: int64(pause)})
		ops = append(ops, clientv3.OpPut(s.restKey(key), string(rv), clientv3.WithLease(restID)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.LeaseKey(key)), "=", kv.ModRevision),
	).Then(ops...).Commit()
	if err != nil {
		return false, s.wrap(err)
	}
	if !resp.Succeeded {
		s.revoke(restID)
		return false, nil
	}
	s.revoke(clientv3.LeaseID(kv.Lease), clientv3.LeaseID(rec.DelayLease))
	return true, nil
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, s.LeaseKey(key))
	if err != nil {
		return nil, s.wrap(err)
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
	if err := s.check(); err != nil {
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
			return nil, s.wrap(err)
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
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	for range maxAttempts {
		resp, err := s.cli.Get(ctx, s.LeaseKey(p.Key))
		if err != nil {
			return nil, s.wrap(err)
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
