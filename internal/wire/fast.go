package wire

import (
	"strconv"
	"time"
)

// Fast paths for the answers of the lock cycle (acquire, renew, release), which the server
// writes and the Go client reads once per call: encoding/json's reflection is a measurable part
// of an uncontended cycle's CPU. They cover the common shape only (no metadata, resources,
// limits nor slots; strings of printable ASCII that need no escaping) and say so when they do
// not apply, so that the caller falls back to encoding/json: the bytes written are exactly
// json.Encoder's, and the values read exactly json.Unmarshal's (fast_test.go checks both).

// AppendLeaseResponse appends r as json.Encoder.Encode writes it (a trailing newline included)
// and reports true, or returns b unchanged and false if r is not of the shape it writes.
func AppendLeaseResponse(b []byte, r *LeaseResponse) ([]byte, bool) {
	l := &r.Lease
	if len(l.Metadata) != 0 || l.Resources != nil || l.Limits != nil || l.Slots != nil ||
		!plain(l.Key) || !plain(l.LeaseID) || !plain(l.Holder) || !plain(l.Owner) {
		return b, false
	}
	b = append(b, `{"lease":{"key":"`...)
	b = append(b, l.Key...)
	b = append(b, '"')
	if l.LeaseID != "" {
		b = append(b, `,"lease_id":"`...)
		b = append(b, l.LeaseID...)
		b = append(b, '"')
	}
	b = append(b, `,"holder":"`...)
	b = append(b, l.Holder...)
	b = append(b, '"')
	if l.Owner != "" {
		b = append(b, `,"owner":"`...)
		b = append(b, l.Owner...)
		b = append(b, '"')
	}
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, l.Token, 10)
	b = append(b, `,"acquired_at":`...)
	b = l.AcquiredAt.appendJSON(b)
	b = append(b, `,"expires_at":`...)
	b = l.ExpiresAt.appendJSON(b)
	b = append(b, `,"ttl_left_ms":`...)
	b = strconv.AppendInt(b, l.TTLLeftMs, 10)
	if l.TookOver {
		b = append(b, `,"took_over":true`...)
	}
	if l.WaitedMs != 0 {
		b = append(b, `,"waited_ms":`...)
		b = strconv.AppendInt(b, l.WaitedMs, 10)
	}
	if l.Shared {
		b = append(b, `,"shared":true`...)
	}
	return append(b, "}}\n"...), true
}

// AppendReleaseResponse appends r as json.Encoder.Encode writes it (a trailing newline
// included).
func AppendReleaseResponse(b []byte, r *ReleaseResponse) []byte {
	b = append(b, `{"released":`...)
	b = strconv.AppendBool(b, r.Released)
	b = append(b, `,"already_released":`...)
	b = strconv.AppendBool(b, r.AlreadyReleased)
	b = append(b, `,"held_ms":`...)
	b = strconv.AppendInt(b, r.HeldMs, 10)
	return append(b, "}\n"...)
}

// appendJSON appends t as MarshalJSON writes it.
func (t Time) appendJSON(b []byte) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeLayout)
	return append(b, '"')
}

// plain reports whether s is written by encoding/json as is between quotes: printable ASCII
// other than the quote, the backslash and the characters it escapes for HTML (<, >, &).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// ParseLeaseResponse reads data, one JSON object and white space, into r as json.Unmarshal
// would, and reports true; or reports false, leaving r in an unspecified state, if data is not
// of the shape it reads (then decode data with encoding/json, which also gives the errors).
func ParseLeaseResponse(data []byte, r *LeaseResponse) bool {
	p := parser{b: data}
	*r = LeaseResponse{}
	ok := p.object(func(key string) bool {
		if key != "lease" {
			return false
		}
		return p.object(func(key string) bool { return p.leaseField(&r.Lease, key) })
	})
	return ok && p.end()
}

// ParseReleaseResponse is ParseLeaseResponse for a ReleaseResponse.
func ParseReleaseResponse(data []byte, r *ReleaseResponse) bool {
	p := parser{b: data}
	*r = ReleaseResponse{}
	ok := p.object(func(key string) bool {
		switch key {
		case "released":
			return p.bool(&r.Released)
		case "already_released":
			return p.bool(&r.AlreadyReleased)
		case "held_ms":
			return p.int(&r.HeldMs)
		}
		return false
	})
	return ok && p.end()
}

func (p *parser) leaseField(l *Lease, key string) bool {
	switch key {
	case "key":
		return p.str(&l.Key)
	case "lease_id":
		return p.str(&l.LeaseID)
	case "holder":
		return p.str(&l.Holder)
	case "owner":
		return p.str(&l.Owner)
	case "token":
		return p.uint(&l.Token)
	case "acquired_at":
		return p.time(&l.AcquiredAt)
	case "expires_at":
		return p.time(&l.ExpiresAt)
	case "ttl_left_ms":
		return p.int(&l.TTLLeftMs)
	case "took_over":
		return p.bool(&l.TookOver)
	case "waited_ms":
		return p.int(&l.WaitedMs)
	case "shared":
		return p.bool(&l.Shared)
	}
	return false
}

// parser reads the few JSON shapes above; any other gives up (false).
type parser struct {
	b []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (p *parser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// object reads an object, calling member for each member's name with the parser at its value.
func (p *parser) object(member func(key string) bool) bool {
	p.ws()
	if !p.lit("{") {
		return false
	}
	p.ws()
	if p.lit("}") {
		return true
	}
	for {
		var key string
		if !p.str(&key) {
			return false
		}
		p.ws()
		if !p.lit(":") {
			return false
		}
		p.ws()
		if !member(key) {
			return false
		}
		p.ws()
		if p.lit("}") {
			return true
		}
		if !p.lit(",") {
			return false
		}
		p.ws()
	}
}

// str reads a string of printable ASCII without escapes.
func (p *parser) str(dst *string) bool {
	if !p.lit(`"`) {
		return false
	}
	for j := p.i; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			*dst = string(p.b[p.i:j])
			p.i = j + 1
			return true
		case c < 0x20 || c > 0x7e || c == '\\':
			return false
		}
	}
	return false
}

func (p *parser) bool(dst *bool) bool {
	switch {
	case p.lit("true"):
		*dst = true
	case p.lit("false"):
		*dst = false
	default:
		return false
	}
	return true
}

// digits returns the integer at the parser, as JSON writes one (no fraction nor exponent).
func (p *parser) digits(signed bool) (string, bool) {
	j := p.i
	if signed && j < len(p.b) && p.b[j] == '-' {
		j++
	}
	d := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == d || (p.b[d] == '0' && j > d+1) {
		return "", false
	}
	if j < len(p.b) {
		switch p.b[j] {
		case '.', 'e', 'E':
			return "", false
		}
	}
	s := string(p.b[p.i:j])
	p.i = j
	return s, true
}

func (p *parser) int(dst *int64) bool {
	s, ok := p.digits(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	*dst = v
	return err == nil
}

func (p *parser) uint(dst *uint64) bool {
	s, ok := p.digits(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	*dst = v
	return err == nil
}

// time reads what Time.UnmarshalJSON reads: null, or an RFC 3339 string.
func (p *parser) time(dst *Time) bool {
	if p.lit("null") {
		*dst = Time{}
		return true
	}
	var s string
	if !p.str(&s) {
		return false
	}
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return false
	}
	*dst = Time{v.UTC()}
	return true
}

// ParseAcquireRequest is ParseLeaseResponse for the body of an acquire, as a decoder that
// refuses unknown fields reads it: a member it does not know, or a value of another shape
// (metadata, resources, limits, null), makes it give up.
func ParseAcquireRequest(data []byte, r *AcquireRequest) bool {
	p := parser{b: data}
	*r = AcquireRequest{}
	ok := p.object(func(key string) bool {
		switch key {
		case "key":
			return p.str(&r.Key)
		case "lease_id":
			return p.str(&r.LeaseID)
		case "holder":
			return p.str(&r.Holder)
		case "ttl_ms":
			var v int64
			if !p.int(&v) {
				return false
			}
			if r.TTLMs != nil {
				*r.TTLMs = v // as encoding/json does with a repeated member
			} else {
				r.TTLMs = &v
			}
			return true
		case "wait_ms":
			return p.int(&r.WaitMs)
		case "cooldown_ms":
			return p.int(&r.CooldownMs)
		case "lock_delay_ms":
			return p.int(&r.LockDelayMs)
		case "first":
			return p.bool(&r.First)
		case "first_reason":
			return p.str(&r.FirstReason)
		case "shared":
			return p.bool(&r.Shared)
		}
		return false
	})
	return ok && p.end()
}

// ParseReleaseRequest is ParseAcquireRequest for the body of a release.
func ParseReleaseRequest(data []byte, r *ReleaseRequest) bool {
	p := parser{b: data}
	*r = ReleaseRequest{}
	ok := p.object(func(key string) bool {
		switch key {
		case "key":
			return p.str(&r.Key)
		case "lease_id":
			return p.str(&r.LeaseID)
		}
		return false
	})
	return ok && p.end()
}

// AppendAcquireRequest appends r as json.Marshal writes it and reports true, or returns b
// unchanged and false if r is not of the shape it writes (metadata, resources, limits, strings
// that need escaping).
func AppendAcquireRequest(b []byte, r *AcquireRequest) ([]byte, bool) {
	if len(r.Metadata) != 0 || r.Resources != nil || r.Limits != nil ||
		!plain(r.Key) || !plain(r.LeaseID) || !plain(r.Holder) || !plain(r.FirstReason) {
		return b, false
	}
	b = append(b, `{"key":"`...)
	b = append(b, r.Key...)
	b = append(b, '"')
	if r.LeaseID != "" {
		b = append(b, `,"lease_id":"`...)
		b = append(b, r.LeaseID...)
		b = append(b, '"')
	}
	if r.Holder != "" {
		b = append(b, `,"holder":"`...)
		b = append(b, r.Holder...)
		b = append(b, '"')
	}
	if r.TTLMs != nil {
		b = append(b, `,"ttl_ms":`...)
		b = strconv.AppendInt(b, *r.TTLMs, 10)
	}
	for _, f := range [...]struct {
		name string
		v    int64
	}{{`,"wait_ms":`, r.WaitMs}, {`,"cooldown_ms":`, r.CooldownMs}, {`,"lock_delay_ms":`, r.LockDelayMs}} {
		if f.v != 0 {
			b = append(b, f.name...)
			b = strconv.AppendInt(b, f.v, 10)
		}
	}
	if r.First {
		b = append(b, `,"first":true`...)
	}
	if r.FirstReason != "" {
		b = append(b, `,"first_reason":"`...)
		b = append(b, r.FirstReason...)
		b = append(b, '"')
	}
	if r.Shared {
		b = append(b, `,"shared":true`...)
	}
	return append(b, '}'), true
}

// AppendReleaseRequest is AppendAcquireRequest for a release.
func AppendReleaseRequest(b []byte, r *ReleaseRequest) ([]byte, bool) {
	if !plain(r.Key) || !plain(r.LeaseID) {
		return b, false
	}
	b = append(b, `{"key":"`...)
	b = append(b, r.Key...)
	b = append(b, `","lease_id":"`...)
	b = append(b, r.LeaseID...)
	return append(b, `"}`...), true
}
