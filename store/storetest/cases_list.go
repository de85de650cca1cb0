package storetest

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// listEdgeKeys are keys around the edges of prefix ranges: keys that a prefix is a strict prefix
// of, LIKE and GLOB wildcards and escapes, multi-byte UTF-8 whose next code point changes the
// lead byte or the length, the greatest code point, and the first key past each range's end.
var listEdgeKeys = []string{
	"eddz", "edge", "edge.", "edge/", "edge0",
	"edge/ab", "edge/ab/1", "edge/abc", "edge/ab%", "edge/ab_x", "edge/abX", "edge/ac",
	`edge/a\b`, `edge/a\\`, "edge/a%b", "edge/a_b", "edge/a*b", "edge/a?b", "edge/a[b]", "edge/a^b",
	"edge/e", "edge/é", "edge/éa", "edge/ê",
	"edge/\u00bf", "edge/\u00bfz", "edge/\u00c0",
	"edge/\u07ff", "edge/\u0800",
	"edge/\U0010ffff", "edge/\U0010ffffz",
	"edge/日本", "edge/日本/x", "edge/日札",
}

// testListPrefixEdges lists by every prefix of interest, whole and one lease per page, and
// compares with strings.HasPrefix over the keys held.
func testListPrefixEdges(t *testing.T, h Harness) {
	e := newEnv(t, h, nil)
	for _, k := range listEdgeKeys {
		e.acquire(k, baton.WithHolder("h-"+k))
	}
	gone := e.acquire("edge/ab-gone")
	if err := gone.Release(e.ctx); err != nil {
		t.Fatal(err)
	}
	held := append([]string(nil), listEdgeKeys...)
	sort.Strings(held)
	want := func(prefix, after string) []string {
		var out []string
		for _, k := range held {
			if strings.HasPrefix(k, prefix) && k > after {
				out = append(out, k)
			}
		}
		return out
	}
	list := func(p store.ListParams) []string {
		t.Helper()
		ls, err := e.store.List(e.ctx, &p)
		if err != nil {
			t.Fatalf("List(%+v): %v", p, err)
		}
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.Key)
		}
		return ks
	}
	prefixes := []string{"", "e", "edge", "edge/", "edge/ab", "edge/ab/", "edge/ab/1", "edge/ab%", "edge/ab_",
		`edge/a\`, `edge/a\\`, "edge/a%", "edge/a_", "edge/a*", "edge/a?", "edge/a[", "edge/e", "edge/é",
		"edge/\u00bf", "edge/\u07ff", "edge/\U0010ffff", "edge/日", "edge/日本", "edge/zzz", "f"}
	for _, prefix := range prefixes {
		if got := list(store.ListParams{Prefix: prefix, Limit: store.MaxListLimit}); !reflect.DeepEqual(got, want(prefix, "")) {
			t.Errorf("prefix %q: listed %q, want %q", prefix, got, want(prefix, ""))
		}
		var paged []string
		for after := ""; ; {
			page := list(store.ListParams{Prefix: prefix, After: after, Limit: 1})
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = page[len(page)-1]
			if len(paged) > len(held) {
				t.Fatalf("prefix %q: paging does not end: %q", prefix, paged)
			}
		}
		if !reflect.DeepEqual(paged, want(prefix, "")) {
			t.Errorf("prefix %q one per page: listed %q, want %q", prefix, paged, want(prefix, ""))
		}
		// A cursor before the range, and one inside it.
		for _, after := range []string{"a", "edge/ab", "edge/é"} {
			got := list(store.ListParams{Prefix: prefix, After: after, Limit: store.MaxListLimit})
			if !reflect.DeepEqual(got, want(prefix, after)) {
				t.Errorf("prefix %q after %q: listed %q, want %q", prefix, after, got, want(prefix, after))
			}
		}
	}
	// The holder filter combines with the prefix.
	if got := list(store.ListParams{Prefix: "edge/ab", Holder: "h-edge/abc", Limit: 10}); !reflect.DeepEqual(got, []string{"edge/abc"}) {
		t.Errorf("prefix edge/ab, holder h-edge/abc: listed %q", got)
	}
	if got := list(store.ListParams{Prefix: "edge/ab", Holder: "h-edge/é", Limit: 10}); len(got) != 0 {
		t.Errorf("prefix edge/ab, holder h-edge/é: listed %q, want none", got)
	}
}
