package sqlite

import "github.com/batonhq/baton/store"

// keyRange is the key range of one page of a listing by key: after the cursor, with the prefix.
// It is read from an index on key as a single range: one lower bound (the cursor, key > after,
// when it is at or past the prefix, else the prefix itself, key >= prefix) and one upper bound
// (store.PrefixEnd). One bound per side, because of two lower bounds on one column SQLite uses
// only one for the index range, and without statistics it may pick the cursor ” over the prefix
// and read every key before the prefix's range.
type keyRange struct {
	lower     string // ?1
	inclusive bool   // key >= ?1, else key > ?1
	bound     string // ?2: the upper bound, or without one the prefix, checked exactly
	bounded   bool
}

func newKeyRange(after, prefix string) keyRange {
	r := keyRange{lower: after}
	if after < prefix {
		r.lower, r.inclusive = prefix, true
	}
	r.bound, r.bounded = store.PrefixEnd(prefix)
	if !r.bounded {
		r.bound = prefix
	}
	return r
}

// shape numbers the four forms of the condition, 0..3.
func (r keyRange) shape() int {
	i := 0
	if r.inclusive {
		i |= 1
	}
	if r.bounded {
		i |= 2
	}
	return i
}

// keyRangeSQL is the condition on column key of one shape, with ?1 and ?2 as in keyRange.
func keyRangeSQL(shape int) string {
	lower, upper := "key > ?1", "substr(key, 1, length(?2)) = ?2"
	if shape&1 != 0 {
		lower = "key >= ?1"
	}
	if shape&2 != 0 {
		upper = "key < ?2"
	}
	return lower + " AND " + upper
}
