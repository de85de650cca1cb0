package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// node is one Redis server under one key prefix: the scripts and key names of the lease model
// that both Store (one node) and RedlockStore (several) run.
type node struct {
	rdb       *goredis.Client
	prefix    string
	channel   string
	token     string // the token counter's key
	retention int64  // Config.ShadowRetention, ms: how long a lease record outlives its lease
	// retArg is retention as a script argument, boxed once (an int64 in an interface is an
	// allocation per call).
	retArg any
	// always: release and force-release publish even if no waiter marked the lease (Redlock:
	// a waiter may have been marked on other nodes only, which may be down at the release).
	always string
	// events: "1" if the server publishes expiry events (set by startListener before the store
	// is used): a waiter's mark then also writes the wake key, whose expiry wakes waiters.
	events string
}

func newNode(rdb *goredis.Client, prefix string, retention time.Duration) *node {
	ms := retention.Milliseconds()
	return &node{rdb: rdb, prefix: prefix, channel: prefix + "released", token: prefix + "token",
		retention: ms, retArg: ms, always: "0", events: "0"}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (n *node) leaseKey(key string) string { return n.prefix + "lease:" + key }
func (n *node) wakeKey(key string) string  { return n.prefix + "wake:" + key }
func (n *node) tokenKey() string           { return n.token }

// shadowKey and restKey are the earlier key layout's (see scripts.go): read, and deleted, only
// while a key still has them.
func (n *node) shadowKey(key string) string { return n.prefix + "shadow:" + key }
func (n *node) restKey(key string) string   { return n.prefix + "rest:" + key }

// reply is one parsed script reply.
type reply struct {
	status string
	lease  *store.Lease // ok / held / notfound-less replies
	reason string       // rest
	wait   time.Duration
	took   bool
	renew  bool  // an ok acquire that renewed the holder's own lease
	n      int64 // reset: the counter; release: held µs
	// cd and ld: an ok renew's cooldown and lock-delay in ms (what a Redlock restore writes).
	cd, ld int64
}

func (n *node) acquire(ctx context.Context, p *store.AcquireParams, floor, raise uint64) (*reply, error) {
	// The optional arguments are trimmed from the end while they have their defaults (see
	// acquireScript): a lease without an owner (a library caller's) passes none of the owner's.
	var args [12]any
	args[0], args[1], args[2], args[3], args[4] = p.LeaseID, p.Holder, p.TTL.Milliseconds(), floor, n.retArg
	opt := args[5:]
	last := -1
	if len(p.Metadata) > 0 {
		opt[0], last = string(p.Metadata), 0
	}
	if p.Cooldown > 0 || p.LockDelay > 0 {
		last = 2
	}
	if p.Wait {
		last = 3
	}
	if n.events != "0" {
		last = 4
	}
	if raise > 0 {
		last = 5
	}
	if p.Owner != "" {
		opt[6], last = p.Owner, 6
	}
	if last >= 1 {
		if opt[0] == nil {
			opt[0] = ""
		}
		opt[1], opt[2] = p.Cooldown.Milliseconds(), p.LockDelay.Milliseconds()
		opt[3], opt[4], opt[5] = flag(p.Wait), n.events, raise
	}
	v, err := acquireScript.Run(ctx, n.rdb, []string{n.leaseKey(p.Key), n.token}, args[:6+last]...).Slice()
	if err != nil {
		return nil, err
	}
	if str(v, 0) == "new" && len(v) >= 4 {
		// A grant: the reply carries only what the server chose.
		acq := num(v, 2)
		l := &store.Lease{
			Key:        p.Key,
			ID:         p.LeaseID,
			Holder:     p.Holder,
			Owner:      p.Owner,
			Token:      uint64(num(v, 1)),
			AcquiredAt: time.UnixMilli(acq),
			ExpiresAt:  time.UnixMilli(acq + p.TTL.Milliseconds()),
			TTLLeft:    time.Duration(p.TTL.Milliseconds()) * time.Millisecond,
		}
		if len(p.Metadata) > 0 {
			l.Metadata = append(json.RawMessage(nil), p.Metadata...)
		}
		return &reply{status: "ok", lease: l, took: str(v, 3) == "1"}, nil
	}
	r, err := parseReply(p.Key, v, 10)
	if err != nil {
		return nil, err
	}
	switch r.status {
	case "ok":
		r.took = str(v, 8) == "1"
		r.renew = str(v, 9) == "1"
	case "rest":
		r.reason = str(v, 1)
		r.wait = time.Duration(num(v, 2)) * time.Millisecond
	case "reset":
		r.n = num(v, 1)
	}
	return r, nil
}

func (n *node) renew(ctx context.Context, p *store.RenewParams) (*reply, error) {
	args := []any{p.LeaseID, p.TTL.Milliseconds(), n.retention, n.events, p.Owner}
	if p.Owner == "" {
		args = args[:4] // see renewScript
	}
	v, err := renewScript.Run(ctx, n.rdb, []string{n.leaseKey(p.Key), n.shadowKey(p.Key), n.wakeKey(p.Key)}, args...).Slice()
	if err != nil {
		return nil, err
	}
	r, err := parseReply(p.Key, v, 10)
	if err != nil {
		return nil, err
	}
	if r.status == "ok" {
		r.cd, r.ld = num(v, 8), num(v, 9)
	}
	return r, nil
}

// restore puts lease l (as another node renewed it: src) back on this node if the key is free
// for it there; see restoreScript.
func (n *node) restore(ctx context.Context, src *reply, ttl time.Duration) (*reply, error) {
	l := src.lease
	acq := l.AcquiredAt.UnixMilli()
	args := []any{l.ID, l.Holder, ttl.Milliseconds(), l.Token, acq, acq / 1000, acq % 1000 * 1000, string(l.Metadata),
		src.cd, src.ld, n.retention, l.Owner}
	if l.Owner == "" {
		args = args[:11] // see restoreScript
	}
	v, err := restoreScript.Run(ctx, n.rdb,
		[]string{n.leaseKey(l.Key), n.shadowKey(l.Key), n.restKey(l.Key), n.tokenKey()}, args...).Slice()
	if err != nil {
		return nil, err
	}
	r, err := parseReply(l.Key, v, 8)
	if err != nil {
		return nil, err
	}
	if r.status == "rest" {
		r.reason = str(v, 1)
		r.wait = time.Duration(num(v, 2)) * time.Millisecond
	}
	return r, nil
}

func (n *node) release(ctx context.Context, p *store.ReleaseParams) (*reply, error) {
	args := []any{p.LeaseID, p.Key, n.retArg, n.always, p.Owner}
	switch {
	case p.Owner != "":
	case n.always == "0":
		args = args[:3] // see releaseScript
	default:
		args = args[:4]
	}
	v, err := releaseScript.Run(ctx, n.rdb, []string{n.leaseKey(p.Key)}, args...).Slice()
	if err != nil {
		return nil, err
	}
	r := &reply{status: str(v, 0)}
	if r.status == "ok" {
		r.n = num(v, 1)
	}
	return r, nil
}

func (n *node) forceRelease(ctx context.Context, key string) (*reply, error) {
	v, err := forceReleaseScript.Run(ctx, n.rdb,
		[]string{n.leaseKey(key), n.shadowKey(key), n.restKey(key), n.channel, n.wakeKey(key)},
		key, n.retention, n.always).Slice()
	if err != nil {
		return nil, err
	}
	return parseReply(key, v, 8)
}

func (n *node) rollback(ctx context.Context, key, id string) error {
	return rollbackScript.Run(ctx, n.rdb, []string{n.leaseKey(key), n.shadowKey(key), n.channel, n.wakeKey(key)}, id, key).Err()
}

func (n *node) get(ctx context.Context, key string) (*reply, error) {
	v, err := getScript.Run(ctx, n.rdb, []string{n.leaseKey(key)}).Slice()
	if err != nil {
		return nil, err
	}
	return parseReply(key, v, 8)
}

// getMany runs getScript for keys in one pipeline (one round trip).
func (n *node) getMany(ctx context.Context, keys []string) ([]*reply, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	// Load the script first so that EvalSha in the pipeline cannot fail with NOSCRIPT.
	if err := getScript.Load(ctx, n.rdb).Err(); err != nil {
		return nil, err
	}
	pipe := n.rdb.Pipeline()
	cmds := make([]*goredis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = getScript.EvalSha(ctx, pipe, []string{n.leaseKey(k)})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	out := make([]*reply, len(keys))
	for i, c := range cmds {
		v, err := c.Slice()
		if err != nil {
			return nil, err
		}
		if out[i], err = parseReply(keys[i], v, 8); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanKeys returns the lease keys (without the store's prefix) that start with prefix, unsorted.
func (n *node) scanKeys(ctx context.Context, prefix string) ([]string, error) {
	base := n.leaseKey("")
	match := globEscape(base+prefix) + "*"
	var keys []string
	seen := map[string]bool{}
	iter := n.rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		k := strings.TrimPrefix(iter.Val(), base)
		if !seen[k] { // SCAN may return a key more than once
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys, iter.Err()
}

// globEscape escapes the characters that MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseReply reads the common shapes: {status, id, holder, token, acq, exp, ttlLeft, md, ...},
// with the lease's owner at index owner of an "ok" reply ("" if the reply is shorter: the
// scripts leave out an empty owner).
func parseReply(key string, v []any, owner int) (*reply, error) {
	if len(v) == 0 {
		return nil, errors.New("redis: empty script reply")
	}
	r := &reply{status: str(v, 0)}
	if (r.status == "ok" || r.status == "held") && len(v) >= 8 {
		l := &store.Lease{
			Key:        key,
			ID:         str(v, 1),
			Holder:     str(v, 2),
			Token:      uint64(num(v, 3)),
			AcquiredAt: time.UnixMilli(num(v, 4)),
			ExpiresAt:  time.UnixMilli(num(v, 5)),
			TTLLeft:    time.Duration(num(v, 6)) * time.Millisecond,
		}
		if md := str(v, 7); md != "" {
			l.Metadata = json.RawMessage(md)
		}
		if r.status == "ok" {
			l.Owner = str(v, owner)
		}
		r.lease = l
	} else if r.status == "ok" || r.status == "held" {
		return nil, fmt.Errorf("redis: short script reply %v", v)
	}
	return r, nil
}

func str(v []any, i int) string {
	if i >= len(v) {
		return ""
	}
	switch x := v[i].(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func num(v []any, i int) int64 {
	if i >= len(v) {
		return 0
	}
	switch x := v[i].(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// raise sets the token counter to at least v.
func (n *node) raise(ctx context.Context, v uint64) error {
	return floorScript.Run(ctx, n.rdb, []string{n.tokenKey()}, v).Err()
}
