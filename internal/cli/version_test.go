package cli

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// The binary prints the version and revision it was built with, and serve exports them with
// the Go version in baton_build_info.
func TestVersionAndBuildInfo(t *testing.T) {
	const pkg = "github.com/batonhq/baton/internal/cli"
	bin := batontest.Build(t, "-X "+pkg+".version=v9.9.9-test -X "+pkg+".revision=0123456789abcdef")
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("baton version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "baton v9.9.9-test (revision 0123456789abcdef") ||
		!strings.HasSuffix(got, "go"+strings.TrimPrefix(runtime.Version(), "go")+")") {
		t.Fatalf("baton version = %q", got)
	}
	srv := batontest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	want := `baton_build_info{goversion="` + runtime.Version() + `",revision="0123456789abcdef",version="v9.9.9-test"} 1`
	if m := srv.Get(t, "/metrics"); !strings.Contains(m, want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, m)
	}
	if info := srv.Get(t, "/v1/info"); !strings.Contains(info, `"version":"v9.9.9-test"`) {
		t.Fatalf("/v1/info: %s", info)
	}
}

// Without link-time values, the version is the module's or "devel", never empty.
func TestBuildDetailsDefaults(t *testing.T) {
	d := readBuildDetails()
	if d.Version == "" || d.GoVersion == "" || !strings.HasPrefix(d.String(), d.Version+" (") {
		t.Fatalf("build details %+v: %q", d, d.String())
	}
}
