package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// The exit codes, defined here once. docs/cli.md documents them in one table (a test keeps the
// two in step), and each command's help lists those it can exit with, from exitCodeTable.
const (
	exitOK        = 0
	exitError     = 1   // server unreachable, unexpected answer
	exitUsage     = 2   // bad flags or arguments, or input refused as invalid (nothing written)
	exitNotFound  = 3   // no such lease, job or resource; a lease that is not the live one
	exitConflict  = 4   // the job's state forbids it, the resource's version did not match, or a limit or tree is in use
	exitBusy      = 75  // lock held or resting, resource busy (EX_TEMPFAIL)
	exitLeaseLost = 76  // baton run: the lease was lost while CMD ran; fence check: stale token
	exitAuth      = 77  // unauthorized or forbidden (EX_NOPERM)
	exitNoExec    = 126 // CMD cannot be run
	exitNotExist  = 127 // CMD not found
)

// Rows of the table that are not one number.
const (
	exitCmdStatus = -1 // baton run: CMD's own exit code
	exitSignalled = -2 // baton run: 128+N, it got signal N while waiting for the lock
)

type exitCodeInfo struct {
	code    int
	name    string // as help and docs write it
	meaning string // short, for the help's "Exit codes:" line
}

var exitCodeTable = []exitCodeInfo{
	{exitOK, "0", "success"},
	{exitCmdStatus, "CMD's code", "when CMD ran (128+N if it died of signal N)"},
	{exitError, "1", "error (server unreachable, unexpected answer)"},
	{exitUsage, "2", "usage error or invalid input"},
	{exitNotFound, "3", "not found or not held"},
	{exitConflict, "4", "job state, resource version, or limit or tree in use conflict"},
	{exitBusy, "75", "lock or resource busy"},
	{exitLeaseLost, "76", "lease lost while CMD ran, or a stale fencing token"},
	{exitAuth, "77", "unauthorized or forbidden"},
	{exitNoExec, "126", "CMD cannot be run"},
	{exitNotExist, "127", "CMD not found"},
	{exitSignalled, "128+N", "got signal N while waiting for the lock"},
}

// Exit code lists of the commands' help.
var (
	exitsRead   = []int{exitOK, exitError, exitUsage, exitAuth}
	exitsLookup = []int{exitOK, exitError, exitUsage, exitNotFound, exitAuth}
	exitsJobOp  = []int{exitOK, exitError, exitUsage, exitNotFound, exitConflict, exitAuth}
)

// exitCode is the process's exit code for err, the error a command returned: the one place
// where errors become exit codes.
func exitCode(err error) int {
	var usage *usageError
	var status cmdExit
	var sig *signalled
	var notRun *cmdNotRunnable
	var logged *loggedError
	var rep *reported
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &rep):
		return exitCode(rep.err)
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &sig):
		return 128 + signalNumber(sig.sig)
	case errors.As(err, &notRun):
		if errors.Is(notRun.err, exec.ErrNotFound) || errors.Is(notRun.err, os.ErrNotExist) {
			return exitNotExist
		}
		return exitNoExec
	case errors.As(err, &logged):
		return exitError
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return exitAuth
	case errors.Is(err, store.ErrLockHeld), errors.Is(err, store.ErrResting), errors.Is(err, store.ErrResourceBusy):
		return exitBusy
	case errors.Is(err, store.ErrJobState), errors.Is(err, store.ErrVersionMismatch), errors.Is(err, store.ErrLimitInUse),
		errors.Is(err, store.ErrTreeInUse):
		return exitConflict
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNotHeld):
		return exitNotFound
	case errors.Is(err, store.ErrInvalidArgument):
		return exitUsage
	case errors.Is(err, baton.ErrLeaseLost), errors.Is(err, errStaleFence):
		return exitLeaseLost
	default:
		return exitError
	}
}

// usageError is a command line the command cannot run.
type usageError struct {
	msg string
	// help prints the command's help after msg (an unknown or missing subcommand), instead of
	// the pointer to --help; plain prints neither.
	help, plain bool
	// of is the command the error is about, if not the one that returned it (baton help X).
	of *cobra.Command
}

func (e *usageError) Error() string { return e.msg }

// usagef is a usage error: the message, then a pointer to the command's --help.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// cmdExit is the exit code of a CMD that baton passes on as its own (baton run); nothing is
// printed for it.
type cmdExit int

func (e cmdExit) Error() string { return fmt.Sprintf("CMD exited with status %d", int(e)) }

// signalled is a wait given up because baton got a signal: exit code 128+N.
type signalled struct {
	sig os.Signal
	msg string
}

func (e *signalled) Error() string { return e.msg }

// cmdNotRunnable is a CMD that cannot be found (127) or run (126).
type cmdNotRunnable struct{ err error }

func (e *cmdNotRunnable) Error() string { return e.err.Error() }
func (e *cmdNotRunnable) Unwrap() error { return e.err }

// loggedError is an error the command has logged itself (baton serve, through its logger):
// nothing more is printed, and the exit code is 1.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }

// reported is an error already printed (dlq retry reports each failure as it comes); its exit
// code is err's.
type reported struct{ err error }

func (e *reported) Error() string { return e.err.Error() }

// errStaleFence is a fencing token lower than one the fence has seen (baton fence check).
var errStaleFence = errors.New("stale fencing token")

// explained is an error with the message the user reads; its exit code is that of err.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// explain gives err the message the user reads, keeping err for its exit code.
func explain(err error, format string, args ...any) error {
	return &explained{msg: fmt.Sprintf(format, args...), err: err}
}

// notFound names what a not-found error is about ("job 12", `resource "db/main"`).
func notFound(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return explain(err, "%s not found", what)
	}
	return err
}
