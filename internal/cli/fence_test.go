package cli

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/wire"
)

func TestFenceCheck(t *testing.T) {
	f := newJobsFixture(t)
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
