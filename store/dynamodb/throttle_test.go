package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
	"github.com/batonhq/baton/store/storetest"
)

// faultProxy stands between the store and dynalite and spoils every few data-plane requests
// (GetItem, UpdateItem, Scan), either as DynamoDB throttles (400
// ProvisionedThroughputExceededException, the request not applied) or as a reply lost after
// the request was applied (the server's answer replaced by a 500, which the SDK retries).
type faultProxy struct {
	srv      *httptest.Server
	every    int64
	applied  bool // forward first, then answer 500 (a lost reply); else answer 400 throttled
	seen     atomic.Int64
	spoiled  atomic.Int64
	forward  *httputil.ReverseProxy
	disabled atomic.Bool
}

func startFaultProxy(t *testing.T, target string, every int64, applied bool) *faultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{every: every, applied: applied, forward: httputil.NewSingleHostReverseProxy(u)}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	data := strings.HasSuffix(op, ".GetItem") || strings.HasSuffix(op, ".UpdateItem") || strings.HasSuffix(op, ".Scan")
	// Throttled requests: every few, counted. Lost replies: at random, one in every, since a
	// period would line up with a call's own requests (read, write, retry) and spoil the same
	// one each time, which no real network does.
	if !data || p.disabled.Load() {
		p.forward.ServeHTTP(w, r)
		return
	}
	spoil := p.seen.Add(1)%p.every == 0
	if p.applied {
		spoil = rand.Int64N(p.every) == 0
	}
	if !spoil {
		p.forward.ServeHTTP(w, r)
		return
	}
	p.spoiled.Add(1)
	typ, code, msg := "ProvisionedThroughputExceededException", http.StatusBadRequest,
		"The level of configured provisioned throughput for the table was exceeded."
	if p.applied {
		rec := httptest.NewRecorder()
		p.forward.ServeHTTP(rec, r) // applied; its answer is lost
		_, _ = io.Copy(io.Discard, rec.Result().Body)
		typ, code, msg = "InternalServerError", http.StatusInternalServerError, "Internal server error"
	}
	writeAWSError(w, code, typ, msg)
}

// writeAWSError answers as DynamoDB does when it refuses a request, with the CRC32 header the
// SDK checks.
func writeAWSError(w http.ResponseWriter, code int, typ, msg string) {
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, typ, msg)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// tokenOf reads the fencing counter of key directly.
func tokenOf(t *testing.T, s *Store, key string) uint64 {
	t.Helper()
	it, _, err := s.read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if it == nil {
		return 0
	}
	return it.token
}

// TestThrottlingRetried: with every third data request throttled, contended acquire/release
// cycles through baton.Locker all succeed or find the key held (never an error), never
// overlap, and the per-key counters add up to exactly the grants made: no grant was lost or
// made twice behind the caller's back.
func TestThrottlingRetried(t *testing.T) {
	d := dynalitetest.Start(t)
	table := freshTable()
	direct := openTest(t, d.Endpoint(), table)
	p := startFaultProxy(t, d.Endpoint(), 3, false)
	s := openTest(t, p.srv.URL, table)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const keys = 3
	stats, err := storetest.CheckExclusion(ctx, s, 8, 40, keys)
	if err != nil {
		t.Fatalf("%v (%d requests throttled)", err, p.spoiled.Load())
	}
	if stats.Held == 0 || p.spoiled.Load() < 50 {
		t.Fatalf("no contention or too little throttling: %+v, %d throttled", stats, p.spoiled.Load())
	}
	var tokens uint64
	for k := range keys {
		key := fmt.Sprintf("exclusion/%d", k)
		tokens += tokenOf(t, direct, key)
		if _, err := direct.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s still held after every lease was released: %v", key, err)
		}
	}
	if tokens != uint64(stats.Grants) {
		t.Fatalf("counters add up to %d grants, the clients saw %d", tokens, stats.Grants)
	}
	t.Logf("%+v; %d of %d data requests throttled and retried", stats, p.spoiled.Load(), p.seen.Load())
}

// TestLostRepliesRetried: a reply lost after the write was applied (answered 500, retried by
// the SDK) neither loses the grant (the retry finds the lease its own and keeps it) nor makes
// a second one (each cycle's token is exactly one more than the last), and a release retried
// after it was applied reports success.
func TestLostRepliesRetried(t *testing.T) {
	d := dynalitetest.Start(t)
	table := freshTable()
	direct := openTest(t, d.Endpoint(), table)
	p := startFaultProxy(t, d.Endpoint(), 3, true)
	s := openTest(t, p.srv.URL, table)
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const workers, cycles = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			key := fmt.Sprintf("lost/%d", w)
			for c := range cycles {
				l, err := locker.TryAcquire(ctx, key, baton.WithKeepalive(false))
				if err != nil {
					errs <- fmt.Errorf("%s cycle %d: acquire: %w", key, c, err)
					return
				}
				if l.Token != uint64(c+1) {
					errs <- fmt.Errorf("%s cycle %d: token %d, want %d", key, c, l.Token, c+1)
					return
				}
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("%s cycle %d: release: %w", key, c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p.disabled.Store(true)
	for w := range workers {
		key := fmt.Sprintf("lost/%d", w)
		if got := tokenOf(t, direct, key); got != cycles {
			t.Errorf("%s: counter %d after %d cycles", key, got, cycles)
		}
	}
	if p.spoiled.Load() < 20 {
		t.Fatalf("only %d replies lost: the test did not exercise retries", p.spoiled.Load())
	}
	t.Logf("%d of %d data replies lost after being applied", p.spoiled.Load(), p.seen.Load())
}
