package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Why a request was refused for who sent it, or from where: the fixed label values of
// baton_http_auth_failures_total.
const (
	reasonMissing     = "missing"       // no bearer token (401)
	reasonUnknown     = "unknown_token" // a token the auth file does not have (401)
	reasonForbidden   = "forbidden"     // the token's role does not allow the call (403)
	reasonHost        = "host"          // a Host the server does not answer (403, host.go)
	reasonCrossOrigin = "cross_origin"  // a browser's request from another site's page (403, origin.go)
)

var refusalReasons = []string{reasonMissing, reasonUnknown, reasonForbidden, reasonHost, reasonCrossOrigin}

// refusalLogInterval is how often each reason may be logged: a client guessing tokens must not
// be able to fill the disk, and one line a second with a count says as much.
const refusalLogInterval = time.Second

// maxLoggedPath bounds the path in a refusal's log line (a path may be up to the header limit).
const maxLoggedPath = 200

// refusals counts refused requests and logs them, at most one line per reason and interval.
// The lines name the remote address, the method, the path and, for a role too weak, the
// token's name from the auth file, never any part of a token.
type refusals struct {
	count *prometheus.CounterVec
	log   *slog.Logger
	now   func() time.Time

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

func newRefusals(reg prometheus.Registerer, log *slog.Logger) *refusals {
	f := &refusals{log: log, now: time.Now, last: map[string]time.Time{}, suppressed: map[string]int{}}
	f.count = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_http_auth_failures_total",
		Help: "Requests refused for who sent them or from where, by reason: missing (no token), unknown_token, forbidden (role too weak), host (Host not allowed), cross_origin (another site's page).",
	}, []string{"reason"})
	for _, r := range refusalReasons {
		f.count.WithLabelValues(r)
	}
	reg.MustRegister(f.count)
	return f
}

// refused counts a refusal of r for reason and logs it unless the reason was logged within the
// interval; name is the token's name for reasonForbidden.
func (f *refusals) refused(r *http.Request, reason, name string) {
	f.count.WithLabelValues(reason).Inc()
	f.mu.Lock()
	now := f.now()
	if last, ok := f.last[reason]; ok && now.Sub(last) < refusalLogInterval {
		f.suppressed[reason]++
		f.mu.Unlock()
		return
	}
	suppressed := f.suppressed[reason]
	f.last[reason], f.suppressed[reason] = now, 0
	f.mu.Unlock()
	path := r.URL.Path
	if len(path) > maxLoggedPath {
		path = path[:maxLoggedPath] + "…"
	}
	attrs := []slog.Attr{slog.String("reason", reason), slog.String("remote", r.RemoteAddr),
		slog.String("method", methodLabel(r.Method)), slog.String("path", path)}
	if name != "" {
		attrs = append(attrs, slog.String("name", name))
	}
	attrs = append(attrs, slog.Int("suppressed", suppressed))
	f.log.LogAttrs(r.Context(), slog.LevelWarn, "request refused", attrs...)
}
