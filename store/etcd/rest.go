package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/store"
)

// ClearRest deletes the rest/<key> (cooldown or lock-delay after a force-release) and
// delay/<key> (lock-delay after an expiry) keys of a key that no lease holds, in one Txn guarded
// by "no lease key, rest and delay keys unchanged since read". No audit log. The deletions wake
// waiters in every process through the watch.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := s.closed.Check(); err != nil {
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
		if st.lease != nil || (st.rest == nil && st.delay == nil) {
			return nil, store.ErrNotFound
		}
		out := &store.Rest{Key: p.Key, Reason: store.ReasonLockDelay}
		for _, kv := range []*mvccKV{st.rest, st.delay} {
			if kv == nil {
				continue
			}
			reason, left, err := s.restLeft(ctx, st, kv)
			if err != nil {
				return nil, err
			}
			if left > out.Remaining {
				out.Reason, out.Remaining = reason, left
			}
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.LeaseKey(p.Key)), "=", 0)}
		for _, c := range []struct {
			key string
			kv  *mvccKV
		}{{s.restKey(p.Key), st.rest}, {s.delayKey(p.Key), st.delay}} {
			rev := int64(0)
			if c.kv != nil {
				rev = c.kv.ModRevision
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.key), "=", rev))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).
			Then(clientv3.OpDelete(s.restKey(p.Key)), clientv3.OpDelete(s.delayKey(p.Key))).Commit()
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		if resp.Succeeded {
			s.hub.Notify(p.Key)
			return out, nil
		}
	}
	return nil, fmt.Errorf("etcd: clear-rest %q: too much contention", p.Key)
}
