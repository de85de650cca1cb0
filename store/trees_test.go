package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestValidateTreePrefix(t *testing.T) {
	for _, ok := range []string{"cluster/", "org/cluster/", "a/", "ü/"} {
		if err := ValidateTreePrefix(ok); err != nil {
			t.Errorf("ValidateTreePrefix(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "cluster", "/", "/cluster/", "a//", "a//b/", "a\x01/", strings.Repeat("a", MaxKeyLen) + "/"} {
		var inv *InvalidArgumentError
		if err := ValidateTreePrefix(bad); !errors.As(err, &inv) || inv.Field != "prefix" {
			t.Errorf("ValidateTreePrefix(%q) = %v; want an invalid argument naming prefix", bad, err)
		}
	}
}

func TestValidateTreeOverlap(t *testing.T) {
	trees := []string{"cluster/", "org/a/"}
	for _, ok := range []string{"cluster/", "clusters/", "cluster-2/", "org/b/", "org/ab/"} {
		if err := ValidateTreeOverlap(ok, trees); err != nil {
			t.Errorf("ValidateTreeOverlap(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"cluster/eu-1/", "org/", "org/a/b/"} {
		var inv *InvalidArgumentError
		if err := ValidateTreeOverlap(bad, trees); !errors.As(err, &inv) || inv.Field != "prefix" || !strings.Contains(inv.Rule, "overlaps") {
			t.Errorf("ValidateTreeOverlap(%q) = %v; want an overlap naming prefix", bad, err)
		}
	}
}

func TestValidateTreeKey(t *testing.T) {
	deep := "c" + strings.Repeat("/x", MaxTreeDepth)
	for _, ok := range []string{"c", "c/a", "c/a/b", "c/a-b", deep} {
		if err := ValidateTreeKey("key", ok, "c/"); err != nil {
			t.Errorf("ValidateTreeKey(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"c/", "c//a", "c/a/", "c/a//b", deep + "/x"} {
		var inv *InvalidArgumentError
		if err := ValidateTreeKey("resources", bad, "c/"); !errors.As(err, &inv) || inv.Field != "resources" {
			t.Errorf("ValidateTreeKey(%q) = %v; want an invalid argument naming resources", bad, err)
		}
	}
}

func TestTreeOf(t *testing.T) {
	trees := []string{"a/", "cluster/", "org/x/"}
	for key, want := range map[string]string{
		"cluster": "cluster/", "cluster/eu-1": "cluster/", "clusters": "", "cluster-1/a": "", "org/x": "org/x/",
		"org": "", "org/y/z": "", "a": "a/", "b": "",
	} {
		if got := TreeOf(key, trees); got != want {
			t.Errorf("TreeOf(%q) = %q; want %q", key, got, want)
		}
	}
}

// TestTreeProbe checks the claim a store's one-probe lookup rests on: among trees that do not
// overlap, the greatest prefix <= TreeProbe(key) is key's tree if key has one.
func TestTreeProbe(t *testing.T) {
	trees := []string{"a/", "a-b/", "a0/", "cluster/", "cluster-1/", "cluster.x/", "clusters/", "org/x/", "org/x0/"}
	slices.Sort(trees)
	for _, key := range []string{"a", "a/b", "a-b", "a-b/c", "a0", "a.", "cluster", "cluster/eu-1/x", "cluster-1", "cluster-1/x",
		"cluster.x/y", "clusters/a", "clusterz", "org", "org/x", "org/x/y", "org/x-/y", "org/x0", "org/x1", "zz", "0"} {
		probe, best := TreeProbe(key), ""
		for _, p := range trees {
			if p <= probe {
				best = p
			}
		}
		if !strings.HasPrefix(probe, best) {
			best = ""
		}
		if want := TreeOf(key, trees); best != want {
			t.Errorf("probe of %q found tree %q; want %q", key, best, want)
		}
	}
}

func TestTreeAncestorsAndRange(t *testing.T) {
	if got := TreeAncestors("cluster/eu-1/node/a", "cluster/"); !slices.Equal(got, []string{"cluster/eu-1/node", "cluster/eu-1", "cluster"}) {
		t.Fatalf("ancestors: %q", got)
	}
	if got := TreeAncestors("org/x/a", "org/x/"); !slices.Equal(got, []string{"org/x"}) {
		t.Fatalf("ancestors under a prefix with a slash: %q", got)
	}
	if got := TreeAncestors("cluster", "cluster/"); len(got) != 0 {
		t.Fatalf("ancestors of the root: %q", got)
	}
	if d := TreeDepth("cluster/eu-1/node/a", "cluster/"); d != 3 {
		t.Fatalf("depth %d", d)
	}
	lo, hi := DescendantRange("c/a")
	for k, in := range map[string]bool{"c/a/x": true, "c/a/x/y": true, "c/a/\U0010ffff": true, "c/a": false, "c/a-x": false,
		"c/a0": false, "c/a.x": false, "c/ab": false, "c/b": false} {
		if got := lo <= k && k < hi; got != in {
			t.Errorf("%q in the descendant range of c/a: %v; want %v", k, got, in)
		}
	}
}

func TestRelateAndMatrix(t *testing.T) {
	const p = "c/"
	for _, c := range []struct {
		held, want string
		rel        Relation
	}{
		{"c/a/b", "c/a/b", Same}, {"c/a", "c/a/b", Ancestor}, {"c", "c/a/b", Ancestor}, {"c/a/b/x", "c/a/b", Descendant},
		{"c/a/c", "c/a/b", Unrelated}, {"c/a/b-x", "c/a/b", Unrelated}, {"c/a/bb", "c/a/b", Unrelated}, {"d/a", "d/a/b", Unrelated},
	} {
		if got := Relate(c.held, c.want, p); got != c.rel {
			t.Errorf("Relate(%q, %q) = %v; want %v", c.held, c.want, got, c.rel)
		}
	}
	if got := Relate("x/a", "x/a/b", ""); got != Unrelated {
		t.Errorf("keys in no tree: %v", got)
	}
	for _, rel := range []Relation{Same, Ancestor, Descendant} {
		if !TreeCompatible(rel, true, true) || TreeCompatible(rel, true, false) || TreeCompatible(rel, false, true) || TreeCompatible(rel, false, false) {
			t.Errorf("%v: related holds must conflict unless both shared", rel)
		}
	}
	if !TreeCompatible(Unrelated, false, false) {
		t.Error("unrelated holds never conflict")
	}
}

func TestTreeParams(t *testing.T) {
	p := SetTreeParams{Prefix: "c/"}
	if err := p.Validate(); err != nil || p.Actor != "unknown" {
		t.Fatalf("%v, actor %q", err, p.Actor)
	}
	var inv *InvalidArgumentError
	if err := (&DeleteTreeParams{Prefix: "c"}).Validate(); !errors.As(err, &inv) || inv.Field != "prefix" {
		t.Fatal(err)
	}
	lp := TreesParams{}
	if err := lp.Validate(); err != nil || lp.Limit != DefaultListSize {
		t.Fatal(err, lp.Limit)
	}
	e := &TreeInUseError{Prefix: "c/", Key: "c/a", What: "ticket"}
	if !errors.Is(e, ErrTreeInUse) || !strings.Contains(e.Error(), "waiting lock request") {
		t.Fatal(e)
	}
	held := &LockHeldError{Key: "c/a/b", Related: "c/a", Holder: "h", Token: 3}
	if msg := held.Error(); !strings.Contains(msg, `"c/a" held by "h"`) || !strings.Contains(msg, `related to "c/a/b"`) {
		t.Fatal(msg)
	}
}
