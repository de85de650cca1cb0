package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

func testCooldown(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("cool", baton.WithCooldown(time.Second))
	released := time.Now()
	if err := a.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	_, err := e.locker.TryAcquire(e.ctx, "cool")
	var resting *baton.RestingError
	if !errors.As(err, &resting) || !errors.Is(err, baton.ErrResting) || resting.Reason != store.ReasonCooldown {
		t.Fatalf("TryAcquire during cooldown: %v, want ErrResting (cooldown)", err)
	}
	if resting.Remaining <= 0 || resting.Remaining > time.Second {
		t.Fatalf("remaining %s, want in (0, 1s]", resting.Remaining)
	}
	b, err := e.locker.Acquire(e.ctx, "cool", baton.WithWaitTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(e.ctx)
	if elapsed := time.Since(released); elapsed < 900*time.Millisecond {
		t.Fatalf("granted %s after release, inside the 1s cooldown", elapsed)
	}
}

func expectLockDelay(t *testing.T, e *env, key string) {
	t.Helper()
	_, err := e.locker.TryAcquire(e.ctx, key)
	var resting *baton.RestingError
	if !errors.As(err, &resting) || resting.Reason != store.ReasonLockDelay || resting.Remaining <= 0 {
		t.Fatalf("TryAcquire during lock-delay: %v, want ErrResting (lock-delay)", err)
	}
	b, err := e.locker.Acquire(e.ctx, key, baton.WithWaitTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire after lock-delay: %v", err)
	}
	_ = b.Release(e.ctx)
}

func testLockDelayAfterExpiry(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	a := e.acquire("delay-expiry", baton.WithTTL(time.Second), baton.WithKeepalive(false), baton.WithLockDelay(2*time.Second))
	// Poll until the store no longer reports the lease live; the first answer after that must be
	// the lock-delay, not a grant.
	for {
		_, err := e.locker.TryAcquire(e.ctx, "delay-expiry")
		if errors.Is(err, baton.ErrLockHeld) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var resting *baton.RestingError
		if !errors.As(err, &resting) || resting.Reason != store.ReasonLockDelay {
			t.Fatalf("first answer after expiry of %s: %v, want ErrResting (lock-delay)", a.ID, err)
		}
		break
	}
	expectLockDelay(t, e, "delay-expiry")
}

func testLockDelayAfterForceRelease(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	e.acquire("delay-force", baton.WithLockDelay(time.Second))
	if _, err := e.locker.ForceRelease(e.ctx, "delay-force", "test"); err != nil {
		t.Fatal(err)
	}
	expectLockDelay(t, e, "delay-force")
}

func testMetadata(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	want := map[string]any{"job": "job-42", "attempt": float64(3), "nested": map[string]any{"ok": true}}
	a := e.acquire("meta", baton.WithMetadata(want))
	check := func(where string, raw []byte) {
		t.Helper()
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s metadata = %s (%v), want %v", where, raw, err, want)
		}
	}
	check("lease", a.Metadata)
	info, err := e.locker.Get(e.ctx, "meta")
	if err != nil {
		t.Fatal(err)
	}
	check("Get", info.Metadata)
	page, err := e.locker.ListLeases(e.ctx, baton.LeaseListParams{Prefix: "meta"})
	if err != nil || len(page.Leases) != 1 {
		t.Fatalf("ListLeases = %+v, %v", page, err)
	}
	check("ListLeases", page.Leases[0].Metadata)
	b := e.acquire("no-meta")
	if len(b.Metadata) != 0 {
		t.Fatalf("lease without metadata has %q", b.Metadata)
	}
}

func testList(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	for i := 1; i <= 5; i++ {
		e.acquire(fmt.Sprintf("a/%d", i))
	}
	e.acquire("a/special", baton.WithHolder("special-holder"))
	e.acquire("b/1")
	e.acquire("p%/x")
	e.acquire("p_/y")
	e.acquire("pa/z")
	gone := e.acquire("a/gone")
	if err := gone.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	var keys []string
	after, pages := "", 0
	for {
		page, err := e.locker.ListLeases(e.ctx, baton.LeaseListParams{Prefix: "a/", Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Leases) > 2 {
			t.Fatalf("page of %d leases with limit 2", len(page.Leases))
		}
		for _, l := range page.Leases {
			keys = append(keys, l.Key)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	want := []string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/special"}
	if !reflect.DeepEqual(keys, want) || pages > 4 {
		t.Fatalf("paged list of a/ = %v in %d pages, want %v (released keys excluded)", keys, pages, want)
	}
	listKeys := func(p baton.LeaseListParams) []string {
		t.Helper()
		page, err := e.locker.ListLeases(e.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, l := range page.Leases {
			ks = append(ks, l.Key)
		}
		return ks
	}
	if got := listKeys(baton.LeaseListParams{Prefix: "p%"}); !reflect.DeepEqual(got, []string{"p%/x"}) {
		t.Fatalf("prefix %q = %v: wildcard characters must match literally", "p%", got)
	}
	if got := listKeys(baton.LeaseListParams{Prefix: "p_"}); !reflect.DeepEqual(got, []string{"p_/y"}) {
		t.Fatalf("prefix %q = %v: wildcard characters must match literally", "p_", got)
	}
	if got := listKeys(baton.LeaseListParams{Holder: "special-holder"}); !reflect.DeepEqual(got, []string{"a/special"}) {
		t.Fatalf("holder filter = %v", got)
	}
	if got := listKeys(baton.LeaseListParams{}); len(got) != 10 {
		t.Fatalf("list all = %v, want 10 live keys", got)
	}
}

func testWithLock(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	ran := false
	err := e.locker.WithLock(e.ctx, "with", func(ctx context.Context) error {
		ran = true
		if _, err := e.locker.TryAcquire(ctx, "with"); !errors.Is(err, baton.ErrLockHeld) {
			return fmt.Errorf("key not held inside WithLock: %v", err)
		}
		return ctx.Err()
	})
	if err != nil || !ran {
		t.Fatalf("WithLock = %v (ran %v)", err, ran)
	}
	if _, err := e.locker.Get(e.ctx, "with"); !errors.Is(err, baton.ErrNotFound) {
		t.Fatalf("key still held after WithLock: %v", err)
	}
	boom := errors.New("boom")
	if err := e.locker.WithLock(e.ctx, "with", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("WithLock returned %v, want fn's error", err)
	}
}

func testWithLockLoss(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	err := e.locker.WithLock(e.ctx, "with-loss", func(ctx context.Context) error {
		e.backend.DeleteRow(t, "with-loss")
		select {
		case <-ctx.Done():
			return nil // the handler stops as told; WithLock must still report the loss
		case <-time.After(10 * time.Second):
			return errors.New("fn's context not cancelled after the lease was lost")
		}
	}, baton.WithTTL(time.Second))
	if !errors.Is(err, baton.ErrLeaseLost) {
		t.Fatalf("WithLock after loss = %v, want ErrLeaseLost", err)
	}
}

func testInvalidArguments(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	big := `{"x":"` + strings.Repeat("a", store.MaxMetadataLen) + `"}`
	cases := []struct {
		name  string
		key   string
		opts  []baton.Option
		field string
	}{
		{"empty key", "", nil, "key"},
		{"long key", strings.Repeat("k", store.MaxKeyLen+1), nil, "key"},
		{"newline in key", "a\nb", nil, "key"},
		{"NUL in key", "a\x00b", nil, "key"},
		{"DEL in key", "a\x7fb", nil, "key"},
		{"invalid UTF-8 key", "a\xffb", nil, "key"},
		{"empty holder", "valid", []baton.Option{baton.WithHolder("")}, ""}, // empty means default: valid
		{"long holder", "valid", []baton.Option{baton.WithHolder(strings.Repeat("h", store.MaxHolderLen+1))}, "holder"},
		{"control in holder", "valid", []baton.Option{baton.WithHolder("h\tx")}, "holder"},
		{"TTL too short", "valid", []baton.Option{baton.WithTTL(999 * time.Millisecond)}, "ttl"},
		{"TTL too long", "valid", []baton.Option{baton.WithTTL(24*time.Hour + time.Second)}, "ttl"},
		{"negative TTL", "valid", []baton.Option{baton.WithTTL(-time.Second)}, "ttl"},
		{"metadata array", "valid", []baton.Option{baton.WithMetadata(json.RawMessage(`[1,2]`))}, "metadata"},
		{"metadata string", "valid", []baton.Option{baton.WithMetadata("text")}, "metadata"},
		{"metadata not JSON", "valid", []baton.Option{baton.WithMetadata(json.RawMessage(`{"a":`))}, "metadata"},
		{"metadata over 4 KiB", "valid", []baton.Option{baton.WithMetadata(json.RawMessage(big))}, "metadata"},
		{"metadata invalid UTF-8", "valid", []baton.Option{baton.WithMetadata(json.RawMessage("{\"a\":\"\xff\"}"))}, "metadata"},
		{"metadata unpaired surrogate", "valid", []baton.Option{baton.WithMetadata(json.RawMessage(`{"a":"\ud800"}`))}, "metadata"},
		{"metadata NUL", "valid", []baton.Option{baton.WithMetadata(map[string]string{"a": "x\x00"})}, "metadata"},
		{"negative cooldown", "valid", []baton.Option{baton.WithCooldown(-time.Second)}, "cooldown"},
		{"negative lock-delay", "valid", []baton.Option{baton.WithLockDelay(-time.Second)}, "lock_delay"},
		{"negative wait", "valid", []baton.Option{baton.WithWaitTimeout(-time.Second)}, "wait_timeout"},
	}
	for _, c := range cases {
		l, err := e.locker.TryAcquire(e.ctx, c.key, c.opts...)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want success", c.name, err)
			} else {
				_ = l.Release(e.ctx)
			}
			continue
		}
		var inv *baton.InvalidArgumentError
		if !errors.Is(err, baton.ErrInvalidArgument) || !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%s: %v, want ErrInvalidArgument naming %q", c.name, err, c.field)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: message %q does not name the field", c.name, err)
		}
	}
	// Straight to the store, bypassing the Locker: the backend validates too.
	direct := []struct {
		name  string
		call  func() error
		field string
	}{
		{"acquire empty lease ID", func() error {
			_, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "valid", Holder: "h", TTL: time.Second})
			return err
		}, "lease_id"},
		{"acquire bad metadata", func() error {
			_, err := e.store.Acquire(e.ctx, &store.AcquireParams{Key: "valid", LeaseID: "x", Holder: "h", TTL: time.Second, Metadata: []byte(`7`)})
			return err
		}, "metadata"},
		{"renew bad TTL", func() error {
			_, err := e.store.Renew(e.ctx, &store.RenewParams{Key: "valid", LeaseID: "x", TTL: 0})
			return err
		}, "ttl"},
		{"release empty key", func() error { _, err := e.store.Release(e.ctx, &store.ReleaseParams{LeaseID: "x"}); return err }, "key"},
		{"get bad key", func() error { _, err := e.store.Get(e.ctx, "\x01"); return err }, "key"},
		{"list bad limit", func() error {
			_, err := e.store.List(e.ctx, &store.ListParams{Limit: store.MaxListLimit + 1})
			return err
		}, "limit"},
		// Filters PostgreSQL would refuse itself (SQLSTATE 22021) are refused on every backend.
		{"list NUL in prefix", func() error { _, err := e.store.List(e.ctx, &store.ListParams{Prefix: "a\x00"}); return err }, "prefix"},
		{"list invalid UTF-8 prefix", func() error { _, err := e.store.List(e.ctx, &store.ListParams{Prefix: "a\xff"}); return err }, "prefix"},
		{"list invalid UTF-8 cursor", func() error { _, err := e.store.List(e.ctx, &store.ListParams{After: "\xc3"}); return err }, "cursor"},
		{"list NUL in holder", func() error { _, err := e.store.List(e.ctx, &store.ListParams{Holder: "\x00"}); return err }, "holder"},
		{"events invalid UTF-8 key", func() error { _, err := e.store.Events(e.ctx, &store.EventsParams{Key: "\xff"}); return err }, "key"},
		{"force-release NUL in reason", func() error {
			_, err := e.store.ForceRelease(e.ctx, &store.ForceReleaseParams{Key: "valid", Reason: "a\x00b"})
			return err
		}, "reason"},
	}
	for _, c := range direct {
		var inv *store.InvalidArgumentError
		if err := c.call(); !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%s: %v, want invalid %q", c.name, err, c.field)
		}
	}
	// Nothing was written.
	page, err := e.locker.ListLeases(e.ctx, baton.LeaseListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Leases) != 0 {
		t.Fatalf("bad input left leases behind: %+v", page.Leases[0])
	}
	evs, err := e.store.Events(e.ctx, &store.EventsParams{}) // empty without audit
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Key != "valid" { // the one valid case above acquired and released "valid"
			t.Fatalf("bad input left an audit event behind: %+v", ev)
		}
	}
	if b, err := e.locker.TryAcquire(e.ctx, "valid"); err != nil {
		t.Fatalf("key touched by rejected calls is not free: %v", err)
	} else {
		_ = b.Release(e.ctx)
	}
}
