package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
	"github.com/batonhq/baton/store/storetest"
)

// rawCycle is the baseline: the minimum conditional writes that take and free a
// lock, on the same server through the same client: PutItem guarded by
// attribute_not_exists, then DeleteItem guarded by the owner. No token, TTL, cooldown or
// takeover.
func rawCycle(cli *dynamodb.Client, table string) storetest.CycleFunc {
	return func(ctx context.Context, key string) error {
		owner := newRVN()
		if _, err := cli.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                aws.String(table),
			Item:                     map[string]types.AttributeValue{keyAttr: sv(key), "owner": sv(owner)},
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": keyAttr},
		}); err != nil {
			return err
		}
		_, err := cli.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(table), Key: keyOf(key),
			ConditionExpression:       aws.String("#o = :o"),
			ExpressionAttributeNames:  map[string]string{"#o": "owner"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":o": sv(owner)},
		})
		return err
	}
}

// BenchmarkLockCycle pairs Baton's TryAcquire+Release (keepalive on) with rawCycle, at 1 and 8
// clients each on a key of its own, on one dynalite.
func BenchmarkLockCycle(b *testing.B) {
	d := dynalitetest.Start(b)
	s := openTest(b, d.Endpoint(), freshTable())
	raw := openTest(b, d.Endpoint(), freshTable()) // a table of its own for the baseline's items
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchLockCycle(b, locker, rawCycle(raw.Client(), raw.Table()))
}

// BenchmarkStoreCycle pairs the store's own Acquire+Release (no Locker: no keepalive goroutine,
// no holder-side bookkeeping) with rawCycle at 8 clients, to tell what the two conditional
// UpdateItems cost against PutItem+DeleteItem from what the Locker adds.
func BenchmarkStoreCycle(b *testing.B) {
	d := dynalitetest.Start(b)
	s := openTest(b, d.Endpoint(), freshTable())
	raw := openTest(b, d.Endpoint(), freshTable())
	storetest.BenchPaired(b, 8, rawCycle(raw.Client(), raw.Table()), func(ctx context.Context, key string) error {
		id := newRVN()
		if _, err := s.Acquire(ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: 15 * time.Second}); err != nil {
			return err
		}
		_, err := s.Release(ctx, &store.ReleaseParams{Key: key, LeaseID: id})
		return err
	})
}

// BenchmarkHandoff: 16 waiters on one key; every handoff goes to a waiter that is already
// waiting: a holder releases only once the previous holder is back among the waiters (its
// first attempt refused), so the key never goes back to the goroutine that just released it.
// Reported: the time from the start of the release to the next grant.
// one-store: the waiters share a Store, whose release wakes one of them in-process.
// own-stores: each waiter has a Store of its own, as 16 processes would, and learns of the
// release only by polling: every PollInterval (baton's default, 1 s, and 100 ms), jittered
// by ±20%.
func BenchmarkHandoff(b *testing.B) {
	d := dynalitetest.Start(b)
	b.Run("waiters=16/one-store", func(b *testing.B) {
		handoffToOthers(b, slices.Repeat([]store.Store{openTest(b, d.Endpoint(), freshTable())}, 16), nil)
	})
	for _, poll := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("waiters=16/own-stores/poll=%s", poll), func(b *testing.B) {
			table := freshTable()
			var stores []store.Store
			for range 16 {
				stores = append(stores, openTest(b, d.Endpoint(), table))
			}
			handoffToOthers(b, stores, &baton.Config{PollInterval: poll})
		})
	}
}

// refusals signals (coalesced) every Acquire its store refuses because the key is held.
type refusals struct {
	store.Store
	refused chan struct{}
}

func (r *refusals) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	l, err := r.Store.Acquire(ctx, p)
	if errors.Is(err, store.ErrLockHeld) {
		select {
		case r.refused <- struct{}{}:
		default:
		}
	}
	return l, err
}

func handoffToOthers(b *testing.B, stores []store.Store, cfg *baton.Config) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiters := make([]*refusals, len(stores))
	for i, s := range stores {
		waiters[i] = &refusals{Store: s, refused: make(chan struct{}, 1)}
	}
	var (
		mu        sync.Mutex
		changed   = sync.NewCond(&mu)
		grants    int
		prev      = -1
		released  time.Time
		latencies []time.Duration
	)
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	b.ResetTimer()
	for i, w := range waiters {
		l, err := baton.NewLocker(w, cfg)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for {
				lease, err := l.Acquire(ctx, "handoff", baton.WithKeepalive(false))
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				mu.Lock()
				if !released.IsZero() {
					latencies = append(latencies, time.Since(released))
				}
				grants++
				mine, last, done := grants, prev, grants > b.N
				prev = i
				changed.Broadcast()
				mu.Unlock()
				if last >= 0 && !done {
					select { // the previous holder is waiting again
					case <-waiters[last].refused:
					case <-ctx.Done():
						return
					}
				}
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := lease.Release(context.Background()); err != nil {
					errs <- err
				}
				if done {
					cancel()
					mu.Lock()
					changed.Broadcast()
					mu.Unlock()
					return
				}
				// Wait again only once another waiter has the key.
				mu.Lock()
				for grants == mine && ctx.Err() == nil {
					changed.Wait()
				}
				mu.Unlock()
				select { // a refusal from before this grant says nothing
				case <-w.refused:
				default:
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	storetest.ReportPercentiles(b, latencies)
}
