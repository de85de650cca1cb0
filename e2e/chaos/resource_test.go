package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// event is one call of a CMD to the fenced resource, as the resource recorded it.
// The CMD (internal/fencedcmd) sends the fields with JSON tags.
type event struct {
	Seq      int           // order of recording (the resource's mutex)
	At       time.Duration // the resource's monotonic clock, since the test began
	Kind     string        `json:"kind"`   // enter, write, exit
	Key      string        `json:"key"`    // the lock key, or the job's resource, or a limit's slot key
	Mode     string        `json:"mode"`   // shared, or exclusive ("" too)
	Client   string        `json:"client"` // the baton run client or baton worker that ran CMD
	Run      string        `json:"run"`    // one CMD execution
	Token    uint64        `json:"token"`  // BATON_FENCING_TOKEN
	Job      int64         `json:"job"`    // BATON_JOB_ID (jobs only)
	Status   string        `json:"status"` // exit: ok, term (after SIGTERM), refused (fenced out)
	PID      int           `json:"pid"`
	Accepted bool
}

// exitFenced is CMD's exit code when the resource refused it (a newer token was seen).
const exitFenced = 42

// resource is the fenced resource. Every call of a CMD goes through fence.Middleware over a
// fence.MemoryStore, the helpers users put in front of their own services: it refuses (409
// stale_token) an exclusive call whose Baton-Fencing-Token is lower than the highest the
// resource has seen for the key, and a shared call (Baton-Fencing-Mode: shared) whose token is
// lower than the highest exclusive one; it admits one exclusive call per key at a time, or
// shared calls together. The resource records every call, accepted
// or refused, with its own monotonic timestamp; it runs inside the test process so all
// timestamps share one clock. An accepted call is recorded inside the middleware, while the
// fence holds the key, so the record's order is the order in which the fence admitted calls.
// The keys of a tree (setTree) are fenced by a treeFence instead, which also judges the call's
// intention on the key's ancestors; it admits and records under the resource's mutex.
type resource struct {
	base   time.Time
	url    string
	fences *fence.MemoryStore
	mu     sync.Mutex
	events []event
	tree   *treeFence
}

func newResource(t *testing.T, base time.Time) *resource {
	r := &resource{base: base, fences: fence.NewMemoryStore()}
	srv := httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// setTree makes the resource fence the keys of the tree prefix (such as "chaos/tree/") with a
// treeFence. Call it before any call reaches the resource.
func (r *resource) setTree(prefix string) {
	r.tree = &treeFence{keys: treeKeys(prefix), marks: map[string]*[4]uint64{}}
}

// now is the harness's clock: the same monotonic base as the resource's timestamps.
func (r *resource) now() time.Duration { return time.Since(r.base) }

// handle decodes the call, checks that its fencing headers (set by fencedcmd with
// fence.HeaderFromEnv) name the same key and token as its body, and passes it through the
// fence middleware: accepted calls are recorded by the handler behind it, refused ones (409)
// after it answered.
func (r *resource) handle(w http.ResponseWriter, req *http.Request) {
	var e event
	if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if got, want := req.Header.Get(fence.ResourceHeader), e.Key; got != want {
		http.Error(w, fmt.Sprintf("%s header %q, body key %q", fence.ResourceHeader, got, want), http.StatusBadRequest)
		return
	}
	if got, want := req.Header.Get(fence.TokenHeader), strconv.FormatUint(e.Token, 10); got != want {
		http.Error(w, fmt.Sprintf("%s header %q, body token %s", fence.TokenHeader, got, want), http.StatusBadRequest)
		return
	}
	if got := req.Header.Get(fence.ModeHeader); e.shared() != (got == string(fence.Shared)) {
		http.Error(w, fmt.Sprintf("%s header %q, body mode %q", fence.ModeHeader, got, e.Mode), http.StatusBadRequest)
		return
	}
	if r.tree != nil && r.tree.keys.has(e.Key) {
		r.mu.Lock()
		ok := r.tree.admit(e.Key, e.shared(), e.Token)
		r.recordLocked(e, ok)
		r.mu.Unlock()
		if !ok {
			http.Error(w, "stale_token", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	fence.Middleware(r.fences, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.record(e, true)
		w.WriteHeader(http.StatusNoContent)
	})).ServeHTTP(sw, req)
	if sw.status == http.StatusConflict {
		r.record(e, false)
	}
}

// shared reports whether the call was made in shared mode.
func (e *event) shared() bool { return e.Mode == string(fence.Shared) }

func (r *resource) record(e event, accepted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordLocked(e, accepted)
}

func (r *resource) recordLocked(e event, accepted bool) {
	e.Accepted = accepted
	e.Seq = len(r.events)
	e.At = r.now()
	r.events = append(r.events, e)
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (r *resource) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}
