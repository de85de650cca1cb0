package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// docs/cli.md documents the exit codes in one table, and it lists exactly the codes that
// exitcodes.go defines: a code added to one and not the other fails here, and so does a
// second table.
func TestExitCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(doc), "| Code | Meaning |"); n != 1 {
		t.Fatalf("docs/cli.md has %d exit code tables; want one", n)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Exit codes\n")
	var documented []string
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(line, "| ") && !strings.Contains(line, "Code") {
			documented = append(documented, strings.TrimSpace(cells[1]))
		} else if len(documented) > 0 && !strings.HasPrefix(line, "|") {
			break
		}
	}
	var defined []string
	for _, e := range exitCodeTable {
		defined = append(defined, e.name)
	}
	if !slices.Equal(documented, defined) {
		t.Errorf("docs/cli.md's exit codes %q; exitcodes.go defines %q", documented, defined)
	}
}

// exitCode is the one mapping of errors to exit codes.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{usagef("bad"), exitUsage},
		{&store.InvalidArgumentError{Field: "key", Rule: "r"}, exitUsage},
		{fmt.Errorf("x: %w", store.ErrNotFound), exitNotFound},
		{store.ErrNotHeld, exitNotFound},
		{&store.JobStateError{}, exitConflict},
		{&store.VersionMismatchError{}, exitConflict},
		{&store.LockHeldError{}, exitBusy},
		{&store.RestingError{}, exitBusy},
		{&store.ResourceBusyError{}, exitBusy},
		{explain(baton.ErrLeaseLost, "lost"), exitLeaseLost},
		{explain(errStaleFence, "stale"), exitLeaseLost},
		{client.ErrUnauthorized, exitAuth},
		{client.ErrForbidden, exitAuth},
		{&cmdNotRunnable{exec.ErrNotFound}, exitNotExist},
		{&cmdNotRunnable{os.ErrPermission}, exitNoExec},
		{cmdExit(42), 42},
		{&signalled{sig: syscall.SIGTERM}, 128 + 15},
		{&reported{&store.JobStateError{}}, exitConflict},
		{&loggedError{store.ErrNotFound}, exitError},
		{errors.New("unexpected"), exitError},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%#v) = %d, want %d", c.err, got, c.code)
		}
	}
}
