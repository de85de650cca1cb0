package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate bounds grants: at most Max in any sliding window of length Window, on the store's clock.
// Its text form (and its JSON form, a string) is "MAX/WINDOW" with a unit: "3/1h", "10/30s",
// "1/1d"; units s, m, h and d, or any Go duration ("3/1h30m").
//
// A kind's rate (Kind.Rate) counts the attempts its jobs start on one resource: a claim does not
// start a job whose kind's rate on its resource is reached; the job stays its resource's head and
// becomes claimable when the window frees (RateNext).
type Rate struct {
	Max    int
	Window time.Duration
}

// Bounds of a rate.
const (
	MaxRateMax    = 1_000_000
	MinRateWindow = time.Second
	MaxRateWindow = 30 * 24 * time.Hour
)

// CodeRateLimited: a job skipped (skip policy) because its kind's rate on its resource was
// reached at the submit; JobError.Until is when the window frees.
const CodeRateLimited = "rate_limited"

// ParseRate reads a rate's text form ("3/1h") and validates it; errors name field.
func ParseRate(field, s string) (Rate, error) {
	n, w, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, invalid(field, `must be "MAX/WINDOW", such as "3/1h" (got %q)`, s)
	}
	m, err := strconv.Atoi(n)
	if err != nil {
		return Rate{}, invalid(field+".max", "must be a whole number (got %q)", n)
	}
	d, err := parseWindow(w)
	if err != nil {
		return Rate{}, invalid(field+".window", `must be a duration with a unit s, m, h or d, such as "1h" (got %q)`, w)
	}
	r := Rate{Max: m, Window: d}
	return r, r.Validate(field)
}

// parseWindow reads "1d", "90m", "1h30m".
func parseWindow(w string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(w, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 10_000 {
			return 0, fmt.Errorf("bad days %q", w)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(w)
}

// String is the text form: the window in the largest of d, h, m, s that divides it.
func (r Rate) String() string {
	w := r.Window
	switch {
	case w > 0 && w%(24*time.Hour) == 0:
		return fmt.Sprintf("%d/%dd", r.Max, w/(24*time.Hour))
	case w > 0 && w%time.Hour == 0:
		return fmt.Sprintf("%d/%dh", r.Max, w/time.Hour)
	case w > 0 && w%time.Minute == 0:
		return fmt.Sprintf("%d/%dm", r.Max, w/time.Minute)
	case w > 0 && w%time.Second == 0:
		return fmt.Sprintf("%d/%ds", r.Max, w/time.Second)
	}
	return fmt.Sprintf("%d/%s", r.Max, w)
}

// MarshalText is the text form.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the text form; the value is validated (field "rate").
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate("rate", string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Validate checks the bounds; errors name field+".max" or field+".window".
func (r *Rate) Validate(field string) error {
	if r.Max < 1 || r.Max > MaxRateMax {
		return invalid(field+".max", "must be between 1 and %d (got %d)", MaxRateMax, r.Max)
	}
	if r.Window < MinRateWindow || r.Window > MaxRateWindow {
		return invalid(field+".window", "must be between %s and %s (got %s)", MinRateWindow, MaxRateWindow, r.Window)
	}
	return nil
}

// RateNext says whether rate is reached at now given the times of the grants it counted
// (ascending; older ones are ignored), and if so when its window frees: the grant that must
// leave the window for one more to fit, plus the window.
func RateNext(r Rate, grants []time.Time, now time.Time) (next time.Time, reached bool) {
	from := now.Add(-r.Window)
	i := 0
	for i < len(grants) && !grants[i].After(from) {
		i++
	}
	in := grants[i:]
	if len(in) < r.Max {
		return time.Time{}, false
	}
	return in[len(in)-r.Max].Add(r.Window), true
}

// KindRateScope names the counter of a kind's rate (its grants are counted per resource).
func KindRateScope(kind string) string { return "kind:" + kind }

// LimitRateScope names the counter of a limit's rate (key ""): every grant of a unit of the
// limit counts.
func LimitRateScope(name string) string { return "limit:" + name }

// PrefixRateScope names the counter of a prefix's rate (key ""): every grant of a key under the
// prefix counts, once per request.
func PrefixRateScope(prefix string) string { return "prefix:" + prefix }

// RateWait is a rate reached: grants that it counts wait until Next. Exactly one of Kind (a
// kind's rate on a resource), Limit (a limit's rate) and Prefix (a key prefix's rate) is set.
type RateWait struct {
	Kind   string
	Limit  string
	Prefix string
	Rate   Rate
	Next   time.Time // store clock
}

// Of names whose rate it is: `kind "K"`, `limit "L"` or `prefix "P"`.
func (w *RateWait) Of() string {
	switch {
	case w.Limit != "":
		return fmt.Sprintf("limit %q", w.Limit)
	case w.Prefix != "":
		return fmt.Sprintf("prefix %q", w.Prefix)
	}
	return fmt.Sprintf("kind %q", w.Kind)
}

// Message says it in a sentence.
func (w *RateWait) Message() string {
	return fmt.Sprintf("rate %s of %s reached, next at %s", w.Rate, w.Of(), w.Next.UTC().Format(time.RFC3339Nano))
}

// ScopedRate is a limit's or a prefix's rate as a grant meets it: its counter's scope (the key
// is always "") and who it belongs to.
type ScopedRate struct {
	Scope string
	Rate  Rate
	Wait  RateWait // Limit or Prefix set; Next filled when reached
}

// LimitRate is the ScopedRate of limit name's rate r.
func LimitRate(name string, r Rate) ScopedRate {
	return ScopedRate{Scope: LimitRateScope(name), Rate: r, Wait: RateWait{Limit: name, Rate: r}}
}

// PrefixRateOf is the ScopedRate of prefix's rate r.
func PrefixRateOf(prefix string, r Rate) ScopedRate {
	return ScopedRate{Scope: PrefixRateScope(prefix), Rate: r, Wait: RateWait{Prefix: prefix, Rate: r}}
}

// RateRefusal is the refusal of a lease request over a limit's or a prefix's rate: a
// *RestingError with ReasonRate on key, for the time until w.Next from now.
func RateRefusal(key string, w RateWait, now time.Time) *RestingError {
	wc := w
	return &RestingError{Key: key, Reason: ReasonRate, Remaining: max(w.Next.Sub(now), 0), Rate: &wc}
}

// RateSkipError is the error entry of a job skipped (skip policy) because its kind's rate on its
// resource was reached at now; until is when the window frees.
func RateSkipError(kind, resource string, r Rate, until, now time.Time) JobError {
	return JobError{At: now, Code: CodeRateLimited, Until: until,
		Message: fmt.Sprintf("rate %s of kind %q on resource %q reached: next at %s; skipped",
			r, kind, resource, until.UTC().Format(time.RFC3339Nano))}
}

// RateWaitSkipError is the error entry of a job on resource skipped (skip policy) because a rate
// of a limit or of a key prefix it would count in, w, was reached at now.
func RateWaitSkipError(w *RateWait, resource string, now time.Time) JobError {
	return JobError{At: now, Code: CodeRateLimited, Until: w.Next,
		Message: fmt.Sprintf("rate %s of %s reached for resource %q: next at %s; skipped",
			w.Rate, w.Of(), resource, w.Next.UTC().Format(time.RFC3339Nano))}
}
