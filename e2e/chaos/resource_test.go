package chaos

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// event is one call of a CMD to the fenced resource, as the resource recorded it.
// The CMD (internal/fencedcmd) sends the fields with JSON tags.
type event struct {
	Seq      int           // order of recording (the resource's mutex)
	At       time.Duration // the resource's monotonic clock, since the test began
	Kind     string        `json:"kind"`   // enter, write, exit
	Key      string        `json:"key"`    // the lock key, or the job's resource
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

// resource is the fenced resource: it refuses any call whose token is lower than the highest
// token it has seen for the key, and records every call, accepted or refused, with its own
// monotonic timestamp. It runs inside the test process so all timestamps share one clock.
type resource struct {
	base    time.Time
	url     string
	mu      sync.Mutex
	events  []event
	highest map[string]uint64
}

func newResource(t *testing.T, base time.Time) *resource {
	r := &resource{base: base, highest: map[string]uint64{}}
	srv := httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// now is the harness's clock: the same monotonic base as the resource's timestamps.
func (r *resource) now() time.Duration { return time.Since(r.base) }

func (r *resource) handle(w http.ResponseWriter, req *http.Request) {
	var e event
	if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	e.Accepted = e.Token >= r.highest[e.Key]
	if e.Accepted {
		r.highest[e.Key] = e.Token
	}
	e.Seq = len(r.events)
	e.At = r.now()
	r.events = append(r.events, e)
	r.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]bool{"accepted": e.Accepted})
}

func (r *resource) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}
