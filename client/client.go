// Package client is a store.Store and a store.JobStore over Baton's HTTP API
// (docs/http-api.md), so that a program talks to a `baton serve` server through the same
// baton.Locker, baton.Queue and baton.Worker it would use over a database:
//
//	st, err := client.NewStore(client.Config{BaseURL: "http://127.0.0.1:7725", Token: token})
//	if err != nil { … }
//	defer st.Close()
//	locker, err := baton.NewLocker(st, nil)
//
// Keepalive, the holder-side deadline and the fencing token work exactly as with a local store.
// The server chooses lease IDs (AcquireParams.LeaseID is validated, then ignored), and waits for
// a key itself: a waiting Acquire is a long-poll that the server ends early, with the lease, when
// the key is released. Where the server's store keeps a line per key, the waiter keeps its place
// in it across its long-polls (one lease ID), whether a poll ran out or was abandoned, and
// leaves it when it gives up (LeaveLine, which a baton.Locker calls). Likewise a worker's
// ClaimJobs waits in the server (Config.ClaimWait) and is answered as soon as a job of its kinds
// becomes claimable.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/batonhq/baton/internal/combine"
	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// DefaultMaxWait is the longest wait asked of the server in one acquire request. The server
// caps it with its own maximum (30 s by default).
const DefaultMaxWait = 25 * time.Second

// minWait is the shortest server-side wait worth a long-poll. A shorter one is sent as no wait,
// and the Locker's own loop takes over.
const minWait = 100 * time.Millisecond

// Response bodies are read up to these sizes: a full page of leases with 4 KiB of metadata each
// fits, and a problem document is small.
const (
	maxBodyBytes    = 16 << 20
	maxProblemBytes = 64 << 10
)

// Config configures a Store. Only BaseURL is required.
type Config struct {
	// BaseURL is the server's address, http or https, e.g. "http://127.0.0.1:7725". A path
	// (a reverse proxy's prefix) is kept; API paths are appended to it.
	BaseURL string
	// Token is the bearer token sent with every request, if set.
	Token string
	// HTTPClient sends the requests. Default: a client of its own (no overall timeout: each
	// call is bounded by its context) whose transport keeps enough idle connections for many
	// concurrent holders. A client given here must not have a Timeout shorter than MaxWait plus
	// a few seconds, or waiting acquires fail; nor shorter than ClaimWait plus a few seconds.
	// The Store uses a copy that follows no redirect (Baton's API never redirects).
	HTTPClient *http.Client
	// MaxWait is the longest server-side wait per acquire request (default DefaultMaxWait).
	// A longer wait is the Locker's loop of such requests.
	MaxWait time.Duration
	// ClaimWait is how long ClaimJobs asks the server to wait for a claimable job when there is
	// none (a long-poll; DefaultClaimWait if zero, no wait if negative), so that a baton.Worker
	// over HTTP waits in the server instead of polling. It is further capped by the server's
	// maximum and by the claim's context deadline. The server reports how long it waited before
	// the claim that found the jobs (Job.ClaimWaited), so a long wait does not eat into the time
	// the worker believes it holds them. A worker shutting down ends the wait without ending
	// the claim (store.ClaimParams.WaitDone; see ClaimJobs).
	ClaimWait time.Duration
	// TraceParent is a W3C traceparent sent with every request whose context carries no span
	// (OpenTelemetry's trace.SpanContextFromContext); empty for none. With a span in the
	// context, the request's own client span is sent instead (see the package documentation).
	TraceParent string
}

// DefaultClaimWait is the default of Config.ClaimWait.
const DefaultClaimWait = 10 * time.Second

// Store is a store.Store and a store.JobStore over the HTTP API. It is safe for concurrent use.
type Store struct {
	base string // scheme://host[/prefix], without a trailing slash
	// authorization is the value of the Authorization header ("Bearer " + token), nil
	// without a token.
	authorization []string
	hc            *http.Client
	maxWait       time.Duration
	hub           *notify.Hub
	// claimWait is Config.ClaimWait with its default applied; 0 means no wait.
	claimWait time.Duration
	jobHub    *kindHub
	closed    store.Closed
	closeCtx  context.Context // ends at Close, aborting calls in flight
	cancel    context.CancelFunc

	infoMu     sync.Mutex
	info       *serverInfo // nil until fetched successfully
	infoFailed time.Time   // when the last fetch failed

	renews       *combine.Combiner[*store.RenewParams, *store.Lease]
	noRenewBatch atomic.Bool // the server has no POST /v1/locks/renew-batch

	traceParent string // Config.TraceParent
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.JobStore = (*Store)(nil)
)

// NewStore checks cfg and returns a Store. It does no network I/O: the first call does.
func NewStore(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case cfg.BaseURL == "":
		return nil, &store.InvalidArgumentError{Field: "base_url", Rule: "must not be empty"}
	case err != nil:
		return nil, &store.InvalidArgumentError{Field: "base_url", Rule: fmt.Sprintf("must be a URL (%v)", err)}
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &store.InvalidArgumentError{Field: "base_url", Rule: fmt.Sprintf("must be an http or https URL (got %q)", cfg.BaseURL)}
	case u.Host == "":
		return nil, &store.InvalidArgumentError{Field: "base_url", Rule: fmt.Sprintf("must name a host (got %q)", cfg.BaseURL)}
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, &store.InvalidArgumentError{Field: "base_url", Rule: "must not contain credentials, a query or a fragment"}
	}
	for _, r := range cfg.Token {
		if r <= ' ' || r == 0x7f {
			return nil, &store.InvalidArgumentError{Field: "token", Rule: "must not contain spaces or control characters"}
		}
	}
	if err := store.ValidateTraceParent(cfg.TraceParent); err != nil {
		return nil, err
	}
	if cfg.MaxWait < 0 {
		return nil, &store.InvalidArgumentError{Field: "max_wait", Rule: fmt.Sprintf("must not be negative (got %s)", cfg.MaxWait)}
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	switch {
	case cfg.ClaimWait == 0:
		cfg.ClaimWait = DefaultClaimWait
	case cfg.ClaimWait < 0:
		cfg.ClaimWait = 0
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default of 2 idle connections per host would make many concurrent holders open
		// and close a connection per request.
		t.MaxIdleConnsPerHost = 64
		hc.Transport = t
	}
	// Baton's API never redirects, and a followed redirect would send the request, bearer
	// token included, wherever it points (net/http keeps the token for another port of the
	// same host): a 3xx is answered as an error instead (see doHeader).
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		base:      strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"),
		hc:        hc,
		maxWait:   cfg.MaxWait,
		hub:       notify.NewHub(),
		claimWait: cfg.ClaimWait,
		jobHub:    newKindHub(),
		closeCtx:  ctx,
		cancel:    cancel,

		traceParent: cfg.TraceParent,
	}
	if cfg.Token != "" {
		s.authorization = []string{"Bearer " + cfg.Token}
	}
	s.renews = newRenewCombiner(s)
	return s, nil
}

// BaseURL returns the server address requests go to, without a trailing slash.
func (s *Store) BaseURL() string { return s.base }

// Acquire asks the server for p.Key.
//
// p.LeaseID is sent as the lease ID, so Renew and Release name the lease as the caller knows it.
//
// With p.Wait the server waits for the key, up to MaxWait, its own maximum, and ctx's deadline
// less a margin for the answer to come back. A refusal after such a wait wakes this key's local
// subscribers, so that a Locker waiting on this store asks again at once instead of sleeping its
// poll interval.
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ttl := ceilMs(p.TTL)
	req := wire.AcquireRequest{
		Key:         p.Key,
		LeaseID:     p.LeaseID,
		Holder:      p.Holder,
		TTLMs:       &ttl,
		Metadata:    p.Metadata,
		CooldownMs:  ceilMs(p.Cooldown),
		LockDelayMs: ceilMs(p.LockDelay),
		First:       p.First,
		FirstReason: p.FirstReason,
		Shared:      p.Shared,
		Resources:   p.Resources,
		Limits:      p.Limits,
	}
	var wait time.Duration
	if p.Wait {
		wait = s.waitFor(ctx, s.maxWait)
		req.WaitMs = wait.Milliseconds()
	}
	start := time.Now()
	var resp wire.LeaseResponse
	err := s.do(ctx, http.MethodPost, "/v1/locks/acquire", nil, req, &resp)
	if err != nil {
		// Only a request that really waited (most of its window) may trigger an immediate
		// retry; a server that answers at once must not turn the Locker's loop into a spin.
		if wait > 0 && time.Since(start) >= wait/2 && (errors.Is(err, store.ErrLockHeld) || errors.Is(err, store.ErrResting)) {
			s.hub.Notify(p.Key)
		}
		return nil, err
	}
	return resp.Lease.Store(), nil
}

// waitFor is the server-side wait of one acquire or claim request: wait (MaxWait, ClaimWait),
// capped by the server's maximum when known, and ending early enough before ctx's deadline for
// the answer (a refusal naming the holder, an empty claim) to come back before ctx ends.
func (s *Store) waitFor(ctx context.Context, wait time.Duration) time.Duration {
	if info, err := s.serverInfo(ctx); err == nil && info.MaxWaitMs != nil {
		wait = min(wait, time.Duration(*info.MaxWaitMs)*time.Millisecond)
	}
	if deadline, ok := ctx.Deadline(); ok {
		remaining := time.Until(deadline)
		margin := min(max(remaining/5, 20*time.Millisecond), 2*time.Second)
		wait = min(wait, remaining-margin)
	}
	if wait < minWait {
		return 0
	}
	return wait
}

// Renew extends the lease by p.TTL from now on the server's store.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.renews.Do(ctx, p)
}

// renewOne sends one renew request.
func (s *Store) renewOne(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	ttl := ceilMs(p.TTL)
	var resp wire.LeaseResponse
	err := s.do(ctx, http.MethodPost, "/v1/locks/renew", nil, wire.RenewRequest{Key: p.Key, LeaseID: p.LeaseID, TTLMs: &ttl}, &resp)
	if err != nil {
		return nil, err
	}
	return resp.Lease.Store(), nil
}

// Release ends the lease, and wakes a local waiter on the key. Held is set if the server
// reports it.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.ReleaseResponse // held_ms is zero from servers that do not report it
	if err := s.do(ctx, http.MethodPost, "/v1/locks/release", nil, wire.ReleaseRequest{Key: p.Key, LeaseID: p.LeaseID}, &resp); err != nil {
		return nil, err
	}
	if !resp.AlreadyReleased {
		s.hub.Notify(p.Key)
	}
	return &store.ReleaseResult{AlreadyReleased: resp.AlreadyReleased, Held: time.Duration(resp.HeldMs) * time.Millisecond}, nil
}

// Get returns the live lease on key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	var resp wire.LeaseResponse
	if err := s.do(ctx, http.MethodGet, "/v1/locks/"+keyPath(key), nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Lease.Store(), nil
}

// List returns one page of live leases in key order: p.After is the cursor (the last key of the
// previous page).
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{}
	if p.Prefix != "" {
		q.Set("prefix", p.Prefix)
	}
	if p.Holder != "" {
		q.Set("holder", p.Holder)
	}
	if p.After != "" {
		q.Set("cursor", p.After)
	}
	q.Set("limit", strconv.Itoa(p.Limit))
	var resp wire.ListResponse
	if err := s.do(ctx, http.MethodGet, "/v1/locks", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.Lease, 0, len(resp.Leases))
	for i := range resp.Leases {
		out = append(out, resp.Leases[i].Store())
	}
	return out, nil
}

// ForceRelease ends whatever lease holds the key (admin role) and returns it, and wakes a local
// waiter on the key.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.LeaseResponse
	if err := s.do(ctx, http.MethodPost, "/v1/locks/force-release", nil, wire.ForceReleaseRequest{Key: p.Key, Reason: p.Reason, Actor: p.Actor}, &resp); err != nil {
		return nil, err
	}
	s.hub.Notify(p.Key)
	return resp.Lease.Store(), nil
}

// ClearRest ends a resting key's cooldown or lock-delay (admin role) and wakes a local waiter
// on the key.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var resp wire.RestResponse
	if err := s.do(ctx, http.MethodPost, "/v1/locks/clear-rest", nil, wire.ForceReleaseRequest{Key: p.Key, Reason: p.Reason, Actor: p.Actor}, &resp); err != nil {
		return nil, err
	}
	s.hub.Notify(p.Key)
	return &store.Rest{Key: resp.Rest.Key, Reason: resp.Rest.Reason, Remaining: time.Duration(resp.Rest.RemainingMs) * time.Millisecond}, nil
}

// Events lists the server's audit log (an admin call).
func (s *Store) Events(ctx context.Context, p *store.EventsParams) ([]*store.Event, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.Key != "" {
		q.Set("key", p.Key)
	}
	if p.After > 0 {
		q.Set("cursor", strconv.FormatUint(p.After, 10))
	}
	if p.NewestFirst {
		q.Set("order", "desc")
	}
	var resp wire.EventsResponse
	if err := s.do(ctx, http.MethodGet, "/v1/events", q, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*store.Event, 0, len(resp.Events))
	for i := range resp.Events {
		out = append(out, resp.Events[i].Store())
	}
	return out, nil
}

// Subscribe registers a local waiter on key. It is woken when a waiting Acquire on this store
// comes back refused (the server already waited, so the Locker should ask again at once), and
// when this store releases or force-releases the key. Releases by other clients wake the
// server's waiters, which are the long-polls of this store's waiting Acquire calls.
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.hub.Subscribe(key) }

// Capabilities: fencing tokens and the audit log as the server's store reports them in GET
// /v1/info (fetched once and cached; fencing tokens true and audit false while the server cannot
// be asked), and push wake-up, since the server wakes waiting acquires itself.
func (s *Store) Capabilities() store.Capabilities {
	caps := store.Capabilities{FencingTokens: true, PushWakeup: true}
	if s.closed.Load() {
		return caps
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info, err := s.serverInfo(ctx); err == nil {
		if info.FencingTokens != nil {
			caps.FencingTokens = *info.FencingTokens
		}
		caps.Audit, caps.OneResource, caps.Line, caps.Limits = info.Audit, info.OneResource, info.Line, info.Limits
	}
	return caps
}

// Close aborts calls in flight, makes later calls return store.ErrClosed, wakes every local
// waiter and closes idle connections. Leases stay on the server. Closing twice is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	s.hub.NotifyAll()
	s.jobHub.notifyAll()
	s.hc.CloseIdleConnections()
	return nil
}

// serverInfo is GET /v1/info, cached once it succeeded.
type serverInfo struct {
	Version       string `json:"version"`
	Store         string `json:"store"`
	FencingTokens *bool  `json:"fencing_tokens"`
	MaxWaitMs     *int64 `json:"max_wait_ms"`
	Audit         bool   `json:"audit"`        // false from servers older than the field
	OneResource   bool   `json:"one_resource"` // likewise
	Line          bool   `json:"line"`         // likewise
	Limits        bool   `json:"limits"`       // likewise
	ClaimStop     bool   `json:"claim_stop"`   // likewise
}

// A failed fetch is not retried for infoRetry, so that callers do not each pay for it while the
// server is unreachable.
func (s *Store) serverInfo(ctx context.Context) (*serverInfo, error) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if s.info != nil {
		return s.info, nil
	}
	if !s.infoFailed.IsZero() && time.Since(s.infoFailed) < infoRetry {
		return nil, errInfoUnavailable
	}
	var info serverInfo
	if err := s.do(ctx, http.MethodGet, "/v1/info", nil, nil, &info); err != nil {
		s.infoFailed = time.Now()
		return nil, err
	}
	s.info = &info
	return s.info, nil
}

const infoRetry = 10 * time.Second

var errInfoUnavailable = errors.New("baton client: server info unavailable")

// do sends one request and decodes a 2xx answer into out, or maps the problem document.
func (s *Store) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	_, err := s.doHeader(ctx, method, path, query, nil, body, out)
	return err
}

// doHeader is do with extra request headers; it returns the status of a 2xx answer.
func (s *Store) doHeader(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) (int, error) {
	if err := s.closed.Check(); err != nil {
		return 0, err
	}
	// Close aborts the call, so that a long-poll does not outlive the store.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()

	u := s.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := encodeBody(body)
		if err != nil {
			return 0, fmt.Errorf("baton client: encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, sp := s.startSpan(ctx, method, path)
	defer sp.End()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("baton client: %s %s: %w", method, path, err)
	}
	s.injectTrace(ctx, req.Header)
	for k, v := range header {
		req.Header[k] = v
	}
	// The values are shared, not copied: net/http does not change a request's header values
	// (a RoundTripper must not modify the request).
	if body != nil {
		req.Header["Content-Type"] = jsonContentType
	}
	req.Header["Accept"] = acceptAnswers
	if s.authorization != nil {
		req.Header["Authorization"] = s.authorization
	}
	resp, err := s.hc.Do(req)
	if resp != nil && sp.IsRecording() {
		sp.SetAttributes(semHTTPStatus.Int(resp.StatusCode))
		if resp.StatusCode >= 400 {
			sp.SetStatus(codes.Error, resp.Status)
		}
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
		if s.closed.Load() {
			return 0, fmt.Errorf("baton client: %s %s: %w", method, path, store.ErrClosed)
		}
		return 0, fmt.Errorf("baton client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		where := resp.Header.Get("Location")
		if where == "" {
			where = "(no Location)"
		}
		return 0, fmt.Errorf("baton client: %s %s: %w", method, path, &ProblemError{Status: resp.StatusCode, URL: s.base + path,
			Detail: "redirect to " + where + " not followed: Baton's API never redirects (is BaseURL that of the Baton server?)"})
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, s.problemError(method, path, resp)
	}
	drained, err := decodeAnswer(resp.Body, out)
	if err != nil {
		if s.closed.Load() {
			return 0, fmt.Errorf("baton client: %s %s: %w", method, path, store.ErrClosed)
		}
		return 0, fmt.Errorf("baton client: %s %s: decoding the %d answer: %w", method, path, resp.StatusCode, err)
	}
	if !drained {
		// Drain what is left (a trailing newline) so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	}
	return resp.StatusCode, nil
}

// The values of the Content-Type and Accept headers of requests.
var (
	jsonContentType = []string{"application/json"}
	acceptAnswers   = []string{"application/json, application/problem+json"}
)

// encodeBody is json.Marshal, without reflection for the requests of the lock cycle when they
// have the usual shape (wire.AppendAcquireRequest).
func encodeBody(body any) ([]byte, error) {
	switch body := body.(type) {
	case wire.AcquireRequest:
		if b, ok := wire.AppendAcquireRequest(make([]byte, 0, 256), &body); ok {
			return b, nil
		}
	case wire.ReleaseRequest:
		if b, ok := wire.AppendReleaseRequest(make([]byte, 0, 128), &body); ok {
			return b, nil
		}
	}
	return json.Marshal(body)
}

// decodeAnswer decodes the first JSON value of body (at most maxBodyBytes) into out. The answers
// of the lock cycle are read whole and parsed without reflection when they have the usual shape
// (wire.ParseLeaseResponse); everything else, and anything they do not parse, goes through
// encoding/json, which gives the same values and the errors. drained is true when body was read
// to its end.
func decodeAnswer(body io.Reader, out any) (drained bool, err error) {
	switch out := out.(type) {
	case *wire.LeaseResponse, *wire.ReleaseResponse:
		buf := answerBufs.Get().(*bytes.Buffer)
		defer func() {
			if buf.Cap() <= 64<<10 { // an outsized answer's buffer is not kept
				answerBufs.Put(buf)
			}
		}()
		buf.Reset()
		lr := &io.LimitedReader{R: body, N: maxBodyBytes}
		if _, err := buf.ReadFrom(lr); err != nil {
			return false, err
		}
		// ReadFrom stops at the end of the body, or at the limit (which leaves the rest to
		// drain).
		drained = lr.N > 0
		switch out := out.(type) {
		case *wire.LeaseResponse:
			if wire.ParseLeaseResponse(buf.Bytes(), out) {
				return drained, nil
			}
			*out = wire.LeaseResponse{}
		case *wire.ReleaseResponse:
			if wire.ParseReleaseResponse(buf.Bytes(), out) {
				return drained, nil
			}
			*out = wire.ReleaseResponse{}
		}
		body = buf
	}
	return drained, json.NewDecoder(io.LimitReader(body, maxBodyBytes)).Decode(out)
}

// answerBufs holds the buffers decodeAnswer reads answers into; the values parsed from them
// are copies.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ceilMs is d in whole milliseconds, rounded up so that a lease or a pause is never shorter on
// the server than asked.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// keyPath escapes key for GET /v1/locks/{key}: each "/"-separated segment is path-escaped and
// the slashes are kept, so that "team/db" reads as /v1/locks/team/db. Where a literal slash or
// dot segment would be cleaned away by the server's router ("a//b", "/a", "a/./b", "a/.."),
// it is escaped instead (%2F, %2E), which the router decodes back into the key.
func keyPath(key string) string {
	segs := strings.Split(key, "/")
	var b strings.Builder
	for i, seg := range segs {
		if i > 0 {
			if segs[i-1] == "" || (seg == "" && i < len(segs)-1) {
				b.WriteString("%2F")
			} else {
				b.WriteByte('/')
			}
		}
		switch seg {
		case ".":
			b.WriteString("%2E")
		case "..":
			b.WriteString("%2E%2E")
		default:
			b.WriteString(url.PathEscape(seg))
		}
	}
	return b.String()
}

// isJSON reports whether a Content-Type is JSON (application/json, application/problem+json).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
