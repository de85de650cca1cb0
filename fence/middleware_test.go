package fence_test

import (
	"encoding/json"
	"fmt"
	"io"
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

type problemDoc struct {
	Type         string `json:"type"`
	Status       int    `json:"status"`
	Code         string `json:"code"`
	Detail       string `json:"detail"`
	Field        string `json:"field"`
	Rule         string `json:"rule"`
	Resource     string `json:"resource"`
	Token        uint64 `json:"token"`
	CurrentToken uint64 `json:"current_token"`
}

// resourceServer is an HTTP resource behind fence.Middleware that records, per resource, the
// tokens of the writes it accepted in the order it made them, and any overlap of two writes.
type resourceServer struct {
	mu       sync.Mutex
	writes   map[string][]uint64
	inside   map[string]*atomic.Int32
	overlaps atomic.Int32
}

func newResourceServer() *resourceServer {
	return &resourceServer{writes: map[string][]uint64{}, inside: map[string]*atomic.Int32{}}
}

func (rs *resourceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res := r.Header.Get(fence.ResourceHeader)
	var tok uint64
	fmt.Sscan(r.Header.Get(fence.TokenHeader), &tok)
	rs.mu.Lock()
	in := rs.inside[res]
	if in == nil {
		in = new(atomic.Int32)
		rs.inside[res] = in
	}
	rs.mu.Unlock()
	if in.Add(1) != 1 {
		rs.overlaps.Add(1)
	}
	// A write takes a while: a holder admitted earlier but still writing must not be
	// overtaken (or joined) by a later one.
	for range 50 {
		runtime.Gosched()
	}
	rs.mu.Lock()
	rs.writes[res] = append(rs.writes[res], tok)
	rs.mu.Unlock()
	in.Add(-1)
	w.WriteHeader(http.StatusNoContent)
}

func send(t *testing.T, url, resource, token string) (int, problemDoc) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader("data"))
	if err != nil {
		t.Fatal(err)
	}
	if resource != "" {
		req.Header.Set(fence.ResourceHeader, resource)
	}
	if token != "" {
		req.Header.Set(fence.TokenHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var p problemDoc
	if resp.StatusCode != http.StatusNoContent {
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("status %d with Content-Type %q: %s", resp.StatusCode, ct, body)
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("status %d, body %s: %v", resp.StatusCode, body, err)
		}
		if p.Status != resp.StatusCode {
			t.Errorf("problem status %d on a %d answer", p.Status, resp.StatusCode)
		}
	}
	return resp.StatusCode, p
}

// stores are the fence stores a middleware can use; each call makes a store on the same
// backing data, as each process of a service would.
func stores(t *testing.T) map[string]func(t *testing.T) func() fence.Store {
	sqlStore := func(name string) func(t *testing.T) func() fence.Store {
		return func(t *testing.T) func() fence.Store {
			b := backends(t)[name](t)
			if err := fence.Migrate(testCtx(t), b.handle); err != nil {
				t.Fatal(err)
			}
			return func() fence.Store { return fence.NewSQLStore(b.db) }
		}
	}
	return map[string]func(t *testing.T) func() fence.Store{
		"memory": func(t *testing.T) func() fence.Store {
			s := fence.NewMemoryStore()
			return func() fence.Store { return s }
		},
		"sqlite":   sqlStore("sqlite"),
		"postgres": sqlStore("postgres-database/sql"),
	}
}

func TestMiddlewareRefusesStaleTokens(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rs := newResourceServer()
			srv := httptest.NewServer(fence.Middleware(open(t)(), rs))
			defer srv.Close()
			for _, step := range []struct {
				resource, token string
				status          int
			}{
				{"db-1", "2", 204},
				{"db-1", "2", 204}, // the same holder again
				{"db-1", "1", 409}, // the paused holder wakes
				{"db-2", "1", 204}, // another resource is fenced on its own
				{"db-1", "3", 204},
				{"db-1", "2", 409},
			} {
				status, p := send(t, srv.URL, step.resource, step.token)
				if status != step.status {
					t.Fatalf("%s token %s: status %d (%+v), want %d", step.resource, step.token, status, p, step.status)
				}
				if status == 409 {
					var cur uint64 = 2
					if step.token == "2" {
						cur = 3
					}
					if p.Code != "stale_token" || p.Resource != step.resource || fmt.Sprint(p.Token) != step.token || p.CurrentToken != cur {
						t.Errorf("stale answer %+v, want resource %s, token %s, current %d", p, step.resource, step.token, cur)
					}
				}
			}
			if got := fmt.Sprint(rs.writes["db-1"]); got != "[2 2 3]" {
				t.Errorf("db-1 accepted writes with tokens %s, want [2 2 3]", got)
			}
		})
	}
}

func TestMiddlewareRejectsMalformedHeaders(t *testing.T) {
	rs := newResourceServer()
	srv := httptest.NewServer(fence.Middleware(fence.NewMemoryStore(), rs))
	defer srv.Close()
	for _, c := range []struct{ resource, token, field string }{
		{"", "1", fence.ResourceHeader},
		{"r", "", fence.TokenHeader},
		{"r", "abc", fence.TokenHeader},
		{"r", "0", fence.TokenHeader},
		{"r", "-1", fence.TokenHeader},
		{"r", "1.5", fence.TokenHeader},
		{"r", "9223372036854775808", fence.TokenHeader},
		{"r", "99999999999999999999999", fence.TokenHeader},
		{strings.Repeat("x", fence.MaxResourceLen+1), "1", fence.ResourceHeader},
	} {
		status, p := send(t, srv.URL, c.resource, c.token)
		if status != 400 || p.Code != "invalid_argument" || p.Field != c.field || p.Rule == "" {
			t.Errorf("resource %.10q token %q: %d %+v, want 400 naming %s", c.resource, c.token, status, p, c.field)
		}
	}
	if len(rs.writes) != 0 {
		t.Errorf("malformed requests reached the handler: %v", rs.writes)
	}
}

// Holders with tokens in random order, through two middleware instances sharing the store's
// data (two processes of a service): every accepted write has a token no lower than the
// accepted writes before it, and no two writes of a resource overlap.
func TestMiddlewareConcurrentHolders(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newStore := open(t)
			rs := newResourceServer()
			a := httptest.NewServer(fence.Middleware(newStore(), rs))
			defer a.Close()
			b := httptest.NewServer(fence.Middleware(newStore(), rs))
			defer b.Close()
			const n = 60
			tokens := rand.Perm(n)
			statuses := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				url := a.URL
				if i%2 == 1 {
					url = b.URL
				}
				wg.Go(func() { statuses[i], _ = send(t, url, "res", fmt.Sprint(tokens[i]+1)) })
			}
			wg.Wait()
			accepted := 0
			for i, s := range statuses {
				switch s {
				case 204:
					accepted++
				case 409:
				default:
					t.Errorf("token %d: status %d", tokens[i]+1, s)
				}
			}
			w := rs.writes["res"]
			if len(w) != accepted || accepted == 0 {
				t.Fatalf("%d writes, %d accepted", len(w), accepted)
			}
			for i := 1; i < len(w); i++ {
				if w[i] < w[i-1] {
					t.Fatalf("write with token %d after one with %d: %v", w[i], w[i-1], w)
				}
			}
			if w[len(w)-1] != n {
				t.Errorf("last write token %d, want %d", w[len(w)-1], n)
			}
			if o := rs.overlaps.Load(); o != 0 {
				t.Errorf("%d writes overlapped another", o)
			}
		})
	}
}

func TestHeaderFromEnv(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	t.Setenv("BATON_FENCING_TOKEN", "")
	t.Setenv("BATON_RESOURCE", "")
	t.Setenv("BATON_LOCK_KEY", "")
	if err := fence.HeaderFromEnv(req, ""); err == nil || !strings.Contains(err.Error(), "BATON_FENCING_TOKEN") {
		t.Errorf("without a token: %v", err)
	}
	t.Setenv("BATON_FENCING_TOKEN", "42")
	if err := fence.HeaderFromEnv(req, ""); err == nil || !strings.Contains(err.Error(), "resource") {
		t.Errorf("without a resource: %v", err)
	}
	t.Setenv("BATON_LOCK_KEY", "lock")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ResourceHeader) != "lock" || req.Header.Get(fence.TokenHeader) != "42" {
		t.Errorf("under baton run: %v %v", err, req.Header)
	}
	t.Setenv("BATON_RESOURCE", "job-resource")
	if err := fence.HeaderFromEnv(req, ""); err != nil || req.Header.Get(fence.ResourceHeader) != "job-resource" {
		t.Errorf("under baton worker: %v %v", err, req.Header)
	}
	if err := fence.HeaderFromEnv(req, "mine"); err != nil || req.Header.Get(fence.ResourceHeader) != "mine" {
		t.Errorf("explicit resource: %v %v", err, req.Header)
	}
}
