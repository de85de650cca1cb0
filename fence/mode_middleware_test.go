package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonhq/baton/fence"
)

// modeResource records the holders inside the handler per mode, and any exclusive call that
// overlapped another call, or any shared call that overlapped an exclusive one; and the
// tokens it accepted, in order, with their modes.
type modeResource struct {
	readers, writers atomic.Int32
	bad              atomic.Int32
	mu               sync.Mutex
	accepted         []modeCall
}

type modeCall struct {
	mode  fence.Mode
	token uint64
}

func (m *modeResource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var tok uint64
	fmt.Sscan(r.Header.Get(fence.TokenHeader), &tok)
	mode := fence.Exclusive
	if r.Header.Get(fence.ModeHeader) == "shared" {
		mode = fence.Shared
	}
	if mode == fence.Shared {
		if m.readers.Add(1); m.writers.Load() != 0 {
			m.bad.Add(1)
		}
	} else if m.writers.Add(1) != 1 || m.readers.Load() != 0 {
		m.bad.Add(1)
	}
	m.mu.Lock()
	m.accepted = append(m.accepted, modeCall{mode, tok})
	m.mu.Unlock()
	for range 50 {
		runtime.Gosched()
	}
	if mode == fence.Shared {
		m.readers.Add(-1)
	} else {
		m.writers.Add(-1)
	}
	w.WriteHeader(http.StatusNoContent)
}

// Holders of both modes, with tokens in shuffled order, through two middleware instances sharing
// the store: no exclusive call overlaps another call, and in the order of admission every
// exclusive token is at least every token before it, and every shared token at least every
// exclusive token before it.
func TestMiddlewareConcurrentModes(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := open(t)
			mr := &modeResource{}
			a := httptest.NewServer(fence.Middleware(newStore(), mr))
			defer a.Close()
			b := httptest.NewServer(fence.Middleware(newStore(), mr))
			defer b.Close()
			// Waves of 8 concurrent holders, each wave's tokens above the last's and shuffled
			// within it, as holders granted one after another reach the resource: most pass,
			// some do not.
			const n, wave = 80, 8
			tokens := make([]int, n)
			statuses := make([]int, n)
			for w := 0; w < n; w += wave {
				var wg sync.WaitGroup
				for k, p := range rand.Perm(wave) {
					i := w + k
					tokens[i] = w + p
					url := a.URL
					if i%2 == 1 {
						url = b.URL
					}
					mode := fence.Exclusive
					if tokens[i]%3 != 0 {
						mode = fence.Shared
					}
					wg.Go(func() { statuses[i] = sendMode(t, url, uint64(tokens[i]+1), mode) })
				}
				wg.Wait()
			}
			for i, s := range statuses {
				if s != 204 && s != 409 {
					t.Errorf("token %d: status %d", tokens[i]+1, s)
				}
			}
			if o := mr.bad.Load(); o != 0 {
				t.Errorf("%d calls overlapped an exclusive one", o)
			}
			var either, exclusive uint64
			shared := 0
			for _, c := range mr.accepted {
				if c.mode == fence.Exclusive && c.token < either || c.mode == fence.Shared && c.token < exclusive {
					t.Fatalf("%s token %d admitted after token %d (exclusive %d): %v", c.mode, c.token, either, exclusive, mr.accepted)
				}
				either = max(either, c.token)
				if c.mode == fence.Exclusive {
					exclusive = c.token
				} else {
					shared++
				}
			}
			if shared < 2 {
				t.Errorf("only %d shared calls admitted of %d", shared, len(mr.accepted))
			}
		})
	}
}

func sendMode(t *testing.T, url string, token uint64, mode fence.Mode) int {
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader("data"))
	if err != nil {
		t.Error(err)
		return 0
	}
	fence.HeaderMode(req, "res", token, mode)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The mode header: "shared", "exclusive" or absent; anything else is a 400 naming it, and a
// store that cannot admit shared holders answers a shared call 501.
func TestMiddlewareModeHeader(t *testing.T) {
	srv := httptest.NewServer(fence.Middleware(fence.NewMemoryStore(), newResourceServer()))
	defer srv.Close()
	for _, c := range []struct {
		mode   string
		status int
	}{{"shared", 204}, {"exclusive", 204}, {"", 204}, {"Shared", 400}, {"read", 400}} {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, srv.URL, nil)
		fence.Header(req, "res", 1)
		if c.mode != "" {
			req.Header.Set(fence.ModeHeader, c.mode)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("mode %q: %d, want %d", c.mode, resp.StatusCode, c.status)
		}
	}
	plain := httptest.NewServer(fence.Middleware(exclusiveOnly{fence.NewMemoryStore()}, newResourceServer()))
	defer plain.Close()
	for mode, want := range map[fence.Mode]int{fence.Shared: 501, fence.Exclusive: 204} {
		if got := sendMode(t, plain.URL, 1, mode); got != want {
			t.Errorf("%s call to a store without modes: %d, want %d", mode, got, want)
		}
	}
}

// exclusiveOnly is a Store that is not a ModeStore, as one written before modes.
type exclusiveOnly struct{ s fence.Store }

func (e exclusiveOnly) Enter(ctx context.Context, resource string, token uint64) (func(), error) {
	return e.s.Enter(ctx, resource, token)
}

func TestHeaderFromEnvMode(t *testing.T) {
	t.Setenv("BATON_FENCING_TOKEN", "7")
	t.Setenv("BATON_LOCK_KEY", "k")
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	t.Setenv("BATON_FENCING_MODE", "shared")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ModeHeader) != "shared" {
		t.Errorf("shared: %v %v", err, req.Header)
	}
	t.Setenv("BATON_FENCING_MODE", "")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ModeHeader) != "" {
		t.Errorf("unset: %v %v, want no mode header", err, req.Header)
	}
	t.Setenv("BATON_FENCING_MODE", "sharde")
	var inv *fence.InvalidArgumentError
	if err := fence.HeaderFromEnv(req, ""); !errors.As(err, &inv) || inv.Field != "BATON_FENCING_MODE" {
		t.Errorf("a misspelt mode: %v", err)
	}
}
