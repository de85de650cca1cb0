package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// rates set, list and delete; limits set --rate: stored, shown, and a bad rate or prefix is a
// usage error (exit 2) naming it that changes nothing.
func TestRatesCommands(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if r := f.cli(t, "rates", "set", "cluster/", "20/1m"); r.code != 0 || !strings.Contains(r.stdout, "rate 20/1m on prefix cluster/") {
		t.Fatalf("rates set: %s", r)
	}
	if r := f.cli(t, "rates", "list"); r.code != 0 || !strings.Contains(r.stdout, "cluster/") || !strings.Contains(r.stdout, "20/1m") {
		t.Fatalf("rates list: %s", r)
	}
	for _, c := range []struct{ prefix, rate, names string }{
		{"cluster/", "0/1m", "RATE"}, {"cluster/", "3/999ms", "RATE"}, {"cluster/", "3/31d", "RATE"},
		{"cluster/", "3", "RATE"}, {"cluster/eu/", "3/1m", "PREFIX"},
	} {
		r := f.cli(t, "rates", "set", c.prefix, c.rate)
		if r.code != 2 || !strings.Contains(r.stderr, c.names) {
			t.Fatalf("rates set %s %s: %s; want exit 2 naming %s", c.prefix, c.rate, r, c.names)
		}
	}
	prs, err := f.store.PrefixRates(ctx, &store.PrefixRatesParams{})
	if err != nil || len(prs) != 1 || prs[0].Rate != (store.Rate{Max: 20, Window: time.Minute}) {
		t.Fatalf("prefix rates after refused sets: %v, %v", prs, err)
	}
	if r := f.cli(t, "rates", "delete", "cluster/"); r.code != 0 {
		t.Fatalf("rates delete: %s", r)
	}
	if r := f.cli(t, "rates", "delete", "cluster/"); r.code != 3 {
		t.Fatalf("rates delete of a prefix without a rate: %s; want exit 3", r)
	}

	if r := f.cli(t, "limits", "set", "cloud-api", "1000000", "--rate", "20/1m"); r.code != 0 || !strings.Contains(r.stdout, "rate 20/1m") {
		t.Fatalf("limits set --rate: %s", r)
	}
	if r := f.cli(t, "limits", "list"); r.code != 0 || !strings.Contains(r.stdout, "RATE") || !strings.Contains(r.stdout, "20/1m") {
		t.Fatalf("limits list: %s", r)
	}
	for _, bad := range []string{"0/1m", "1000001/1m", "3/999ms", "3/31d"} {
		if r := f.cli(t, "limits", "set", "cloud-api", "5", "--rate", bad); r.code != 2 || !strings.Contains(r.stderr, "--rate") {
			t.Fatalf("limits set --rate %s: %s; want exit 2 naming --rate", bad, r)
		}
	}
	ls, err := f.store.Limits(ctx, &store.LimitsParams{Name: "cloud-api", Limit: 1})
	if err != nil || len(ls) != 1 || ls[0].Capacity != 1000000 || ls[0].Rate == nil || ls[0].Rate.Max != 20 {
		t.Fatalf("limit after refused sets: %+v, %v", ls, err)
	}
}
