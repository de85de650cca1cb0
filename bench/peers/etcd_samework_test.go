package peers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonhq/baton/store/storetest"
)

// sameWorkKey is what the same-work client keeps per key: an etcd lease of its own, reused
// from cycle to cycle, and a LeaseKeepAlive stream to restart its TTL.
type sameWorkKey struct {
	lease clientv3.LeaseID
	ka    pb.Lease_LeaseKeepAliveClient
}

// etcdSameWorkCycle is the floor under Baton's etcd lock cycle: a raw clientv3 client sending
// exactly the requests Baton's etcd store sends per uncontended cycle for its guarantees, with
// none of the Locker or store code around them:
//
//   - grant: one Txn, if leases/<key>, rest/<key> and delay/<key> do not exist then put
//     leases/<key> (a record of the size of Baton's) on the key's etcd lease and put last/<key>
//     returning its previous value (TookOver), else read the three; alongside it a keepalive of
//     that reused etcd lease, so the key lives its TTL from the grant;
//   - release: one Txn guarded by the grant's CreateRevision and the etcd lease, deleting
//     leases/<key> and writing last/<key>.
//
// The keepalive is overlapped with the grant Txn as Baton does, but without a goroutine: one
// stream per key, sent before the Txn and read after it. Baton's store also keeps a watch on its
// prefix (wake-ups of waiters), which this client does not.
func etcdSameWorkCycle(b *testing.B, c *clientv3.Client) storetest.CycleFunc {
	return sameWorkParts(b, c, "floor-bench/", cycleParts{keepalive: true, last: true, restGuards: true})
}

// cycleParts selects what sameWorkParts sends. Only keepalive, last and restGuards together keep
// Baton's guarantees; the others exist to price each part (BenchmarkEtcdSameWorkParts).
type cycleParts struct {
	keepalive  bool // restart the reused etcd lease's TTL at each grant
	last       bool // write last/<key> (reading its previous value) in the grant and in the release
	restGuards bool // the grant also requires rest/<key> and delay/<key> to be absent
	// watch keeps a watch on the prefix for deletions, as Baton's store does to wake waiters
	// (not a request per cycle, but each release's deletion is sent to it).
	watch bool
}

func sameWorkParts(b *testing.B, c *clientv3.Client, prefix string, parts cycleParts) storetest.CycleFunc {
	var mu sync.Mutex
	keys := map[string]*sameWorkKey{}
	var holderSuffix [6]byte
	_, _ = rand.Read(holderSuffix[:])
	holder := "bench-host:1234:" + hex.EncodeToString(holderSuffix[:])
	ctxKA, cancelKA := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	b.Cleanup(cancelKA)
	if parts.watch {
		wch := c.Watch(ctxKA, prefix, clientv3.WithPrefix(), clientv3.WithFilterPut())
		go func() {
			for range wch { // drained until the benchmark ends
			}
		}()
	}
	ttl := int64(15)
	if !parts.keepalive {
		ttl = 3600 // never restarted: it must outlive the benchmark
	}
	return func(ctx context.Context, key string) error {
		mu.Lock()
		k := keys[key]
		if k == nil {
			g, err := c.Grant(ctx, ttl)
			if err != nil {
				mu.Unlock()
				return err
			}
			ka, err := pb.NewLeaseClient(c.ActiveConnection()).LeaseKeepAlive(ctxKA)
			if err != nil {
				mu.Unlock()
				return err
			}
			k = &sameWorkKey{lease: g.ID, ka: ka}
			keys[key] = k
		}
		mu.Unlock()
		leaseKey, restKey, delayKey, lastKey := prefix+"leases/"+key, prefix+"rest/"+key, prefix+"delay/"+key, prefix+"last/"+key

		var idb [16]byte
		_, _ = rand.Read(idb[:])
		id := hex.EncodeToString(idb[:])
		rec := `{"lease_id":"` + id + `","holder":"` + holder + `","ttl_s":15,"acquired_at":"` +
			time.Now().UTC().Format(time.RFC3339Nano) + `"}`
		if parts.keepalive {
			if err := k.ka.Send(&pb.LeaseKeepAliveRequest{ID: int64(k.lease)}); err != nil {
				return err
			}
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(leaseKey), "=", 0)}
		elseOps := []clientv3.Op{clientv3.OpGet(leaseKey)}
		if parts.restGuards {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(restKey), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(delayKey), "=", 0))
			elseOps = append(elseOps, clientv3.OpGet(restKey), clientv3.OpGet(delayKey))
		}
		then := []clientv3.Op{clientv3.OpPut(leaseKey, rec, clientv3.WithLease(k.lease))}
		if parts.last {
			then = append(then, clientv3.OpPut(lastKey, `{"lease_id":"`+id+`","state":"held"}`, clientv3.WithPrevKV()))
		}
		resp, err := c.Txn(ctx).If(cmps...).Then(then...).Else(elseOps...).Commit()
		if parts.keepalive {
			kaResp, kaErr := k.ka.Recv()
			if err == nil && kaErr != nil {
				err = kaErr
			}
			if err == nil && kaResp.TTL <= 0 {
				err = errors.New("same-work cycle: etcd lease expired")
			}
		}
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return fmt.Errorf("same-work cycle: %s is taken", key)
		}
		if parts.last {
			if kv := resp.Responses[1].GetResponsePut().GetPrevKv(); kv != nil && bytes.Contains(kv.Value, []byte(`"state":"held"`)) {
				return fmt.Errorf("same-work cycle: %s taken over", key) // never, uncontended
			}
		}
		relOps := []clientv3.Op{clientv3.OpDelete(leaseKey)}
		if parts.last {
			relOps = append(relOps, clientv3.OpPut(lastKey, `{"lease_id":"`+id+`","state":"released"}`))
		}
		rel, err := c.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(leaseKey), "=", resp.Header.Revision),
			clientv3.Compare(clientv3.LeaseValue(leaseKey), "=", int64(k.lease)),
		).Then(relOps...).Commit()
		if err != nil {
			return err
		}
		if !rel.Succeeded {
			return errors.New("same-work cycle: release refused at revision " + strconv.FormatInt(resp.Header.Revision, 10))
		}
		return nil
	}
}

// BenchmarkEtcdSameWorkParts prices each part of the same-work cycle: the whole floor (ns/op,
// cpu-us/op) against the Mutex, the floor without each part and the floor with a watch on its
// prefix as Baton's store keeps (x-<variant> = that variant's time / the floor's). "bare" is one compare and one put on the grant, one guarded
// delete on the release: about the Mutex's work, on an etcd lease of its own. The variants
// without a part give up a guarantee (no keepalive: the TTL does not restart at the grant; no
// last/<key>: no TookOver or AlreadyReleased); they are measures, not designs.
func BenchmarkEtcdSameWorkParts(b *testing.B) {
	ep := startEtcd(b)
	c := etcdClient(b, ep)
	storetest.BenchAgainst(b, 8, etcdSameWorkCycle(b, etcdClient(b, ep)),
		storetest.Baseline{Name: "mutex", Cycle: mutexCycle(b, etcdClient(b, ep))},
		storetest.Baseline{Name: "noKeepalive", Cycle: sameWorkParts(b, c, "v1/", cycleParts{last: true, restGuards: true})},
		storetest.Baseline{Name: "noLast", Cycle: sameWorkParts(b, c, "v2/", cycleParts{keepalive: true, restGuards: true})},
		storetest.Baseline{Name: "noRestGuards", Cycle: sameWorkParts(b, c, "v3/", cycleParts{keepalive: true, last: true})},
		storetest.Baseline{Name: "withWatch", Cycle: sameWorkParts(b, c, "v5/", cycleParts{keepalive: true, last: true, restGuards: true, watch: true})},
		storetest.Baseline{Name: "bare", Cycle: sameWorkParts(b, c, "v4/", cycleParts{})},
	)
}
