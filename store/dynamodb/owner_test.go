package dynamodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

// TestItemWithoutOwner is a rolling upgrade: an item written by an earlier version has no own
// attribute and is served as owner "": its library holder renews, re-acquires and releases it
// as before, and an owner is refused. A grant without an owner writes no own attribute, and a
// grant after an owned lease removes it.
func TestItemWithoutOwner(t *testing.T) {
	s := openTest(t, dynalitetest.Start(t).Endpoint(), freshTable())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// As an earlier version wrote a grant (item.go's attributes without own).
	_, err := s.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"k": sv("k"), "st": sv(stHeld), "lid": sv("old-1"), "hold": sv("h"), "tok": nv(7), "rvn": sv(newRVN()),
		"dur": nv(int64(time.Minute)), "cd": nv(0), "ld": nv(0), "acq": nv(time.Now().UnixNano()), "pn": nv(0),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || got.ID != "old-1" || got.Owner != "" || got.Token != 7 {
		t.Fatalf("Get of an item without owner = %+v, %v", got, err)
	}
	var held *store.LockHeldError
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "x", Holder: "h", Owner: "alice", TTL: time.Minute}); !errors.As(err, &held) {
		t.Fatalf("re-acquire by an owner: %v; want *LockHeldError", err)
	}
	if _, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "old-1", Owner: "alice", TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("renew by an owner: %v; want ErrNotHeld", err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old-1", Owner: "alice"}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("release by an owner: %v; want ErrNotHeld", err)
	}
	if r, err := s.Renew(ctx, &store.RenewParams{Key: "k", LeaseID: "old-1", TTL: time.Minute}); err != nil || r.Owner != "" {
		t.Fatalf("renew by its holder = %+v, %v", r, err)
	}
	if r, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "old-2", Holder: "h", TTL: time.Minute}); err != nil || r.ID != "old-1" {
		t.Fatalf("re-acquire by its holder = %+v, %v; want lease old-1", r, err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "old-1"}); err != nil {
		t.Fatalf("release by its holder: %v", err)
	}
	own := func(key string) (string, bool) {
		t.Helper()
		out, err := s.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := out.Item["own"]
		return str(out.Item, "own"), ok
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "a-1", Holder: "h", Owner: "alice", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if o, _ := own("k"); o != "alice" {
		t.Fatalf("own after alice's grant = %q", o)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "k", LeaseID: "a-1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "k", LeaseID: "lib-1", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if o, ok := own("k"); ok {
		t.Fatalf("a grant without owner after alice's lease left own = %q; want no attribute, as earlier versions", o)
	}
}
