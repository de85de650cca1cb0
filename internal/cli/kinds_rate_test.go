package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// kinds set --rate: stored, shown in a RATE column (only when a kind has one), cleared by ”,
// and a bad rate is a usage error naming --rate that changes nothing.
func TestKindsSetRate(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	r := f.cli(t, "kinds", "set", "remediate", "--rate", "3/1h")
	if r.code != 0 || !strings.Contains(r.stdout, "RATE") || !strings.Contains(r.stdout, "3/1h") {
		t.Fatalf("kinds set --rate: %s", r)
	}
	rate := func(name string) *store.Rate {
		t.Helper()
		kinds, err := f.store.Kinds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == name })
		if i < 0 {
			t.Fatalf("no kind %s", name)
		}
		return kinds[i].Rate
	}
	if got := rate("remediate"); got == nil || *got != (store.Rate{Max: 3, Window: time.Hour}) {
		t.Fatalf("rate stored: %v", got)
	}
	if r := f.cli(t, "kinds", "set", "plain"); r.code != 0 || strings.Contains(r.stdout, "RATE") {
		t.Fatalf("kinds set of a kind without a rate shows the rate column: %s", r)
	}
	for _, bad := range []string{"0/1h", "1000001/1h", "3/999ms", "3/31d", "3"} {
		r := f.cli(t, "kinds", "set", "remediate", "--rate", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "rate") {
			t.Fatalf("kinds set --rate %s: %s; want refused, naming the rate", bad, r)
		}
	}
	if got := rate("remediate"); got == nil || got.Max != 3 {
		t.Fatalf("rate after refused changes: %v", got)
	}
	if r := f.cli(t, "kinds", "set", "remediate", "--rate", ""); r.code != 0 || rate("remediate") != nil {
		t.Fatalf("kinds set --rate '': %s (rate %v)", r, rate("remediate"))
	}
}
