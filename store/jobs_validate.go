package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the job queue.
const (
	MaxKindLen           = 128
	MaxIdempotencyKeyLen = 256
	MaxArgsLen           = 32 << 10
	MaxStateLen          = 64
	MaxFromStates        = 32
	MaxMaxAttempts       = 1000
	DefaultMaxAttempts   = 5
	MaxPriority          = 9
	MaxDelay             = 366 * 24 * time.Hour
	MaxJobTimeout        = 24 * time.Hour
	// MaxClaimLimit bounds one claim: an in-process worker at high concurrency claims (and
	// completes) up to this many jobs per round trip. The HTTP API's bound is lower (100).
	MaxClaimLimit = 1000
	MaxCleanLimit = 10000
	// MaxErrorMessageLen: longer messages are cut (at a rune boundary) when stored.
	MaxErrorMessageLen = 2048
)

// ValidateKind checks a kind name: 1..MaxKindLen bytes of [A-Za-z0-9_.:-].
func ValidateKind(name string) error {
	if name == "" {
		return invalid("kind", "must not be empty")
	}
	if len(name) > MaxKindLen {
		return invalid("kind", "must be at most %d bytes (got %d)", MaxKindLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c == '.' || c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return invalid("kind", "must contain only letters, digits and _ . : - (got %q)", name)
		}
	}
	return nil
}

// ValidateResource checks a resource key with the rules of a lock key.
func ValidateResource(key string) error { return validateName("resource", key, MaxKeyLen) }

// ValidateResourceState checks a resource state: at most MaxStateLen bytes, printable; "" allowed.
func ValidateResourceState(field, s string) error {
	if s == "" {
		return nil
	}
	return validateName(field, s, MaxStateLen)
}

// ValidateArgs checks that args is empty or a JSON object of at most MaxArgsLen bytes.
func ValidateArgs(args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	if len(args) > MaxArgsLen {
		return invalid("args", "must be at most %d bytes (got %d)", MaxArgsLen, len(args))
	}
	return validateJSONObject("args", args)
}

// Validate checks a policy; "" is allowed (the default).
func (p BusyPolicy) Validate(field string) error {
	switch p {
	case "", PolicyQueue, PolicySkip, PolicyReject, PolicyReplace:
		return nil
	}
	return invalid(field, `must be "queue", "skip", "reject" or "replace" (got %q)`, string(p))
}

// Validate checks a kind definition and applies its defaults.
func (k *Kind) Validate() error {
	if err := ValidateKind(k.Name); err != nil {
		return err
	}
	if err := k.Policy.Validate("policy"); err != nil {
		return err
	}
	if k.Policy == "" {
		k.Policy = PolicyQueue
	}
	if k.MaxAttempts == 0 {
		k.MaxAttempts = DefaultMaxAttempts
	}
	if k.MaxAttempts < 1 || k.MaxAttempts > MaxMaxAttempts {
		return invalid("max_attempts", "must be between 1 and %d (got %d)", MaxMaxAttempts, k.MaxAttempts)
	}
	if k.Timeout < 0 || k.Timeout > MaxJobTimeout {
		return invalid("timeout", "must be between 0 and %s (got %s)", MaxJobTimeout, k.Timeout)
	}
	if err := k.validateReplace(); err != nil {
		return err
	}
	if err := validateRest("cooldown", k.Cooldown); err != nil {
		return err
	}
	if err := validateRest("resource_cooldown", k.ResourceCooldown); err != nil {
		return err
	}
	if k.Rate != nil {
		if err := k.Rate.Validate("rate"); err != nil {
			return err
		}
	}
	if len(k.FromStates) > MaxFromStates {
		return invalid("from_states", "must list at most %d states", MaxFromStates)
	}
	for _, s := range k.FromStates {
		if err := ValidateResourceState("from_states", s); err != nil {
			return err
		}
	}
	return firstError(ValidateResourceState("running_state", k.RunningState),
		ValidateResourceState("success_state", k.SuccessState),
		ValidateResourceState("failure_state", k.FailureState),
		validateMode("mode", k.Mode), validateLimitTemplates(k.Limits))
}

// Guarded reports whether the kind declares a state guard or state changes.
func (k *Kind) Guarded() bool {
	return len(k.FromStates) > 0 || k.RunningState != "" || k.SuccessState != "" || k.FailureState != ""
}

// Validate checks every field of a submit. The kind's existence is checked by the store.
func (p *SubmitParams) Validate() error {
	if err := firstError(ValidateKind(p.Kind), ValidateResource(p.Resource), ValidateArgs(p.Args),
		p.Policy.Validate("policy")); err != nil {
		return err
	}
	if p.IdempotencyKey != "" {
		if err := validateName("idempotency_key", p.IdempotencyKey, MaxIdempotencyKeyLen); err != nil {
			return err
		}
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxMaxAttempts {
		return invalid("max_attempts", "must be between 1 and %d, or 0 for the kind's (got %d)", MaxMaxAttempts, p.MaxAttempts)
	}
	if p.Priority < 0 || p.Priority > MaxPriority {
		return invalid("priority", "must be between 0 and %d (got %d)", MaxPriority, p.Priority)
	}
	if p.Delay < 0 || p.Delay > MaxDelay {
		return invalid("delay", "must be between 0 and %s (got %s)", MaxDelay, p.Delay)
	}
	if !p.ScheduledAt.IsZero() && p.Delay != 0 {
		return invalid("scheduled_at", "must not be set together with delay")
	}
	if err := p.validateReplace(); err != nil {
		return err
	}
	if err := ValidateTraceParent(p.TraceParent); err != nil {
		return err
	}
	return p.validateHolds()
}

// Validate checks the filters and applies the default limit.
func (p *JobListParams) Validate() error {
	if err := validateLimit(&p.Limit, MaxListLimit); err != nil {
		return err
	}
	if p.State != "" && !p.State.Valid() {
		return invalid("state", "must be one of %v (got %q)", JobStates, string(p.State))
	}
	if p.Kind != "" {
		if err := ValidateKind(p.Kind); err != nil {
			return err
		}
	}
	if err := validateFilter("resource", p.Resource, MaxKeyLen); err != nil {
		return err
	}
	if p.After < 0 {
		return invalid("after", "must not be negative")
	}
	return nil
}

// Validate checks every field.
func (p *ClaimParams) Validate() error {
	if err := ValidateHolder(p.Worker); err != nil {
		return &InvalidArgumentError{Field: "worker", Rule: err.(*InvalidArgumentError).Rule}
	}
	if err := ValidateOwner(p.Owner); err != nil {
		return err
	}
	if len(p.Kinds) == 0 {
		return invalid("kinds", "must name at least one kind")
	}
	for _, k := range p.Kinds {
		if err := ValidateKind(k); err != nil {
			return err
		}
	}
	if p.Limit < 1 || p.Limit > MaxClaimLimit {
		return invalid("limit", "must be between 1 and %d (got %d)", MaxClaimLimit, p.Limit)
	}
	return ValidateTTL(p.TTL)
}

// Validate checks every field.
func (p *HeartbeatParams) Validate() error {
	return firstError(validateJobID(p.ID), validateToken(p.Token), ValidateOwner(p.Owner), ValidateTTL(p.TTL))
}

// Validate checks every field.
func (p *CompleteParams) Validate() error {
	return firstError(validateJobID(p.ID), validateToken(p.Token), ValidateOwner(p.Owner))
}

// Validate checks every field, applies the default code and cuts a long message.
func (p *FailParams) Validate() error {
	if err := firstError(validateJobID(p.ID), validateToken(p.Token), ValidateOwner(p.Owner)); err != nil {
		return err
	}
	if p.Code == "" {
		p.Code = CodeHandlerError
	}
	if err := ValidateKind(p.Code); err != nil {
		return invalid("code", "must contain only letters, digits and _ . : - (1..%d bytes)", MaxKindLen)
	}
	p.Message = TruncateMessage(p.Message)
	if p.RetryAfter < 0 || p.RetryAfter > MaxDelay {
		return invalid("retry_after", "must be between 0 and %s (got %s)", MaxDelay, p.RetryAfter)
	}
	return nil
}

// TruncateMessage makes msg valid UTF-8 without NUL (which PostgreSQL cannot store), of at most
// MaxErrorMessageLen bytes: invalid bytes and NULs become U+FFFD. A message is what a handler's
// error said, so it is cleaned rather than refused.
func TruncateMessage(msg string) string {
	msg = string(bytes.ToValidUTF8([]byte(msg), []byte("\uFFFD")))
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	if len(msg) <= MaxErrorMessageLen {
		return msg
	}
	cut := MaxErrorMessageLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// Validate checks the filters.
func (p *PurgeParams) Validate() error {
	for _, id := range p.IDs {
		if err := validateJobID(id); err != nil {
			return err
		}
	}
	if p.Kind != "" {
		if err := ValidateKind(p.Kind); err != nil {
			return err
		}
	}
	return validateFilter("resource", p.Resource, MaxKeyLen)
}

// Validate checks every field and applies the default limit.
func (p *ReapParams) Validate() error {
	if err := validateLimit(&p.Limit, MaxListLimit); err != nil {
		return err
	}
	if p.RetryAfter < 0 || p.RetryAfter > MaxDelay {
		return invalid("retry_after", "must be between 0 and %s", MaxDelay)
	}
	return nil
}

// Validate checks every field and applies the default limit.
func (p *CleanParams) Validate() error {
	if p.Limit == 0 {
		p.Limit = 1000
	}
	if p.Limit < 1 || p.Limit > MaxCleanLimit {
		return invalid("limit", "must be between 1 and %d (got %d)", MaxCleanLimit, p.Limit)
	}
	if p.Age < 0 {
		return invalid("age", "must not be negative")
	}
	if p.DiscardedAge < 0 {
		return invalid("discarded_age", "must not be negative")
	}
	return nil
}

// Validate checks the filters and applies the default limit.
func (p *ResourceListParams) Validate() error {
	if err := validateLimit(&p.Limit, MaxListLimit); err != nil {
		return err
	}
	return firstError(validateFilter("prefix", p.Prefix, MaxKeyLen), validateFilter("after", p.After, MaxKeyLen))
}

// Validate checks every field.
func (p *SetResourceStateParams) Validate() error {
	if err := ValidateResource(p.Key); err != nil {
		return err
	}
	if p.State == "" {
		return invalid("state", "must not be empty")
	}
	return ValidateResourceState("state", p.State)
}

func validateJobID(id int64) error {
	if id <= 0 {
		return invalid("id", "must be a positive job ID (got %d)", id)
	}
	return nil
}

func validateToken(tok uint64) error {
	if tok == 0 || tok > 1<<63-1 {
		return invalid("token", "must be the attempt's fencing token (got %d)", tok)
	}
	return nil
}

func validateLimit(limit *int, max int) error {
	if *limit == 0 {
		*limit = DefaultListSize
	}
	if *limit < 0 || *limit > max {
		return invalid("limit", "must be between 1 and %d (got %d)", max, *limit)
	}
	return nil
}

// Validate checks every field and names an unknown actor.
func (p *ClearCooldownParams) Validate() error {
	if err := firstError(ValidateResource(p.Resource), validateFilter("principal", p.Principal, MaxHolderLen)); err != nil {
		return err
	}
	return validateAdminAction(&p.Actor, p.Reason)
}
