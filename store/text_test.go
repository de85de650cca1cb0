package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/store"
)

func TestJSONTextRule(t *testing.T) {
	for _, c := range []struct {
		raw  string
		nul  bool
		want string // a part of the rule; "" for none
	}{
		{`{"a":"b"}`, true, ""},
		{`{"a":"\u00e9\ud83d\ude00\"\\u0000"}`, true, ""}, // a pair; \\u0000 is a backslash and "u0000"
		{`{"a":"\u0000"}`, false, ""},
		{`{"a":"\u0000"}`, true, `\u0000`},
		{`{"a":"\ud800"}`, true, "surrogate"},
		{`{"a":"\uDBFFx"}`, true, "surrogate"},
		{`{"a":"\udc00"}`, true, "surrogate"},
		{`{"a":"\ud800\ud800"}`, true, "surrogate"},
		{`{"\ud800":1}`, true, "surrogate"},
		{"{\"a\":\"\xff\"}", true, "UTF-8"},
		{"{\"a\":\"\xed\xa0\x80\"}", true, "UTF-8"}, // a surrogate encoded in UTF-8
		{`{"a":"\ud8`, true, ""},                    // cut short: not read past the end
		{`"\`, true, ""},
		{`\ud800`, true, ""}, // outside a string: not an escape
	} {
		got := store.JSONTextRule([]byte(c.raw), c.nul)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("JSONTextRule(%q, %v) = %q, want %q", c.raw, c.nul, got, c.want)
		}
	}
}

// Text that PostgreSQL refuses, or that a JSON decoder would silently change, is invalid input
// for every backend: the params' Validate names the field.
func TestValidateRefusesNonText(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		field string
	}{
		{"list prefix NUL", (&store.ListParams{Prefix: "a\x00"}).Validate(), "prefix"},
		{"list prefix invalid UTF-8", (&store.ListParams{Prefix: "a\xff"}).Validate(), "prefix"},
		{"list cursor invalid UTF-8", (&store.ListParams{After: "\xff"}).Validate(), "cursor"},
		{"list holder NUL", (&store.ListParams{Holder: "\x00"}).Validate(), "holder"},
		{"events key", (&store.EventsParams{Key: "\xfe"}).Validate(), "key"},
		{"jobs resource", (&store.JobListParams{Resource: "r\x00"}).Validate(), "resource"},
		{"jobs kind", (&store.JobListParams{Kind: "k\xff"}).Validate(), "kind"},
		{"resources prefix", (&store.ResourceListParams{Prefix: "\xff"}).Validate(), "prefix"},
		{"resources after", (&store.ResourceListParams{After: "a\x00"}).Validate(), "after"},
		{"purge resource", (&store.PurgeParams{Resource: "\xff"}).Validate(), "resource"},
		{"metadata invalid UTF-8", store.ValidateMetadata([]byte("{\"a\":\"\xff\"}")), "metadata"},
		{"metadata surrogate", store.ValidateMetadata([]byte(`{"a":"\ud800"}`)), "metadata"},
		{"metadata NUL", store.ValidateMetadata([]byte(`{"a":"\u0000"}`)), "metadata"},
		{"args invalid UTF-8", store.ValidateArgs([]byte("{\"\xff\":1}")), "args"},
		{"args surrogate", store.ValidateArgs([]byte(`{"a":["\udfff"]}`)), "args"},
		{"args NUL", store.ValidateArgs([]byte(`{"a":"x\u0000"}`)), "args"},
		{"force-release reason NUL", (&store.ForceReleaseParams{Key: "k", Reason: "a\x00b"}).Validate(), "reason"},
		{"clear-rest reason NUL", (&store.ClearRestParams{Key: "k", Reason: "a\x00b"}).Validate(), "reason"},
		{"submit idempotency key", (&store.SubmitParams{Kind: "k", Resource: "r", IdempotencyKey: "\xff"}).Validate(), "idempotency_key"},
		{"claim worker", (&store.ClaimParams{Worker: "w\xff", Kinds: []string{"k"}, Limit: 1, TTL: store.MinTTL}).Validate(), "worker"},
		{"state", (&store.SetResourceStateParams{Key: "r", State: "S\xff"}).Validate(), "state"},
	} {
		var inv *store.InvalidArgumentError
		if !errors.As(c.err, &inv) || inv.Field != c.field {
			t.Errorf("%s: %v, want an invalid argument naming %q", c.name, c.err, c.field)
		}
	}
	if err := (&store.ForceReleaseParams{Key: "k", Reason: "line 1\n\tline 2"}).Validate(); err != nil {
		t.Errorf("reason with a newline and a tab: %v", err)
	}
	if err := store.ValidateMetadata(json.RawMessage(`{"a":"\u00e9\ud83d\ude00"}`)); err != nil {
		t.Errorf("metadata with escapes of valid text: %v", err)
	}
}

func TestTruncateMessageMakesStorableText(t *testing.T) {
	if got := store.TruncateMessage("a\x00b\xffc"); got != "a\uFFFDb\uFFFDc" {
		t.Fatalf("TruncateMessage = %q", got)
	}
}
