package store

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Jobs beyond one key. A job may hold its resource shared (Mode "shared", or its kind's), hold
// extra resources (Resources) and take a unit of limits (Limits, plus its kind's templates).
// Such a job's attempt is granted like a lease that asks the same (AcquireParams.Shared,
// Resources, Limits): all or nothing, with one token, by the rules of the line in store/holds.go.
// Its holds belong to the lease JobLeaseID(id), which no caller can name; a heartbeat extends
// them, and the attempt's end (complete, fail, expiry) ends them.
//
// Jobs of one resource still run one at a time, in order: a shared job shares its resource with
// shared leases, not with the next job in its queue.
//
// A waiting job has its place in the line of each of its keys and limits by its submit time
// (created_at): a lock request that arrives later waits behind it, and the claims of its kind's
// workers keep its tickets alive.

// Modes of a job or kind.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
)

// JobLeaseID is the lease ID of the holds of job id's attempts: it starts with a control
// character, so no caller's lease ID can equal it.
func JobLeaseID(id int64) string { return "\x1fjob:" + strconv.FormatInt(id, 10) }

// Beyond reports whether the job's attempts hold more than their resource, exclusive, or hold it
// in a tree, or are granted through holds (Holds).
func (j *Job) Beyond() bool {
	return j.Shared || j.Tree || j.Holds || len(j.Resources) > 0 || len(j.Limits) > 0
}

// AcquireParams are the lease that job j's attempt asks for, to be granted to worker on behalf
// of owner for ttl. Its place in the lines is the job's submit time.
func (j *Job) AcquireParams(worker, owner string, ttl time.Duration) *AcquireParams {
	return &AcquireParams{Key: j.Resource, LeaseID: JobLeaseID(j.ID), Holder: worker, Owner: owner, TTL: ttl,
		Shared: j.Shared, Resources: j.Resources, Limits: j.Limits, Wait: true}
}

// Beyond reports whether the submit asks for more than the resource, exclusive (the kind may
// ask too: see ResolveHolds).
func (p *SubmitParams) Beyond() bool {
	return p.Mode == ModeShared || len(p.Resources) > 0 || len(p.Limits) > 0
}

// validateHolds checks Mode, Resources and Limits by the rules of a lease's.
func (p *SubmitParams) validateHolds() error {
	if err := validateMode("mode", p.Mode); err != nil {
		return err
	}
	a := AcquireParams{Key: p.Resource, Resources: p.Resources, Limits: p.Limits}
	return a.validateBeyond()
}

func validateMode(field, m string) error {
	if m != "" && m != ModeExclusive && m != ModeShared {
		return invalid(field, "must be %q or %q (got %q)", ModeExclusive, ModeShared, m)
	}
	return nil
}

// argRef is a template's reference to a top-level argument.
var argRef = regexp.MustCompile(`\{args\.([A-Za-z0-9_]+)\}`)

// validateLimitTemplates checks a kind's limits: at most MaxLimits, each a limit name once its
// {args.NAME} parts are filled, and no brace outside them.
func validateLimitTemplates(ts []string) error {
	if len(ts) > MaxLimits {
		return invalid("limits", "must name at most %d limits (got %d)", MaxLimits, len(ts))
	}
	for i, t := range ts {
		filled := argRef.ReplaceAllString(t, "x")
		if strings.ContainsAny(filled, "{}") {
			return invalid("limits", "%q: a template may hold {args.NAME} parts only (NAME: letters, digits, _)", t)
		}
		if err := ValidateLimitName(filled); err != nil {
			return err
		}
		if slices.Contains(ts[:i], t) {
			return invalid("limits", "must not name a limit twice (%q)", t)
		}
	}
	return nil
}

// ResolveHolds is what a job submitted with p, of kind k, holds: its mode (p's, else k's) and its
// limits (p's, then k's templates filled from p.Args, without repeats). A template whose
// argument is missing, or is not a string or a number, is an invalid argument naming it.
func ResolveHolds(k *Kind, p *SubmitParams) (shared bool, limits []string, err error) {
	mode := p.Mode
	if mode == "" {
		mode = k.Mode
	}
	limits = slices.Clone(p.Limits)
	if len(k.Limits) > 0 {
		var args map[string]json.RawMessage
		if len(p.Args) > 0 {
			if err := json.Unmarshal(p.Args, &args); err != nil {
				return false, nil, invalid("args", "must be a JSON object")
			}
		}
		for _, t := range k.Limits {
			name, err := fillTemplate(k.Name, t, args)
			if err != nil {
				return false, nil, err
			}
			if !slices.Contains(limits, name) {
				limits = append(limits, name)
			}
		}
	}
	if len(limits) > MaxLimits {
		return false, nil, invalid("limits", "must name at most %d limits with the kind's (got %d)", MaxLimits, len(limits))
	}
	for _, l := range limits {
		if err := ValidateLimitName(l); err != nil {
			return false, nil, err
		}
	}
	if len(limits) == 0 {
		limits = nil
	}
	return mode == ModeShared, limits, nil
}

// fillTemplate fills the {args.NAME} parts of kind's limit template t from args.
func fillTemplate(kind, t string, args map[string]json.RawMessage) (string, error) {
	var bad error
	out := argRef.ReplaceAllStringFunc(t, func(ref string) string {
		name := argRef.FindStringSubmatch(ref)[1]
		raw, ok := args[name]
		if !ok {
			bad = firstError(bad, invalid("args."+name, "must be set: kind %q takes a unit of limit %q", kind, t))
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String()
		}
		bad = firstError(bad, invalid("args."+name, "must be a string or a number: kind %q takes a unit of limit %q", kind, t))
		return ""
	})
	return out, bad
}

// RefuseBeyondJob is what a job store that cannot hold more than a job's resource, exclusive,
// answers a submit that asks for more: an *UnsupportedError naming the store and the feature.
func RefuseBeyondJob(storeName string, p *SubmitParams) error {
	switch {
	case p.Mode == ModeShared:
		return &UnsupportedError{Store: storeName, Feature: "shared jobs"}
	case len(p.Resources) > 0:
		return &UnsupportedError{Store: storeName, Feature: "jobs on several resources"}
	case len(p.Limits) > 0:
		return &UnsupportedError{Store: storeName, Feature: "jobs with limits"}
	}
	return nil
}

// RefuseBeyondKind is RefuseBeyondJob for a kind's mode and limits.
func RefuseBeyondKind(storeName string, k *Kind) error {
	switch {
	case k.Mode == ModeShared:
		return &UnsupportedError{Store: storeName, Feature: "shared jobs"}
	case len(k.Limits) > 0:
		return &UnsupportedError{Store: storeName, Feature: "jobs with limits"}
	}
	return nil
}

// JobOfLeaseID is the job whose attempts hold as lease ID id (JobLeaseID), if it is one.
func JobOfLeaseID(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, "\x1fjob:")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}
