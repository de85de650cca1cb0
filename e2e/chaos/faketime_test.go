package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// faketimeClock is a clock offset that libfaketime applies to the programs started with its
// env: PostgreSQL, a C program that reads the clock through libc (a Go program does not, so
// libfaketime cannot skew baton). The offset lives in a file that libfaketime reads at every
// clock reading (FAKETIME_NO_CACHE), so a step takes effect once the file is replaced.
type faketimeClock struct {
	t      *testing.T
	lib    string
	file   string
	offset time.Duration
}

// newFaketimeClock finds libfaketime (Debian: faketime) and starts the offset at 0; it skips
// the test if libfaketime is missing (fails if CI is set).
func newFaketimeClock(t *testing.T) *faketimeClock {
	t.Helper()
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	more, _ := filepath.Glob("/usr/lib/faketime/libfaketime.so.1")
	libs = append(libs, more...)
	if len(libs) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("libfaketime not found and CI is set: install Debian's faketime")
		}
		t.Skip("libfaketime not found: install Debian's faketime")
	}
	// A directory PostgreSQL's user can read (a test's temporary directory is root's alone).
	dir, err := os.MkdirTemp("", "baton-faketime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &faketimeClock{t: t, lib: libs[0], file: filepath.Join(dir, "offset")}
	c.write()
	return c
}

// env is what a program needs in its environment to run on the clock.
func (c *faketimeClock) env() []string {
	return []string{"LD_PRELOAD=" + c.lib, "FAKETIME_TIMESTAMP_FILE=" + c.file, "FAKETIME_NO_CACHE=1"}
}

// write replaces the offset file (a rename: a reader sees the old offset or the new one).
func (c *faketimeClock) write() {
	tmp := c.file + ".new"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%+d\n", int64(c.offset/time.Second)), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		c.t.Fatal(err)
	}
}

// stepFault steps the clock by d (whole seconds).
func (c *faketimeClock) stepFault(name string, d time.Duration) fault {
	return fault{name, func(*rand.Rand) bool {
		c.offset += d
		c.write()
		return true
	}}
}
