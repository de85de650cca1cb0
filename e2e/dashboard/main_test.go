// Package dashboard tests the web dashboard, and the TypeScript client (tsclient_test.go), in a
// real browser: Debian's chromium, driven with chromedp, against the real baton binary (built
// with -race) serving a SQLite store. It is its own module so that chromedp stays out of the
// core module's dependencies.
package dashboard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var (
	binary   string // the baton binary, built once
	chromium string // the browser, or "" when missing outside CI
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-dashboard-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "baton")
	build := exec.Command("go", "build", "-race", "-o", binary, "./cmd/baton")
	build.Dir = "../.."
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard: building baton:", err)
		os.Exit(1)
	}
	for _, name := range []string{os.Getenv("BATON_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needChromium skips the test without a browser, and fails it under CI.
func needChromium(t *testing.T) {
	t.Helper()
	if chromium != "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed and CI is set (scripts/test.sh installs it with apt-get)")
	}
	t.Skip("chromium is not installed (apt-get install chromium, or set BATON_CHROMIUM)")
}
