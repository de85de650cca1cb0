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

// sameWorkCycle is the floor under Baton's etcd lock cycle: a raw clientv3 client sending
// exactly the requests Baton's etcd store sends per uncontended cycle for its guarantees, with
// none of the Locker or store code around them:
//
//   - grant: one Txn, if leases/<key>, rest/<key> and delay/<key> do not exist then read
//     last/<key> (TookOver, AlreadyReleased), put leases/<key> (a record of the size of
//     Baton's) on the key's etcd lease and put last/<key>, else read all four; alongside it a
//     keepalive of that reused etcd lease, so the key lives its TTL from the grant;
//   - release: one Txn guarded by the grant's CreateRevision and the etcd lease, deleting
//     leases/<key> and writing last/<key>.
//
// The keepalive is overlapped with the grant Txn as Baton does, but without a goroutine: one
// stream per key, sent before the Txn and read after it.
func sameWorkCycle(b *testing.B, c *clientv3.Client) storetest.CycleFunc {
	const prefix = "floor-bench/" // as long as Baton's "baton-bench/"
	var mu sync.Mutex
	keys := map[string]*sameWorkKey{}
	var holderSuffix [6]byte
	_, _ = rand.Read(holderSuffix[:])
	holder := "bench-host:1234:" + hex.EncodeToString(holderSuffix[:])
	ctxKA, cancelKA := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	b.Cleanup(cancelKA)
	return func(ctx context.Context, key string) error {
		mu.Lock()
		k := keys[key]
		if k == nil {
			g, err := c.Grant(ctx, 15)
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
		if err := k.ka.Send(&pb.LeaseKeepAliveRequest{ID: int64(k.lease)}); err != nil {
			return err
		}
		resp, err := c.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(leaseKey), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(restKey), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(delayKey), "=", 0),
		).Then(
			clientv3.OpGet(lastKey),
			clientv3.OpPut(leaseKey, rec, clientv3.WithLease(k.lease)),
			clientv3.OpPut(lastKey, `{"lease_id":"`+id+`","state":"held"}`),
		).Else(
			clientv3.OpGet(leaseKey), clientv3.OpGet(restKey), clientv3.OpGet(delayKey), clientv3.OpGet(lastKey),
		).Commit()
		kaResp, kaErr := k.ka.Recv()
		if err != nil {
			return err
		}
		if kaErr != nil {
			return kaErr
		}
		if kaResp.TTL <= 0 {
			return errors.New("same-work cycle: etcd lease expired")
		}
		if !resp.Succeeded {
			return fmt.Errorf("same-work cycle: %s is taken", key)
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && bytes.Contains(kvs[0].Value, []byte(`"state":"held"`)) {
			return fmt.Errorf("same-work cycle: %s taken over", key) // never, uncontended
		}
		rel, err := c.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(leaseKey), "=", resp.Header.Revision),
			clientv3.Compare(clientv3.LeaseValue(leaseKey), "=", int64(k.lease)),
		).Then(
			clientv3.OpDelete(leaseKey),
			clientv3.OpPut(lastKey, `{"lease_id":"`+id+`","state":"released"}`),
		).Commit()
		if err != nil {
			return err
		}
		if !rel.Succeeded {
			return errors.New("same-work cycle: release refused at revision " + strconv.FormatInt(resp.Header.Revision, 10))
		}
		return nil
	}
}
