package cli

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/wire"
)

// A fence holding a token no holder has (stored before the server refused unissued tokens)
// refuses every real holder; 'baton fence reset' deletes it, after which the holder passes.
func TestFenceReset(t *testing.T) {
	f := newJobsFixture(t)
	issueTokens(t, f.store, 3)
	if _, err := f.store.DB().Exec(`INSERT INTO baton_fences (resource, token) VALUES ('db/orders', 9223372036854775807)`); err != nil {
		t.Fatal(err)
	}
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "3"); r.code != exitLeaseLost {
		t.Fatalf("the holder of token 3 under the forged fence: %s, want exit 76", r)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"db/orders"}, exitUsage, "--reason is required"},
		{[]string{"--reason", "x"}, exitUsage, "RESOURCE"},
		{[]string{"a\nb", "--reason", "x"}, exitUsage, "invalid resource"},
		{[]string{"db/none", "--reason", "x"}, exitNotFound, `resource "db/none" has no fence`},
	} {
		if r := f.cli(t, append([]string{"fence", "reset"}, c.args...)...); r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("fence reset %q: %s, want exit %d and %q", c.args, r, c.code, c.want)
		}
	}
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "3"); r.code != exitLeaseLost {
		t.Fatalf("the refused resets deleted the fence: %s", r)
	}
	r := f.cli(t, "fence", "reset", "db/orders", "--reason", "forged token")
	if r.code != 0 || r.stdout != "reset the fence of db/orders (it held token 9223372036854775807)\n" {
		t.Fatalf("reset: %s", r)
	}
	if r := f.cli(t, "fence", "check", "--resource", "db/orders", "--fencing-token", "3"); r.code != 0 {
		t.Fatalf("the holder of token 3 after the reset: %s, want exit 0", r)
	}
	if r := f.cli(t, "fence", "reset", "db/orders", "--reason", "again", "-o", "json"); r.code != 0 ||
		decodeJSON[wire.FenceResetResponse](t, r) != (wire.FenceResetResponse{Resource: "db/orders", Token: 3}) {
		t.Fatalf("reset as JSON: %s", r)
	}
	if r := f.cli(t, "fence", "--help"); r.code != 0 || !strings.Contains(r.stdout, "baton fence reset") {
		t.Errorf("help: %s", r)
	}
}
