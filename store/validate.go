package store

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of the lease contract.
const (
	MaxKeyLen      = 512
	MaxHolderLen   = 256
	MaxIDLen       = 128
	MaxReasonLen   = 1024
	MaxMetadataLen = 4096
	MinTTL         = time.Second
	// DefaultTTLForServer is the TTL of a remote acquire or renew that names none; the same as
	// baton.DefaultTTL.
	DefaultTTLForServer = 15 * time.Second
	MaxTTL              = 24 * time.Hour
	// MaxRest bounds a rest: a lease's cooldown and lock-delay, and a job kind's Cooldown and
	// ResourceCooldown.
	MaxRest         = 24 * time.Hour
	DefaultListSize = 100
	MaxListLimit    = 1000
)

// ValidateKey checks a lock key: UTF-8, 1..MaxKeyLen bytes, no control characters.
func ValidateKey(key string) error { return validateName("key", key, MaxKeyLen) }

// ValidateHolder checks a holder name with the same rules as a key, 1..MaxHolderLen bytes.
func ValidateHolder(holder string) error { return validateName("holder", holder, MaxHolderLen) }

// ValidateOwner checks a lease's or job attempt's owner: empty (none), or a name with the rules
// of a holder.
func ValidateOwner(owner string) error { return validateFilter("owner", owner, MaxHolderLen) }

// ValidateLeaseID checks a lease ID, 1..MaxIDLen bytes, printable.
func ValidateLeaseID(id string) error { return validateName("lease_id", id, MaxIDLen) }

func validateName(field, s string, max int) error {
	switch {
	case s == "":
		return invalid(field, "must not be empty")
	case len(s) > max:
		return invalid(field, "must be at most %d bytes (got %d)", max, len(s))
	case !utf8.ValidString(s):
		return invalid(field, "must be valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalid(field, "must not contain control characters (found %U)", r)
		}
	}
	return nil
}

// ValidateTTL checks that ttl lies in [MinTTL, MaxTTL].
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid("ttl", "must be between %s and %s (got %s)", MinTTL, MaxTTL, ttl)
	}
	return nil
}

// ValidateMetadata checks that md is empty or a JSON object of at most MaxMetadataLen bytes.
func ValidateMetadata(md json.RawMessage) error {
	if len(md) == 0 {
		return nil
	}
	if len(md) > MaxMetadataLen {
		return invalid("metadata", "must be at most %d bytes (got %d)", MaxMetadataLen, len(md))
	}
	return validateJSONObject("metadata", md)
}

// validateJSONObject checks that raw is a JSON object that every backend can store as given
// (see JSONTextRule; NUL included: PostgreSQL's jsonb cannot hold \u0000).
func validateJSONObject(field string, raw json.RawMessage) error {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(raw) {
		return invalid(field, "must be a JSON object")
	}
	if rule := JSONTextRule(raw, true); rule != "" {
		return invalid(field, "%s", rule)
	}
	return nil
}

func validateRest(field string, d time.Duration) error {
	if d < 0 || d > MaxRest {
		return invalid(field, "must be between 0 and %s (got %s)", MaxRest, d)
	}
	return nil
}

// Validate checks every field; backends call it before writing.
func (p *AcquireParams) Validate() error {
	return firstError(
		ValidateKey(p.Key), ValidateLeaseID(p.LeaseID), ValidateHolder(p.Holder), ValidateOwner(p.Owner), ValidateTTL(p.TTL),
		ValidateMetadata(p.Metadata), validateRest("cooldown", p.Cooldown), validateRest("lock_delay", p.LockDelay),
		p.validateFirst(), p.validateBeyond())
}

// validateFirst checks a break-glass request's reason, which First requires; without First a
// reason is checked the same way and then ignored.
func (p *AcquireParams) validateFirst() error {
	if !p.First && p.FirstReason == "" {
		return nil
	}
	return validateReason("first_reason", p.FirstReason)
}

// Validate checks every field.
func (p *RenewParams) Validate() error {
	return firstError(ValidateKey(p.Key), ValidateLeaseID(p.LeaseID), ValidateOwner(p.Owner), ValidateTTL(p.TTL))
}

// Validate checks every field.
func (p *ReleaseParams) Validate() error {
	return firstError(ValidateKey(p.Key), ValidateLeaseID(p.LeaseID), ValidateOwner(p.Owner))
}

// Validate checks every field and names an unknown actor.
func (p *ForceReleaseParams) Validate() error {
	if err := firstError(ValidateKey(p.Key), validateFilter("principal", p.Principal, MaxHolderLen)); err != nil {
		return err
	}
	return validateAdminAction(&p.Actor, p.Reason)
}

// Validate checks every field and names an unknown actor.
func (p *ClearRestParams) Validate() error {
	if err := firstError(ValidateKey(p.Key), validateFilter("principal", p.Principal, MaxHolderLen)); err != nil {
		return err
	}
	return validateAdminAction(&p.Actor, p.Reason)
}

// validateAdminAction checks the actor (defaulting it to "unknown") and reason of an admin's
// change, for the audit log.
func validateAdminAction(actor *string, reason string) error {
	if *actor == "" {
		*actor = "unknown"
	}
	if err := validateName("actor", *actor, MaxHolderLen); err != nil {
		return err
	}
	return validateReason("reason", reason)
}

// validateReason checks the reason an admin gives for a change, under the name field.
func validateReason(field, reason string) error {
	if reason == "" {
		return invalid(field, "must not be empty")
	}
	if len(reason) > MaxReasonLen || !utf8.ValidString(reason) {
		return invalid(field, "must be valid UTF-8 of at most %d bytes", MaxReasonLen)
	}
	for _, r := range reason {
		if unicode.IsControl(r) && r != '\t' && r != '\n' {
			return invalid(field, "must not contain control characters other than tab and newline (found %U)", r)
		}
	}
	return nil
}

// Validate checks the filters and applies the default limit.
func (p *ListParams) Validate() error {
	if p.Limit == 0 {
		p.Limit = DefaultListSize
	}
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return invalid("limit", "must be between 1 and %d (got %d)", MaxListLimit, p.Limit)
	}
	// The cursor is named as in the HTTP API (GET /v1/locks?cursor=).
	return firstError(validateFilter("prefix", p.Prefix, MaxKeyLen), validateFilter("cursor", p.After, MaxKeyLen),
		validateFilter("holder", p.Holder, MaxHolderLen))
}

// validateFilter checks an optional string filter (a prefix, a cursor, a name): empty, or the
// rules of a key: valid UTF-8 without control characters, at most max bytes. A filter that breaks
// them could match nothing, and PostgreSQL refuses invalid UTF-8 and NUL outright.
func validateFilter(field, s string, max int) error {
	if s == "" {
		return nil
	}
	return validateName(field, s, max)
}

// IDBound is the cursor as the bound of an SQL query on event IDs (int64): with NewestFirst and
// no cursor, the largest ID; a cursor past the int64 range is clamped to it.
func (p *EventsParams) IDBound() int64 {
	if p.After > math.MaxInt64 || (p.NewestFirst && p.After == 0) {
		return math.MaxInt64
	}
	return int64(p.After)
}

// Shape indexes a store's Events statements, one per order and filter, so that a filtered read
// has a statement of its own that can use the key's index: bit 1 NewestFirst, bit 2 a key.
func (p *EventsParams) Shape() int {
	i := 0
	if p.NewestFirst {
		i |= 1
	}
	if p.Key != "" {
		i |= 2
	}
	return i
}

// Validate checks the filters and applies the default limit.
func (p *EventsParams) Validate() error {
	if p.Limit == 0 {
		p.Limit = DefaultListSize
	}
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return invalid("limit", "must be between 1 and %d (got %d)", MaxListLimit, p.Limit)
	}
	return validateFilter("key", p.Key, MaxKeyLen)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ValidateListLimit checks a page size: 1..MaxListLimit.
func ValidateListLimit(limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return invalid("limit", "must be between 1 and %d (got %d)", MaxListLimit, limit)
	}
	return nil
}
