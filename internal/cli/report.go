package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// report prints err, the error command cmd returned, for the user on stderr, and returns the
// process's exit code: the one place where a command's failure is printed.
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var usage *usageError
	var status cmdExit
	var logged *loggedError
	var rep *reported
	if isFlagError(err) {
		// A flag refused while cobra walked to the command (baton --servr URL locks list):
		// the flag error function sees only the errors of the command's own parse.
		err = flagError(cmd, err)
	}
	if errors.As(err, &usage) && usage.of != nil {
		cmd = usage.of
	}
	path := cmd.CommandPath()
	switch {
	case errors.As(err, &status), errors.As(err, &logged), errors.As(err, &rep):
		// CMD's exit code passed on, or a failure printed already: nothing to add.
	case errors.As(err, &usage):
		if usage.msg != "" {
			fmt.Fprintf(a.stderr, "%s: %s\n", path, usage.msg)
		}
		switch {
		case usage.help:
			if usage.msg != "" {
				fmt.Fprintln(a.stderr)
			}
			a.printHelp(a.stderr, cmd)
		case !usage.plain:
			fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
		}
	default:
		fmt.Fprintf(a.stderr, "%s: %s\n", path, a.message(cmd, err))
	}
	return exitCode(err)
}

// isFlagError reports an error of pflag's parsing.
func isFlagError(err error) bool {
	var unknown *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var missing *pflag.ValueRequiredError
	var syntax *pflag.InvalidSyntaxError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &missing) || errors.As(err, &syntax)
}

// message says what went wrong in one line, naming the command's flags for invalid input.
func (a *app) message(cmd *cobra.Command, err error) string {
	m := a.metaOf(cmd)
	var ex *explained
	var inv *store.InvalidArgumentError
	var busy *store.ResourceBusyError
	var state *store.JobStateError
	var version *store.VersionMismatchError
	var treeUse *store.TreeInUseError
	switch {
	case errors.As(err, &ex):
		return ex.msg
	case errors.As(err, &inv):
		field := inv.Field
		if m.names != nil {
			field = m.names.name(inv.Field)
		}
		msg := fmt.Sprintf("invalid %s: %s", field, inv.Rule)
		if m.writes {
			msg += " (nothing written)"
		}
		return msg
	case errors.As(err, &busy):
		return fmt.Sprintf("resource %q is busy: job %d is %s (the reject policy refuses to queue behind it; nothing written)",
			busy.Resource, busy.HeadJob, busy.State)
	case errors.As(err, &state):
		return fmt.Sprintf("cannot %s job %d: it is %s", state.Op, state.ID, state.State)
	case errors.As(err, &version):
		return fmt.Sprintf("resource %q is at version %d, not %d (--if-version): it changed meanwhile",
			version.Key, version.Current, version.Want)
	case errors.As(err, &treeUse):
		return strings.TrimPrefix(treeUse.Error(), "baton: ")
	default:
		return describe(a.g, err)
	}
}

// flagNames maps the store's field names to a command's flags or arguments, so that an invalid
// input is reported as the user wrote it. Fields not listed are shown as --field-name.
type flagNames map[string]string

func (n flagNames) name(field string) string {
	if s, ok := n[field]; ok {
		return s
	}
	if field == "" || field == "id" || field == "token" {
		return field
	}
	if member, ok := strings.CutPrefix(field, "args."); ok {
		return "--args member " + member // a kind's limit template names an argument
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

// describe says what went wrong in one line, naming the holder of a busy lock.
func describe(g *globals, err error) string {
	var held *store.LockHeldError
	var resting *store.RestingError
	var inv *store.InvalidArgumentError
	var pe *client.ProblemError
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.As(err, &held):
		return heldMessage(held)
	case errors.As(err, &resting):
		return fmt.Sprintf("lock %q is resting (%s) for another %s", resting.Key, resting.Reason, roundDuration(resting.Remaining))
	case errors.As(err, &inv):
		return fmt.Sprintf("invalid %s: %s", inv.Field, inv.Rule)
	case errors.Is(err, client.ErrUnauthorized):
		if g.token == "" {
			return fmt.Sprintf("%v (set BATON_TOKEN or --token)", err)
		}
		return fmt.Sprintf("%v (the token is not known to the server)", err)
	case errors.Is(err, client.ErrNoSuchRoute) && errors.As(err, &pe):
		return noSuchRouteMessage(g, pe)
	case errors.As(err, &pe):
		return pe.Error()
	case errors.Is(err, store.ErrNotHeld):
		return "the lease is not the live lease on its key (it expired, was released, taken over or force-released)"
	case errors.Is(err, store.ErrNotFound):
		return "no live lease on the key"
	case errors.As(err, &opErr):
		return fmt.Sprintf("cannot reach the server at %s: %v", g.server, opErr)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return fmt.Sprintf("no answer from the server at %s in time: %v", g.server, err)
	default:
		return err.Error()
	}
}

// heldMessage is `lock "k" held by "job-7" (token 12) until 14:32:15Z (in 41s)`; a refusal by a
// related key in a tree names it: `lock "cluster/eu-1" held by ..., related to
// "cluster/eu-1/node/a" in its tree`.
func heldMessage(e *store.LockHeldError) string {
	key, mode := e.Key, ""
	if e.Resource != "" {
		key = e.Resource // the one of the request's keys that refused it
	}
	if e.Shared {
		mode = " shared"
	}
	related := ""
	if e.Related != "" {
		key, related = e.Related, fmt.Sprintf(", related to %q in its tree", key)
	}
	switch {
	case e.Limit != "":
		msg := fmt.Sprintf("limit %q full: %d of %d in use", e.Limit, e.InUse, e.Capacity)
		if e.Ahead > 0 {
			msg += fmt.Sprintf(", %d ahead in its line", e.Ahead)
		}
		return msg
	case e.Token == 0 && e.Ahead > 0:
		return fmt.Sprintf("lock %q is free but %d ahead in its line, first %q%s", key, e.Ahead, e.Holder, related)
	}
	return fmt.Sprintf("lock %q held%s by %q (token %d) until %s (in %s)%s",
		key, mode, e.Holder, e.Token, e.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(e.RetryAfter), related)
}
