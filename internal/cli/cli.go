package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Exit codes, documented in docs/cli.md and in the usage texts.
const (
	exitOK        = 0
	exitError     = 1  // server unreachable, unexpected answer
	exitUsage     = 2  // bad flags or arguments, or input the server rejected as invalid
	exitNotFound  = 3  // no such lease (renew, release, force-release)
	exitBusy      = 75 // the lock is held or resting, past --wait (EX_TEMPFAIL)
	exitLeaseLost = 76 // baton run: the lease was lost while CMD ran
	exitAuth      = 77 // unauthorized or forbidden (EX_NOPERM)
	exitNoExec    = 126
	exitNotExist  = 127
)

const exitCodesHelp = `Exit codes: 0 success; 1 error (server unreachable, unexpected); 2 usage error;
3 not found or not held; 75 lock busy (held or in cooldown); 77 unauthorized or forbidden.`

// defaultServer is the server address when neither --server nor BATON_SERVER is given.
const defaultServer = "http://127.0.0.1:7725"

// requestTimeout bounds one command's calls to the server (plus the wait, for waiting calls).
const requestTimeout = 30 * time.Second

// globals are the flags every client command takes.
type globals struct {
	server string
	token  string
	output string
}

func defaultGlobals() *globals {
	g := &globals{server: os.Getenv("BATON_SERVER"), token: os.Getenv("BATON_TOKEN"), output: "table"}
	if g.server == "" {
		g.server = defaultServer
	}
	return g
}

// register adds the global flags to fs, with the current values as defaults (so that flags
// before the command word carry over). withOutput adds -o.
func (g *globals) register(fs *flag.FlagSet, withOutput bool) {
	fs.StringVar(&g.server, "server", g.server, "server `URL` (env BATON_SERVER)")
	fs.Var(secret{&g.token}, "token", "bearer `token` (env BATON_TOKEN; prefer the variable: flags show in ps)")
	if withOutput {
		fs.StringVar(&g.output, "o", g.output, "output `format`: table or json")
	}
}

// secret is a string flag whose value --help never prints (it may come from BATON_TOKEN).
type secret struct{ p *string }

func (s secret) String() string { return "" }

func (s secret) Set(v string) error {
	*s.p = v
	return nil
}

func (g *globals) check() error {
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("-o must be table or json (got %q)", g.output)
	}
	return nil
}

// store returns a client store for the server, or an error that names the flag at fault.
func (g *globals) store() (*client.Store, error) {
	st, err := client.NewStore(client.Config{BaseURL: g.server, Token: g.token})
	var inv *store.InvalidArgumentError
	if errors.As(err, &inv) {
		switch inv.Field {
		case "base_url":
			return nil, fmt.Errorf("--server (or BATON_SERVER) %s", inv.Rule)
		case "token":
			return nil, fmt.Errorf("--token (or BATON_TOKEN) %s", inv.Rule)
		}
	}
	return st, err
}

// command is one command's flag set and usage text.
type command struct {
	name   string // "baton locks list"
	usage  string // the text of --help, without the flag list
	fs     *flag.FlagSet
	stdout io.Writer
	stderr io.Writer
	// writes marks a command that changes the server's data: only its refusals of bad input end
	// with "(nothing written)", which would mislead on a read.
	writes bool
}

func newCommand(name, usage string, stdout, stderr io.Writer) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by parse
	return &command{name: name, usage: usage, fs: fs, stdout: stdout, stderr: stderr}
}

func (c *command) printHelp(w io.Writer) {
	fmt.Fprint(w, c.usage)
	var flags strings.Builder
	c.fs.SetOutput(&flags)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
	if flags.Len() > 0 {
		// Long flags are shown as --name, as the examples write them (flag takes both).
		fmt.Fprintf(w, "\nFlags:\n%s", longFlag.ReplaceAllString(flags.String(), "$1--$2"))
	}
}

var longFlag = regexp.MustCompile(`(?m)^(  )-(\w[\w-]+)`)

// parse parses args, allowing flags after positional arguments (`locks renew KEY --lease ID`);
// "--" ends the flags. It returns the positional arguments, or an exit code: 0 after --help,
// 2 after a usage error (both already printed).
func (c *command) parse(args []string) ([]string, int, bool) {
	onceFlags(c.fs)
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printHelp(c.stdout)
				return nil, exitOK, false
			}
			return nil, c.flagError(err), false
		}
		rest := c.fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), 0, true
		}
		if len(rest) == 0 {
			return pos, 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseUntilCommand parses flags up to "--" or the first positional argument and returns the
// rest untouched: for `baton run ... -- CMD ARGS`, whose ARGS are CMD's flags.
func (c *command) parseUntilCommand(args []string) ([]string, int, bool) {
	onceFlags(c.fs)
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printHelp(c.stdout)
			return nil, exitOK, false
		}
		return nil, c.flagError(err), false
	}
	return c.fs.Args(), 0, true
}

func (c *command) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s\nRun '%s --help' for usage.\n", c.name, fmt.Sprintf(format, args...), c.name)
	return exitUsage
}

// fail prints err for humans and returns its exit code.
func (c *command) fail(g *globals, err error) int {
	code := exitCode(err)
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, describe(g, err))
	return code
}

// exitCode maps an error of the client store or the Locker to an exit code.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return exitAuth
	case errors.Is(err, store.ErrLockHeld), errors.Is(err, store.ErrCooldown):
		return exitBusy
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNotHeld):
		return exitNotFound
	case errors.Is(err, store.ErrInvalidArgument):
		return exitUsage
	case errors.Is(err, baton.ErrLeaseLost):
		return exitLeaseLost
	default:
		return exitError
	}
}

// describe says what went wrong in one line, naming the holder of a busy lock.
func describe(g *globals, err error) string {
	var held *store.LockHeldError
	var cool *store.CooldownError
	var inv *store.InvalidArgumentError
	var pe *client.ProblemError
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.As(err, &held):
		return heldMessage(held)
	case errors.As(err, &cool):
		return fmt.Sprintf("lock %q is resting (%s) for another %s", cool.Key, cool.Reason, roundDuration(cool.Remaining))
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

// heldMessage is `lock "k" held by "job-7" (token 12) until 14:32:15Z (in 41s)`.
func heldMessage(e *store.LockHeldError) string {
	return fmt.Sprintf("lock %q held by %q (token %d) until %s (in %s)",
		e.Key, e.Holder, e.Token, e.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(e.RetryAfter))
}

// roundDuration rounds to the second, or to 100 ms under 10 s.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints leases as aligned columns.
func writeTable(w io.Writer, leases []*store.Lease) error {
	if len(leases) == 0 {
		_, err := fmt.Fprintln(w, "no live leases")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "KEY\tHOLDER\tTOKEN\tEXPIRES\tLEASE_ID")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s (%s)\t%s\n", printable(l.Key), printable(l.Holder), l.Token,
			l.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(l.TTLLeft), l.ID)
	}
	return tw.Flush()
}

// printable quotes a key or holder that would break the table's columns.
func printable(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// writeLeases prints leases in the chosen format: a table, or a JSON array of lease objects.
func writeLeases(w io.Writer, g *globals, leases []*store.Lease) error {
	if g.output == "json" {
		out := make([]wire.Lease, 0, len(leases))
		for _, l := range leases {
			out = append(out, wire.LeaseFrom(l))
		}
		return writeJSON(w, out)
	}
	return writeTable(w, leases)
}

// writeLease prints one lease: a one-row table, or the lease object.
func writeLease(w io.Writer, g *globals, l *store.Lease) error {
	if g.output == "json" {
		return writeJSON(w, wire.LeaseFrom(l))
	}
	return writeTable(w, []*store.Lease{l})
}
