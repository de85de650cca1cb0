// Package kubernetes is a Baton lease store on Kubernetes Lease objects
// (coordination.k8s.io/v1), for programs that run in a cluster and have no database of their
// own. It talks to the API server with client-go and lives in its own Go module
// (github.com/batonhq/baton/store/kubernetes) so that client-go stays out of the core module.
// See docs/guarantees.md ("Kubernetes") for what it promises.
//
// One Lease object per key, in one namespace, named ObjectName(key), labelled
// app.kubernetes.io/managed-by=baton, the key and the lease's details in annotations. Every
// change is an update (or a create) with the resourceVersion read as precondition: the API
// server serialises contenders, and a 409 Conflict means somebody else changed the object
// first, so the store reads it again. Objects are never deleted: a released Lease keeps its
// fencing token (annotation baton.batonhq.dev/token), which the next grant increments.
//
// Expiry is observed, not computed: see sightings (observe.go).
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcoord "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// Config configures a Store.
type Config struct {
	// Namespace of the Lease objects; required.
	Namespace string
	// Now is the store's clock, time.Now if nil. Only durations between its readings are used
	// (with their monotonic part): a clock that is off by any offset changes nothing.
	Now func() time.Time
	// DriftFactor is how much faster this process's clock may run than a holder's, as a share
	// of a TTL (DefaultDriftFactor if zero): a lease seen unchanged is expired for this store
	// only after TTL × (1 + DriftFactor) on its clock (lock-delays and cooldowns, which are
	// not about safety, are not stretched).
	DriftFactor float64
}

// DefaultDriftFactor is Config.DriftFactor when zero: the Locker's default (baton.DefaultDriftFactor).
const DefaultDriftFactor = 0.01

// Store is a store.Store on Kubernetes Lease objects.
type Store struct {
	store.NoAudit // Events lists nothing: no audit log

	leases    typedcoord.LeaseInterface
	namespace string
	now       func() time.Time
	drift     float64 // Config.DriftFactor
	seen      sightings
	written   writtenCache
	hub       *notify.Hub
	closed    store.Closed
	closeOnce sync.Once
	cancel    context.CancelFunc
	watchEnd  chan struct{}
}

var _ store.Store = (*Store)(nil)

// selector selects Baton's Leases.
var selector = LabelManagedBy + "=" + LabelValue

// Open connects with rc (in-cluster configuration if nil) and checks that the Leases of the
// namespace can be listed. Client-side rate limiting is off unless rc sets QPS: the API
// server's priority and fairness protects it, and a renewal must not queue behind listings.
// Requests use protobuf unless rc sets a content type.
func Open(ctx context.Context, rc *rest.Config, cfg Config) (*Store, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes: no namespace")
	}
	if rc == nil {
		var err error
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("kubernetes: in-cluster configuration: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	if rc.QPS == 0 && rc.RateLimiter == nil {
		rc.QPS = -1
	}
	if rc.Dial == nil {
		// A connection of the store's own: client-go otherwise shares one HTTP/2 connection
		// among every client of a process with the same configuration, and a renewal would
		// queue behind an informer's large lists on it.
		rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if rc.ContentType == "" {
		// Protobuf, as Kubernetes' own components speak: cheaper to encode and decode than
		// JSON on both sides of every renewal.
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	leases := cs.CoordinationV1().Leases(cfg.Namespace)
	if _, err := leases.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1}); err != nil {
		return nil, fmt.Errorf("kubernetes: list leases in namespace %q: %w", cfg.Namespace, err)
	}
	return New(leases, cfg), nil
}

// New returns a store on an existing client for the Leases of cfg.Namespace.
func New(leases typedcoord.LeaseInterface, cfg Config) *Store {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{leases: leases, namespace: cfg.Namespace, now: cfg.Now, drift: cfg.DriftFactor, hub: notify.NewHub(),
		cancel: cancel, watchEnd: make(chan struct{})}
	s.NoAudit = store.NewNoAudit(&s.closed)
	if s.drift <= 0 {
		s.drift = DefaultDriftFactor
	}
	if s.now == nil {
		s.now = time.Now
	}
	go s.watch(ctx)
	return s
}

// Namespace is the namespace of the store's Lease objects.
func (s *Store) Namespace() string { return s.namespace }

// Capabilities: tokens are kept on objects that are never deleted; wake-up comes from a watch.
// No audit log.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: true, Audit: false, Owners: true}
}

// Subscribe wakes when the watch sees a lease on key released, force-released or its object
// deleted, in this or any other process. A lease that expires sends nothing: the waiter's next
// attempt is due when the RetryAfter of its refusal says.
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.hub.Subscribe(key) }

// Close stops the watch. Leases stay in the API server.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		<-s.watchEnd
		s.hub.NotifyAll()
	})
	return nil
}

// watch wakes subscribers from a watch on the namespace's Baton Leases, resumed from the last
// resourceVersion seen when it ends, and started afresh (waking everyone, since events may have
// been missed) when that version is too old. Every event is also a sighting (observe.go).
func (s *Store) watch(ctx context.Context) {
	defer close(s.watchEnd)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
			if err != nil {
				pause(ctx, time.Second)
				continue
			}
			rv = list.ResourceVersion
			s.hub.NotifyAll()
		}
		w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			pause(ctx, time.Second)
			continue
		}
		rv = s.dispatch(w.ResultChan(), rv)
		w.Stop()
		pause(ctx, 100*time.Millisecond)
	}
}

// dispatch handles one watch's events and returns the resourceVersion to resume from ("" to
// start afresh).
func (s *Store) dispatch(events <-chan watch.Event, rv string) string {
	for ev := range events {
		if ev.Type == watch.Error {
			if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
				return ""
			}
			return rv
		}
		l, ok := ev.Object.(*coordv1.Lease)
		if !ok {
			continue
		}
		rv = l.ResourceVersion
		if ev.Type == watch.Bookmark {
			continue
		}
		key := l.Annotations[annKey]
		if ev.Type == watch.Deleted {
			s.written.drop(l.Name)
			s.hub.Notify(key)
			continue
		}
		s.seen.see(l.Name, l.ResourceVersion, s.now())
		if l.Annotations[annState] != stateHeld {
			s.hub.Notify(key)
		}
	}
	return rv
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
