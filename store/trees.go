package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Trees (hierarchical resources). An admin opts a key prefix into a tree (Treer.SetTree); under
// it, "/" separates levels, and a holder of a key holds its whole subtree and takes intention on
// its ancestors, as the IS/IX/S/X locks of databases do, without storing intention rows.
//
// A tree prefix ends with "/", for example "cluster/". The tree's keys are its root, the prefix
// without its "/" ("cluster"), and every key that starts with the prefix and has no empty level
// ("cluster/eu-1", "cluster/eu-1/node/a"; not "cluster/", "cluster//a" nor "cluster/a/"), at
// most MaxTreeDepth levels below the root. The ancestors of a tree key are the keys made of its
// first levels, down to the root: those of "cluster/eu-1/node/a" are "cluster/eu-1/node",
// "cluster/eu-1" and "cluster". Its descendants are the tree keys that start with it and "/".
// Two keys are related when they are equal or one is an ancestor of the other; siblings and
// cousins are not. A key outside every tree has no ancestors or descendants, whatever "/" it
// holds.
//
// # Compatibility
//
// Two holds on related keys conflict unless both are shared; holds on unrelated keys never
// conflict. A request of mode S (shared) or X (exclusive) on key K, against what is held
// (a lease or a running job attempt, in either mode; a holder of a descendant of K holds IS or
// IX on K, a holder of an ancestor of K holds S or X over K):
//
//	requested  | held on an ancestor | held on K | held on a descendant | held on a sibling
//	on K       |    S        X       |  S    X   |  S (IS)    X (IX)    |  S     X
//	-----------+---------------------+-----------+----------------------+-------------
//	S          |   yes      no       | yes   no  |  yes       no        | yes   yes
//	X          |   no       no       | no    no  |  no        no        | yes   yes
//
// (yes: granted together; no: the request waits or is refused with *LockHeldError naming the
// related key in Related.) This is the matrix of databases: S is compatible with IS and S, X
// with nothing, IS with everything but X, IX with IS and IX, and a hold on a key puts IS or IX on
// each of its ancestors.
//
// A rest works the same way across the family: a related key's lock-delay (after its holder
// expired or was force-released) refuses the grant as its holder would have, since a stalled
// holder of an ancestor may still write anywhere below it, and one of a descendant where the
// requested subtree lies. A cooldown after a clean release (AcquireParams.Cooldown) and a job
// resource's cooldown stay the key's own.
//
// # The line
//
// Each tree key has its own line (LineWaiter), and the lines of related keys are read together:
// a request on K waits behind every live ticket and ready job on K, on an ancestor of K or on a
// descendant of K that arrived before it and whose mode conflicts with its own (both shared do
// not), and is granted only when no related holder conflicts. Arrival is global across lines: a
// lock request's first refusal, a job's submit; a break-glass ticket (AcquireParams.First) is
// before every ticket without it, and ties of one instant go by enqueue order, then lease ID. So
// the line of a parent and the lines of its children do not starve each other: an exclusive
// parent request that arrived before a child request is granted first, and a child request that
// arrived before it goes first. The request that arrived first among the waiting ones waits only
// for holders, so the lines never deadlock.
//
// When a tree key frees, the store wakes the fronts of the lines of its related keys too.
//
// # Cost
//
// A grant of K reads its tree (one index probe of a tiny table), K's own row and line, each
// ancestor by key (at most MaxTreeDepth point lookups) and its descendants as one index range
// (DescendantRange), never a scan of the tree. A key in no tree pays one index probe.
//
// A tree may be set or deleted only while nothing under it is live (TreeInUseError): no lease,
// hold, lock ticket or unfinished job (by its resource or one of its extra resources) on its root
// or below, so that nothing granted under the rules of flat keys overlaps with one granted under
// the tree's.

// MaxTreeDepth bounds the levels of a tree key below its root: "cluster/a/b" is 2 levels below
// "cluster".
const MaxTreeDepth = 16

// Event kinds of trees: an admin set or deleted a tree. Key is the tree's prefix, Actor and
// Principal the admin's.
const (
	EventTreeSet    = "tree_set"
	EventTreeDelete = "tree_delete"
)

// Treer is implemented by stores that keep trees (SQLite, PostgreSQL): their grants, claims and
// lines follow the rules above for every key in a tree.
type Treer interface {
	// SetTree opts p.Prefix into a tree and returns it; setting a prefix that is a tree already
	// returns it unchanged. A prefix that overlaps another tree's (one starts with the other)
	// is an *InvalidArgumentError on "prefix". While a lease, hold, lock ticket or unfinished job
	// lives on a key of the tree, it is refused with *TreeInUseError and nothing changes. A
	// store with an audit log records EventTreeSet in the same atomic step.
	SetTree(ctx context.Context, p *SetTreeParams) (*Tree, error)
	// DeleteTree returns the keys of p.Prefix to the rules of flat keys; ErrNotFound if it is
	// no tree, *TreeInUseError while a key of the tree is live (as SetTree). Audited as
	// EventTreeDelete.
	DeleteTree(ctx context.Context, p *DeleteTreeParams) error
	// Trees lists trees in prefix order after p.After, at most p.Limit.
	Trees(ctx context.Context, p *TreesParams) ([]*Tree, error)
}

// Tree is a key prefix whose keys form a tree.
type Tree struct {
	// Prefix ends with "/"; Root is Prefix without it, the ancestor of every key of the tree.
	Prefix string
	Root   string
	// SetAt is when it was set, on the store's clock.
	SetAt time.Time
}

// SetTreeParams are the inputs of Treer.SetTree.
type SetTreeParams struct {
	Prefix string
	// Actor is who set it, for the audit log; "unknown" if empty. Principal is the
	// authenticated admin (see ForceReleaseParams.Principal).
	Actor     string
	Principal string
}

// Validate checks every field and names an unknown actor. Overlap with other trees is the
// store's check (ValidateTreeOverlap), against the trees it keeps.
func (p *SetTreeParams) Validate() error {
	return firstError(ValidateTreePrefix(p.Prefix), validateTreeActor(&p.Actor, p.Principal))
}

// DeleteTreeParams are the inputs of Treer.DeleteTree.
type DeleteTreeParams struct {
	Prefix    string
	Actor     string
	Principal string
}

// Validate checks every field and names an unknown actor.
func (p *DeleteTreeParams) Validate() error {
	return firstError(ValidateTreePrefix(p.Prefix), validateTreeActor(&p.Actor, p.Principal))
}

func validateTreeActor(actor *string, principal string) error {
	if *actor == "" {
		*actor = "unknown"
	}
	return firstError(validateName("actor", *actor, MaxHolderLen), validateFilter("principal", principal, MaxHolderLen))
}

// TreesParams are the inputs of Treer.Trees.
type TreesParams struct {
	After string // only prefixes greater than this one
	Limit int    // 1..MaxListLimit; DefaultListSize if zero
}

// Validate checks the cursor and applies the default limit.
func (p *TreesParams) Validate() error {
	if p.Limit == 0 {
		p.Limit = DefaultListSize
	}
	return firstError(ValidateListLimit(p.Limit), validateFilter("cursor", p.After, MaxKeyLen))
}

// ValidateTreePrefix checks a tree prefix: the rules of a key, ending with "/", at least one
// byte before it, and no empty level ("a//").
func ValidateTreePrefix(prefix string) error {
	if err := validateName("prefix", prefix, MaxKeyLen); err != nil {
		return err
	}
	switch {
	case !strings.HasSuffix(prefix, "/"):
		return invalid("prefix", "must end with \"/\" (got %q): the levels of a tree are separated by \"/\"", prefix)
	case len(prefix) == 1 || strings.HasPrefix(prefix, "/"):
		return invalid("prefix", "must not start with \"/\" (got %q): the tree's root is the prefix without its \"/\"", prefix)
	case strings.Contains(prefix, "//"):
		return invalid("prefix", "must not have an empty level (got %q)", prefix)
	}
	return nil
}

// ValidateTreeOverlap checks that prefix overlaps none of the trees in prefixes: no tree may lie
// inside another (one prefix starting with the other). The prefix itself may be among them.
func ValidateTreeOverlap(prefix string, prefixes []string) error {
	for _, p := range prefixes {
		if p != prefix && (strings.HasPrefix(p, prefix) || strings.HasPrefix(prefix, p)) {
			return invalid("prefix", "%q overlaps tree %q: a tree may not lie inside another", prefix, p)
		}
	}
	return nil
}

// TreeRoot is the root key of the tree of prefix: the prefix without its trailing "/".
func TreeRoot(prefix string) string { return strings.TrimSuffix(prefix, "/") }

// InTree reports whether key is a key of the tree of prefix, or would be if valid (ValidateTreeKey
// says): its root, or a key that starts with the prefix.
func InTree(key, prefix string) bool {
	return key == TreeRoot(prefix) || strings.HasPrefix(key, prefix)
}

// TreeOf returns the prefix, among prefixes (trees that do not overlap), of the tree that key is
// in; "" if none.
func TreeOf(key string, prefixes []string) string {
	for _, p := range prefixes {
		if InTree(key, p) {
			return p
		}
	}
	return ""
}

// TreeProbe is the value whose greatest tree prefix at or below it, in byte order, is the only
// one that may hold key: key followed by "/". A store finds key's tree with one index probe
// ("the greatest prefix <= TreeProbe(key)") and then checks that it is a prefix of TreeProbe(key):
// no prefix of another tree can sort between a tree's prefix and the keys of that tree, since the
// trees do not overlap.
func TreeProbe(key string) string { return key + "/" }

// ValidateTreeKey checks a key of the tree of prefix (InTree), under the name field ("key",
// "resources", "resource"): no empty level (no "//", no trailing "/"), at most MaxTreeDepth
// levels below the root.
func ValidateTreeKey(field, key, prefix string) error {
	if key == TreeRoot(prefix) {
		return nil
	}
	rest := key[len(prefix):]
	switch {
	case rest == "" || strings.HasSuffix(rest, "/"):
		return invalid(field, "%q must not end with \"/\": under tree %q, \"/\" separates levels, none empty", key, prefix)
	case strings.HasPrefix(rest, "/") || strings.Contains(rest, "//"):
		return invalid(field, "%q must not have an empty level: under tree %q, \"/\" separates levels, none empty", key, prefix)
	}
	if d := TreeDepth(key, prefix); d > MaxTreeDepth {
		return invalid(field, "%q is %d levels below the root of tree %q; at most %d", key, d, prefix, MaxTreeDepth)
	}
	return nil
}

// TreeDepth is the number of levels of key below the root of the tree of prefix: 0 for the root,
// 1 for its children.
func TreeDepth(key, prefix string) int {
	if key == TreeRoot(prefix) {
		return 0
	}
	return strings.Count(key[len(prefix):], "/") + 1
}

// TreeAncestors returns the ancestors of key in the tree of prefix, nearest first, ending with
// the root; none for the root.
func TreeAncestors(key, prefix string) []string {
	root := TreeRoot(prefix)
	if key == root {
		return nil
	}
	out := make([]string, 0, TreeDepth(key, prefix))
	for k := key; k != root; {
		k = k[:strings.LastIndexByte(k, '/')]
		out = append(out, k)
	}
	return out
}

// DescendantRange bounds the descendants of key in byte order: every descendant d has
// lo <= d < hi, and so does no other key. lo is key followed by "/", hi key followed by "0", the
// byte after "/": "key-x" (a sibling, "-" before "/") and "key0" fall outside. A store compares
// in byte order (SQLite's BINARY, PostgreSQL's COLLATE "C", as its key columns are), so that an
// index on key reads the range and nothing else.
func DescendantRange(key string) (lo, hi string) { return key + "/", key + "0" }

// Relation is how a held key stands to a requested one in a tree.
type Relation int

// The relations of a held key to a requested key K.
const (
	Unrelated  Relation = iota // a sibling, a cousin, another tree's key, or a key in no tree
	Same                       // K itself
	Ancestor                   // the held key is an ancestor of K
	Descendant                 // the held key is a descendant of K
)

func (r Relation) String() string {
	return [...]string{"unrelated", "same", "ancestor", "descendant"}[r]
}

// Relate says how held stands to requested, both keys of the tree of prefix (or of none, if
// prefix is ""): Same if equal, Ancestor or Descendant by their levels, else Unrelated.
func Relate(held, requested, prefix string) Relation {
	switch {
	case held == requested:
		return Same
	case prefix == "" || !InTree(held, prefix) || !InTree(requested, prefix):
		return Unrelated
	case strings.HasPrefix(requested, held+"/"):
		return Ancestor
	case strings.HasPrefix(held, requested+"/"):
		return Descendant
	}
	return Unrelated
}

// TreeCompatible is the compatibility matrix: whether a hold of mode heldShared on a key in
// relation rel to K and a request of mode wantShared on K may be held at once.
func TreeCompatible(rel Relation, heldShared, wantShared bool) bool {
	return rel == Unrelated || heldShared && wantShared
}

// ErrTreeInUse: a tree cannot be set or deleted while a key of it is live. The concrete error is
// *TreeInUseError.
var ErrTreeInUse = errors.New("baton: tree in use")

// TreeInUseError names the tree and one live key of it, and what lives there: "lease" (a live
// lease or hold), "ticket" (a waiting lock request) or "job" (an unfinished job). It matches
// ErrTreeInUse.
type TreeInUseError struct {
	Prefix string
	Key    string
	What   string
}

func (e *TreeInUseError) Error() string {
	return fmt.Sprintf("baton: tree %q is in use: %s on %q; set or delete a tree once nothing under it is held, waited for or queued",
		e.Prefix, treeUse[e.What], e.Key)
}

var treeUse = map[string]string{"lease": "a live lease", "ticket": "a waiting lock request", "job": "an unfinished job"}

// Is reports whether target is ErrTreeInUse.
func (e *TreeInUseError) Is(target error) bool { return target == ErrTreeInUse }

// TreeCache is a process's copy of its store's tree prefixes, sorted, for a store to choose the
// way of a key (flat or tree) without a round trip. It is never the truth: a store's statements
// read its trees table themselves, so a copy made stale by another process sharing the store
// costs one refused statement and a reload, never a wrong grant.
type TreeCache struct{ prefixCache }

// Of returns the prefix of key's tree as last loaded; "" if none.
func (c *TreeCache) Of(key string) string { return c.of(key, TreeOf) }

// prefixCache is a copy of a store's prefixes of one sort (trees, rated prefixes), none
// overlapping another, for routing a key without a round trip.
type prefixCache struct {
	mu       sync.RWMutex
	prefixes []string
}

// of returns the prefix find picks for key among the copy; "" if none (at once if empty).
func (c *prefixCache) of(key string, find func(string, []string) string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.prefixes) == 0 {
		return ""
	}
	return find(key, c.prefixes)
}

// Set replaces the copy with prefixes, sorted and not overlapping.
func (c *prefixCache) Set(prefixes []string) {
	c.mu.Lock()
	c.prefixes = prefixes
	c.mu.Unlock()
}
