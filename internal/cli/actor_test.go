package cli

import (
	"strings"
	"testing"
)

// force-release without a token records the OS user in the audit log, not "unknown".
func TestForceReleaseRecordsTheOSUser(t *testing.T) {
	f := newFixture(t, nil)
	want := osActor()
	if want == "" || want == "unknown" {
		t.Skipf("osActor() = %q: this machine names no OS user", want)
	}
	if r := f.cli(t, "locks", "acquire", "k", "--holder", "h"); r.code != 0 {
		t.Fatalf("acquire: %s", r)
	}
	if r := f.cli(t, "locks", "force-release", "k", "--reason", "wedged"); r.code != 0 {
		t.Fatalf("force-release: %s", r)
	}
	r := f.cli(t, "events", "--key", "k", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"actor": "`+want+`"`) || strings.Contains(r.stdout, `"actor": "unknown"`) {
		t.Errorf("events after force-release: %s\nwant actor %q", r, want)
	}
	if r := f.cli(t, "events", "--key", "k"); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("events table: %s\nwant actor %q", r, want)
	}
}
