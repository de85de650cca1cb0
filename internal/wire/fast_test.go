package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func fastLeases() []Lease {
	at := T(time.Date(2026, 12, 2, 9, 30, 1, 234_567_000, time.UTC))
	exp := T(at.Add(15 * time.Second))
	return []Lease{
		{Key: "cyc/00001", LeaseID: "0123456789abcdef0123456789abcdef", Holder: "vm:1:ab", Token: 42, AcquiredAt: at, ExpiresAt: exp, TTLLeftMs: 15000},
		{Key: "k", Holder: "h", Token: 1<<64 - 1, AcquiredAt: at, ExpiresAt: exp, TTLLeftMs: -5},
		{Key: "k", Holder: "h", Owner: "ci", Token: 7, TookOver: true, WaitedMs: 1200, Shared: true},
		{},
		// Shapes the fast path leaves to encoding/json.
		{Key: "a<b", Holder: "h", Token: 1, AcquiredAt: at},
		{Key: "a>b", Holder: "h&co", Token: 1, AcquiredAt: at},
		{Key: "ключ", Holder: "h"},
		{Key: "tab\there", Holder: `quo"te\`},
		{Key: "k", Holder: "h", Metadata: json.RawMessage(`{"a": 1}`)},
		{Key: "k", Holder: "h", Resources: []string{"r"}, Limits: []string{"l"}, Slots: map[string]int{"l": 0}},
		{Key: "k", Holder: "h", Resources: []string{}},
	}
}

// encoded is what json.Encoder writes for v.
func encoded(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestAppendLeaseResponseIsEncodingJSON(t *testing.T) {
	fast := 0
	for _, l := range fastLeases() {
		r := LeaseResponse{Lease: l}
		b, ok := AppendLeaseResponse([]byte("x"), &r)
		if !ok {
			if string(b) != "x" {
				t.Errorf("%+v: not written, yet b changed to %q", l, b)
			}
			continue
		}
		fast++
		if want := encoded(t, r); !bytes.Equal(b[1:], want) {
			t.Errorf("%+v:\n got %s\nwant %s", l, b[1:], want)
		}
	}
	if fast < 4 {
		t.Errorf("the fast path wrote %d leases, want 4", fast)
	}
}

func TestAppendReleaseResponseIsEncodingJSON(t *testing.T) {
	for _, r := range []ReleaseResponse{{}, {Released: true, HeldMs: 1234}, {AlreadyReleased: true, HeldMs: -1}} {
		if got, want := AppendReleaseResponse(nil, &r), encoded(t, r); !bytes.Equal(got, want) {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// TestParseIsUnmarshal: what the parsers read is what json.Unmarshal reads, on the answers the
// server writes and on variants of them (spacing, order, duplicates, other shapes).
func TestParseIsUnmarshal(t *testing.T) {
	var docs []string
	for _, l := range fastLeases() {
		docs = append(docs, string(encoded(t, LeaseResponse{Lease: l})))
	}
	docs = append(docs,
		` { "lease" : { "token" : 3 , "key" : "k" , "holder":"h", "acquired_at": null } } `+"\n",
		`{"lease":{"key":"a","key":"b","token":0}}`,
		`{"lease":{"key":"a"},"lease":{"holder":"b"}}`,
		`{"lease":{}}`, `{}`, `{"lease":null}`, `{"lease":{"Key":"a"}}`, `{"lease":{"token":-1}}`,
		`{"lease":{"token":1.5}}`, `{"lease":{"token":1e3}}`, `{"lease":{"token":01}}`, `{"lease":{"ttl_left_ms":-0}}`,
		`{"lease":{"token":18446744073709551616}}`, `{"lease":{"acquired_at":"2026-12-02T09:30:01Z"}}`,
		`{"lease":{"acquired_at":"2026-12-02T10:30:01.5+01:00"}}`, `{"lease":{"acquired_at":"yesterday"}}`,
		`{"lease":{"key":"k"}} trailing`, `{"lease":{"key":"k"}`, `{"lease":{"key":"k",}}`, `{"lease":{"took_over":tru}}`,
		`{"lease":{"key":"a\u0062"}}`, `{"lease":{"extra":1}}`, ``, `[]`)
	parsed := 0
	for _, d := range docs {
		var fast LeaseResponse
		if !ParseLeaseResponse([]byte(d), &fast) {
			continue
		}
		parsed++
		var slow LeaseResponse
		if err := json.Unmarshal([]byte(d), &slow); err != nil {
			t.Errorf("%s: parsed, but json.Unmarshal: %v", d, err)
			continue
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\n parsed    %+v\n Unmarshal %+v", d, fast, slow)
		}
	}
	if parsed < 10 {
		t.Errorf("parsed %d documents, want at least 10", parsed)
	}
	rel := []string{`{"released":true,"already_released":false,"held_ms":12}` + "\n", `{"held_ms":-3,"released":false}`,
		`{"released":1}`, `{"held_ms":"1"}`, `{"released":true,"other":1}`, `{}`}
	parsed = 0
	for _, d := range rel {
		var fast ReleaseResponse
		if !ParseReleaseResponse([]byte(d), &fast) {
			continue
		}
		parsed++
		var slow ReleaseResponse
		if err := json.Unmarshal([]byte(d), &slow); err != nil || fast != slow {
			t.Errorf("%s: parsed %+v, json.Unmarshal %+v, %v", d, fast, slow, err)
		}
	}
	if parsed != 3 {
		t.Errorf("parsed %d release answers, want 3", parsed)
	}
}

// FuzzParseLeaseResponse: whatever the parser accepts, json.Unmarshal reads the same.
func FuzzParseLeaseResponse(f *testing.F) {
	for _, l := range fastLeases() {
		var b bytes.Buffer
		_ = json.NewEncoder(&b).Encode(LeaseResponse{Lease: l})
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast LeaseResponse
		if !ParseLeaseResponse(data, &fast) {
			return
		}
		var slow LeaseResponse
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("%q: parsed, but json.Unmarshal: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\n parsed    %+v\n Unmarshal %+v", data, fast, slow)
		}
	})
}

func TestTimeUnmarshal(t *testing.T) {
	for _, d := range []string{`"2026-12-02T09:30:01.234Z"`, `"2026-12-02T10:30:01+01:00"`, `"2026-12-02T09:30:01\u002e5Z"`} {
		var v Time
		if err := json.Unmarshal([]byte(d), &v); err != nil || v.Location() != time.UTC || v.Year() != 2026 {
			t.Errorf("%s: %v, %v", d, v, err)
		}
	}
	for _, d := range []string{`""`, `"x"`, `5`} {
		var v Time
		if err := json.Unmarshal([]byte(d), &v); err == nil {
			t.Errorf("%s: no error", d)
		}
	}
}

// strict decodes as the server does: unknown fields refused, one value.
func strict(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("trailing data")

func fastAcquires() []AcquireRequest {
	return []AcquireRequest{
		{Key: "cyc-http/00001", LeaseID: "0123456789abcdef", Holder: "vm:1:ab", TTLMs: Ms(15 * time.Second)},
		{Key: "k", TTLMs: Ms(0), WaitMs: 30000, CooldownMs: 5, LockDelayMs: -1, First: true, FirstReason: "outage", Shared: true},
		{},
		{Key: "k<", Holder: "h"},
		{Key: "k", Metadata: json.RawMessage(`{"a":1}`)},
		{Key: "k", Resources: []string{"r"}},
		{Key: "k", Limits: []string{}},
	}
}

func TestAppendRequestsAreMarshal(t *testing.T) {
	fast := 0
	for _, r := range fastAcquires() {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := AppendAcquireRequest(nil, &r); ok {
			fast++
			if !bytes.Equal(b, want) {
				t.Errorf("got %s, want %s", b, want)
			}
		}
	}
	if fast != 3 {
		t.Errorf("wrote %d acquires, want 3", fast)
	}
	for _, r := range []ReleaseRequest{{Key: "k", LeaseID: "id"}, {}} {
		want, _ := json.Marshal(r)
		if b, ok := AppendReleaseRequest(nil, &r); !ok || !bytes.Equal(b, want) {
			t.Errorf("got %s %v, want %s", b, ok, want)
		}
	}
	if _, ok := AppendReleaseRequest(nil, &ReleaseRequest{Key: "k&"}); ok {
		t.Error("wrote a key that needs escaping")
	}
}

func TestParseRequestsAreStrictDecode(t *testing.T) {
	var docs []string
	for _, r := range fastAcquires() {
		b, _ := json.Marshal(r)
		docs = append(docs, string(b))
	}
	docs = append(docs, `{"key":"k","ttl_ms":1,"ttl_ms":2}`, `{"key":"k","ttl_ms":null}`, `{"key":"k","KEY":"j"}`,
		`{"key":"k","lease_id":"x","unknown":1}`, ` {"key" : "k" , "wait_ms" : 0 } `, `{"key":"k"} {}`, `{"key":"k"}x`,
		`{"key":1}`, `{"first":"yes"}`, `{"wait_ms":9223372036854775808}`, `{"wait_ms":-9223372036854775808}`, `{"key":"k",}`)
	parsed := 0
	for _, d := range docs {
		var fast AcquireRequest
		if !ParseAcquireRequest([]byte(d), &fast) {
			continue
		}
		parsed++
		var slow AcquireRequest
		if err := strict([]byte(d), &slow); err != nil {
			t.Errorf("%s: parsed, but the strict decoder: %v", d, err)
			continue
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\n parsed %+v\n decoded %+v", d, fast, slow)
		}
	}
	if parsed < 6 {
		t.Errorf("parsed %d acquires, want at least 6", parsed)
	}
	parsed = 0
	for _, d := range []string{`{"key":"k","lease_id":"x"}`, `{"lease_id":"x"}`, `{"key":"k","lease_id":"x","holder":"h"}`, `{"key":"k","lease_id":null}`, `{}`} {
		var fast ReleaseRequest
		if !ParseReleaseRequest([]byte(d), &fast) {
			continue
		}
		parsed++
		var slow ReleaseRequest
		if err := strict([]byte(d), &slow); err != nil || fast != slow {
			t.Errorf("%s: parsed %+v, decoded %+v, %v", d, fast, slow, err)
		}
	}
	if parsed != 3 {
		t.Errorf("parsed %d releases, want 3", parsed)
	}
}

// FuzzParseAcquireRequest: whatever the parser accepts, the server's strict decoder reads the
// same.
func FuzzParseAcquireRequest(f *testing.F) {
	for _, r := range fastAcquires() {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast AcquireRequest
		if !ParseAcquireRequest(data, &fast) {
			return
		}
		var slow AcquireRequest
		if err := strict(data, &slow); err != nil {
			t.Fatalf("%q: parsed, but the strict decoder: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\n parsed %+v\n decoded %+v", data, fast, slow)
		}
	})
}

// The fast paths write and read the fields of these types by name: a field added to one of them
// must be added to fast.go too (or make it fall back to encoding/json), or the fast path would
// drop it silently. This list is the fields fast.go knows.
func TestFastPathsKnowEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{Lease{}, []string{"Key", "LeaseID", "Holder", "Owner", "Token", "AcquiredAt", "ExpiresAt", "TTLLeftMs", "Metadata",
			"TookOver", "WaitedMs", "Shared", "Resources", "Limits", "Slots"}},
		{LeaseResponse{}, []string{"Lease"}},
		{ReleaseResponse{}, []string{"Released", "AlreadyReleased", "HeldMs"}},
		{AcquireRequest{}, []string{"Key", "LeaseID", "Holder", "TTLMs", "WaitMs", "Metadata", "CooldownMs", "LockDelayMs",
			"First", "FirstReason", "Shared", "Resources", "Limits"}},
		{ReleaseRequest{}, []string{"Key", "LeaseID"}},
	} {
		rt := reflect.TypeOf(c.v)
		var got []string
		for i := range rt.NumField() {
			got = append(got, rt.Field(i).Name)
		}
		if !reflect.DeepEqual(got, c.fields) {
			t.Errorf("wire.%s has fields %v; fast.go knows %v: teach fast.go the new field (or make it fall back), then this list",
				rt.Name(), got, c.fields)
		}
	}
}
