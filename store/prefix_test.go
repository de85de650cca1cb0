package store_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batonhq/baton/store"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"a/", "a0", true},
		{"p%", "p&", true},
		{"p_", "p`", true},
		{`p\`, "p]", true},
		{"z~", "z\x7f", true},
		{"é", "ê", true},                    // C3 A9 -> C3 AA
		{"a\u00bf", "a\u00c0", true},        // C2 BF -> C3 80: the carry moves into the lead byte
		{"a\u07ff", "a\u0800", true},        // two bytes -> three
		{"a\ud7ff", "a\ue000", true},        // past the surrogates
		{"a\uffff", "a\U00010000", true},    // three bytes -> four
		{"a\U0010ffff", "b", true},          // the greatest code point carries
		{"\U0010ffff\U0010ffff", "", false}, // nothing is greater
		{"a\xff", "b", true},                // bytes: a trailing 0xFF carries
		{"\xff\xff", "", false},             // bytes: nothing is greater
		{"a\xfe", "a\xff", true},            // bytes
		{"日本", "日札", true},                  // 本 U+672C -> U+672D
	} {
		end, ok := store.PrefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, ok, c.end, c.ok)
		}
		if ok && utf8.ValidString(c.prefix) && !utf8.ValidString(end) {
			t.Errorf("PrefixEnd(%q) = %q: not valid UTF-8", c.prefix, end)
		}
	}
}

// Every key with the prefix is inside [prefix, end), every key without it outside.
func TestPrefixEndBoundsExactly(t *testing.T) {
	keys := []string{"", "a", "a/", "a/1", "a/\U0010ffff", "a0", "a.", "b", "é", "éa", "ê", "ë",
		"a\u00bf", "a\u00bfz", "a\u00c0", "\U0010ffff", "\U0010ffffa", "\U0010ffff\U0010ffff", "a\ud7ffx", "a\ue000"}
	for _, prefix := range keys {
		end, ok := store.PrefixEnd(prefix)
		for _, k := range keys {
			in := k >= prefix && (!ok || k < end)
			if in != strings.HasPrefix(k, prefix) {
				t.Errorf("prefix %q, end %q (ok %v): key %q in range = %v, has prefix = %v", prefix, end, ok, k, in, !in)
			}
		}
	}
}
