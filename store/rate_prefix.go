package store

import (
	"context"
	"strings"
	"time"
)

// Rates of key prefixes. An admin sets a rate on a key prefix (RatePrefixer.SetPrefixRate):
// every grant of a key under it (a lease, or a job's attempt, whose keys include one that starts
// with the prefix) counts one grant of the prefix's rate, in scope PrefixRateScope(prefix), and a
// grant that would exceed it waits, as for a limit's rate (Limit.Rate): a lock request is refused
// with a *RestingError of ReasonRate (a waiting one keeps its place in its lines and is tried
// again when the window frees), a job stays its resource's head until then.
//
// A rate prefix is any valid key prefix ("cluster/", "tenant-7:"); a key is under it if it starts
// with it. Rate prefixes never overlap (one may not start with another), so a key is under at
// most one, found with one index probe: the greatest prefix at or below the key.

// Event kinds of prefix rates: an admin set or deleted one. Key is the prefix.
const (
	EventPrefixRateSet    = "prefix_rate_set"
	EventPrefixRateDelete = "prefix_rate_delete"
)

// RatePrefixer is implemented by stores that keep rates on key prefixes (SQLite, PostgreSQL).
type RatePrefixer interface {
	// SetPrefixRate sets (or changes) the rate of p.Prefix and returns it. A prefix that
	// overlaps another rated prefix is an *InvalidArgumentError on "prefix". Grants already
	// made do not count.
	SetPrefixRate(ctx context.Context, p *SetPrefixRateParams) (*PrefixRate, error)
	// DeletePrefixRate removes the rate of p.Prefix; ErrNotFound if it has none.
	DeletePrefixRate(ctx context.Context, p *DeletePrefixRateParams) error
	// PrefixRates lists the rated prefixes in prefix order after p.After, at most p.Limit.
	PrefixRates(ctx context.Context, p *PrefixRatesParams) ([]*PrefixRate, error)
}

// PrefixRate is a key prefix's rate.
type PrefixRate struct {
	Prefix string
	Rate   Rate
	SetAt  time.Time // store clock
}

// SetPrefixRateParams are the inputs of RatePrefixer.SetPrefixRate.
type SetPrefixRateParams struct {
	Prefix    string
	Rate      Rate
	Actor     string
	Principal string
}

// Validate checks every field.
func (p *SetPrefixRateParams) Validate() error {
	return firstError(ValidateRatePrefix(p.Prefix), p.Rate.Validate("rate"), validateTreeActor(&p.Actor, p.Principal))
}

// DeletePrefixRateParams are the inputs of RatePrefixer.DeletePrefixRate.
type DeletePrefixRateParams struct {
	Prefix    string
	Actor     string
	Principal string
}

// Validate checks every field.
func (p *DeletePrefixRateParams) Validate() error {
	return firstError(ValidateRatePrefix(p.Prefix), validateTreeActor(&p.Actor, p.Principal))
}

// PrefixRatesParams are the inputs of RatePrefixer.PrefixRates.
type PrefixRatesParams struct {
	After string // only prefixes greater than this one
	Limit int    // 1..MaxListLimit; DefaultListSize if zero
}

// Validate checks the cursor and applies the default limit.
func (p *PrefixRatesParams) Validate() error {
	if p.Limit == 0 {
		p.Limit = DefaultListSize
	}
	return firstError(ValidateListLimit(p.Limit), validateFilter("cursor", p.After, MaxKeyLen))
}

// ValidateRatePrefix checks a rate prefix: the rules of a key.
func ValidateRatePrefix(prefix string) error { return validateName("prefix", prefix, MaxKeyLen) }

// ValidateRatePrefixOverlap checks that prefix overlaps none of prefixes (the rated ones): none
// may start with another. The prefix itself may be among them.
func ValidateRatePrefixOverlap(prefix string, prefixes []string) error {
	for _, p := range prefixes {
		if p != prefix && (strings.HasPrefix(p, prefix) || strings.HasPrefix(prefix, p)) {
			return invalid("prefix", "%q overlaps rated prefix %q: a rated prefix may not start with another", prefix, p)
		}
	}
	return nil
}

// RatePrefixOf returns the prefix, among prefixes (that do not overlap), that key is under; ""
// if none.
func RatePrefixOf(key string, prefixes []string) string {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return p
		}
	}
	return ""
}

// RatePrefixCache is a process's copy of its store's rated prefixes, for a store to route a
// key under one to the grants that count rates (the way of holds) without a round trip. As
// TreeCache, it is never the truth: the store's fast statements read the table themselves and
// refuse a key under a rated prefix, so a stale copy costs one refused statement and a reload.
type RatePrefixCache struct{ prefixCache }

// Of returns the rated prefix key is under, as last loaded; "" if none.
func (c *RatePrefixCache) Of(key string) string { return c.of(key, RatePrefixOf) }
