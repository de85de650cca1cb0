package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// issueTokens grants and releases a lease n times on st, so that it has issued fencing tokens
// up to n: fences refuse tokens the store never issued.
func issueTokens(t *testing.T, st store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("issuer-%d", i)
		l, err := st.Acquire(ctx, &store.AcquireParams{Key: "fence/issuer", LeaseID: id, Holder: "h", TTL: time.Minute})
		if err != nil || l.Token != uint64(i) {
			t.Fatalf("grant %d: %+v, %v; want token %d", i, l, err, i)
		}
		if _, err := st.Release(ctx, &store.ReleaseParams{Key: "fence/issuer", LeaseID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFenceCheck(t *testing.T) {
	f := newJobsFixture(t)
	issueTokens(t, f.store, 8)
	t.Setenv("BATON_RESOURCE", "")
	t.Setenv("BATON_LOCK_KEY", "db/orders") // as under baton run
	t.Setenv("BATON_FENCING_TOKEN", "7")
	if r := f.cli(t, "fence", "check"); r.code != 0 || r.stdout != "fence db/orders: token 7 ok\n" {
		t.Fatalf("check from the environment: %s", r)
	}
	if r := f.cli(t, "fence", "check", "--fencing-token", "7", "-o", "json"); r.code != 0 ||
		decodeJSON[wire.FenceCheckResponse](t, r) != (wire.FenceCheckResponse{Resource: "db/orders", Token: 7}) {
		t.Fatalf("the same token again, as JSON: %s", r)
	}
	r := f.cli(t, "fence", "check", "--fencing-token", "6")
	if r.code != exitLeaseLost || r.stdout != "" || !strings.Contains(r.stderr, "stale fencing token 6") || !strings.Contains(r.stderr, "token 7") {
		t.Fatalf("a stale token: %s", r)
	}
	t.Setenv("BATON_RESOURCE", "job/resource") // as under baton worker
	if r := f.cli(t, "fence", "check", "--fencing-token", "1"); r.code != 0 || !strings.Contains(r.stdout, "job/resource") {
		t.Fatalf("BATON_RESOURCE first: %s", r)
	}
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "8"); r.code != 0 {
		t.Fatalf("flags: %s", r)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--fencing-token", "x"}, nil, "invalid --fencing-token"},
		{[]string{"--fencing-token", "-1"}, nil, "invalid --fencing-token"},
		{[]string{"--fencing-token", "0"}, nil, "invalid token"},
		{[]string{"--fencing-token", "9223372036854775808"}, nil, "invalid token"},
		{[]string{"--resource", "a\nb"}, nil, "invalid resource"},
		{nil, map[string]string{"BATON_FENCING_TOKEN": ""}, "missing --fencing-token"},
		{nil, map[string]string{"BATON_RESOURCE": "", "BATON_LOCK_KEY": ""}, "missing --resource"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
	} {
		t.Run(c.want, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if r := f.cli(t, append([]string{"fence", "check"}, c.args...)...); r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%v: %s, want exit 2 and %q", c.args, r, c.want)
			}
		})
	}
	// A token the store never issued would refuse every real holder: invalid, nothing stored.
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "9223372036854775807"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "greatest token this store has issued (8") {
		t.Errorf("an unissued token: %s, want exit 2 naming the rule", r)
	}
	// Nothing refused above moved the fence.
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "8"); r.code != 0 {
		t.Fatalf("token 8 after the refusals: %s", r)
	}
	if r := f.cli(t, "fence", "--help"); r.code != 0 || !strings.Contains(r.stdout, "baton fence check") {
		t.Errorf("help: %s", r)
	}
	if r := f.cli(t, "fence", "nope"); r.code != exitUsage {
		t.Errorf("unknown subcommand: %s", r)
	}
}
