package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batonhq/baton/store"
)

// Labels and annotations on Baton's Lease objects. The key and everything else Baton needs live
// in annotations: a label value is at most 63 characters of [A-Za-z0-9_.-], a key is up to 512
// bytes of UTF-8. The one label selects Baton's Leases among the namespace's others (client-go
// leader election keeps its own there).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelValue     = "baton"

	annPrefix    = "baton.batonhq.dev/"
	annKey       = annPrefix + "key"
	annLeaseID   = annPrefix + "lease-id"
	annOwner     = annPrefix + "owner" // only when set: Leases of earlier versions have none
	annState     = annPrefix + "state"
	annToken     = annPrefix + "token"
	annTTL       = annPrefix + "ttl"
	annCooldown  = annPrefix + "cooldown"
	annLockDelay = annPrefix + "lock-delay"
	annMetadata  = annPrefix + "metadata"
	annReason    = annPrefix + "force-reason"
	annActor     = annPrefix + "force-actor"
)

// States of a Lease object.
const (
	stateHeld     = "held"
	stateReleased = "released" // cleanly released: the cooldown follows
	stateForced   = "forced"   // force-released: the lock-delay follows
)

// ObjectName is the name of the Lease object holding key: "baton-", up to 40 characters of the
// key made DNS-1123 (lower case, runs of anything else as one '-'), '-', and 32 hex digits of
// the key's SHA-256. Stable across versions and processes; a 128-bit hash makes two keys
// sharing a name negligible, and the key annotation detects it if it ever happens.
func ObjectName(key string) string {
	var b strings.Builder
	dash := true // no leading dash
	for _, r := range strings.ToLower(key) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	sum := sha256.Sum256([]byte(key))
	readable := strings.TrimSuffix(b.String(), "-")
	if readable != "" {
		readable += "-"
	}
	return "baton-" + readable + hex.EncodeToString(sum[:16])
}

// record is what Baton keeps on one Lease object: the live lease, or the last one and how it
// ended.
type record struct {
	Key        string
	LeaseID    string
	Holder     string
	Owner      string // AcquireParams.Owner; "" if none
	State      string
	Token      uint64
	TTL        time.Duration
	Cooldown   time.Duration
	LockDelay  time.Duration
	Metadata   json.RawMessage
	AcquiredAt time.Time
	// ForceReason and ForceActor say why and by whom a lease was force-released (state forced).
	ForceReason, ForceActor string
}

func durationAnn(a map[string]string, name string) (time.Duration, error) {
	v, ok := a[name]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("annotation %s=%q is not a duration", name, v)
	}
	return d, nil
}

// decode reads the record of a Lease object that should hold key.
func decode(l *coordv1.Lease, key string) (*record, error) {
	a := l.Annotations
	if got := a[annKey]; got != key {
		return nil, fmt.Errorf("kubernetes: Lease %s/%s holds key %q, not %q (a hash collision or a foreign object)",
			l.Namespace, l.Name, got, key)
	}
	rec := &record{Key: key, LeaseID: a[annLeaseID], Owner: a[annOwner], State: a[annState]}
	switch rec.State {
	case stateHeld, stateReleased, stateForced:
	default:
		return nil, fmt.Errorf("kubernetes: Lease %s/%s: unknown state %q", l.Namespace, l.Name, rec.State)
	}
	var err error
	if rec.Token, err = strconv.ParseUint(a[annToken], 10, 64); err != nil {
		return nil, fmt.Errorf("kubernetes: Lease %s/%s: bad token %q", l.Namespace, l.Name, a[annToken])
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{annTTL, &rec.TTL}, {annCooldown, &rec.Cooldown}, {annLockDelay, &rec.LockDelay}} {
		if *d.to, err = durationAnn(a, d.name); err != nil {
			return nil, fmt.Errorf("kubernetes: Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	}
	if m, ok := a[annMetadata]; ok {
		rec.Metadata = json.RawMessage(m)
	}
	rec.ForceReason, rec.ForceActor = a[annReason], a[annActor]
	if l.Spec.HolderIdentity != nil {
		rec.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		rec.AcquiredAt = l.Spec.AcquireTime.Time
	}
	if rec.State == stateHeld && (rec.Holder == "" || rec.LeaseID == "" || rec.TTL <= 0) {
		return nil, fmt.Errorf("kubernetes: Lease %s/%s: held without holder, lease ID or TTL", l.Namespace, l.Name)
	}
	return rec, nil
}

func setAnn(a map[string]string, name string, d time.Duration) {
	if d > 0 {
		a[name] = d.String()
	} else {
		delete(a, name)
	}
}

// encode writes rec onto l (a copy of the object read, so that its resourceVersion is the
// update's precondition). now, on the writer's clock, goes to renewTime; nothing reads it back:
// expiry is observed, never computed from another machine's timestamps.
func (rec *record) encode(l *coordv1.Lease, now time.Time) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = LabelValue
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	a := l.Annotations
	a[annKey] = rec.Key
	a[annLeaseID] = rec.LeaseID
	if rec.Owner != "" {
		a[annOwner] = rec.Owner
	} else {
		delete(a, annOwner)
	}
	a[annState] = rec.State
	a[annToken] = strconv.FormatUint(rec.Token, 10)
	setAnn(a, annTTL, rec.TTL)
	setAnn(a, annCooldown, rec.Cooldown)
	setAnn(a, annLockDelay, rec.LockDelay)
	if len(rec.Metadata) > 0 {
		a[annMetadata] = string(rec.Metadata)
	} else {
		delete(a, annMetadata)
	}
	if rec.State == stateForced {
		a[annReason], a[annActor] = rec.ForceReason, rec.ForceActor
	} else {
		delete(a, annReason)
		delete(a, annActor)
	}
	if rec.State == stateHeld {
		holder := rec.Holder
		secs := int32(min(math.Ceil(rec.TTL.Seconds()), math.MaxInt32))
		l.Spec.HolderIdentity = &holder
		l.Spec.LeaseDurationSeconds = &secs
		l.Spec.AcquireTime = &metav1.MicroTime{Time: rec.AcquiredAt}
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	} else {
		l.Spec.HolderIdentity = nil
		l.Spec.RenewTime = nil
	}
}

// grantRecord is the record of a new grant of p with token.
func grantRecord(p *store.AcquireParams, token uint64, now time.Time) *record {
	md := p.Metadata
	if len(md) == 0 {
		md = nil
	}
	return &record{Key: p.Key, LeaseID: p.LeaseID, Holder: p.Holder, Owner: p.Owner, State: stateHeld, Token: token,
		TTL: p.TTL, Cooldown: p.Cooldown, LockDelay: p.LockDelay, Metadata: md,
		AcquiredAt: now.UTC().Truncate(time.Microsecond)} // a MicroTime round-trips microseconds
}

// transitions is spec.leaseTransitions after one more grant: informational (kubectl shows it),
// saturating; the fencing token is the token annotation.
func transitions(l *coordv1.Lease) *int32 {
	n := int32(1)
	if l.Spec.LeaseTransitions != nil && *l.Spec.LeaseTransitions < math.MaxInt32 {
		n = *l.Spec.LeaseTransitions + 1
	}
	return &n
}
