package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

const locksUsage = `Usage: baton locks COMMAND [flags]

Inspect and manage locks on a baton server.

Commands:
  list           list live leases
  status         show the lease on a key, or that it is free
  acquire        take a lock (no keepalive: renew it yourself, or use 'baton run')
  renew          extend a lease
  release        release a lease
  force-release  end whoever's lease holds a key (admin)

Run 'baton locks COMMAND --help' for a command's flags.

` + exitCodesHelp + "\n"

func locksCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton locks", locksUsage, map[string]subcommand{
		"list": locksList, "ls": locksList,
		"status": locksStatus, "get": locksStatus,
		"acquire":       locksAcquire,
		"renew":         locksRenew,
		"release":       locksRelease,
		"force-release": locksForceRelease,
	}, args, g, stdout, stderr)
}

// clientCommand parses a client command's flags and positional arguments, checks that there are
// exactly nargs of them, and checks the global flags.
func clientCommand(c *command, g *globals, args []string, nargs int, what string) ([]string, int, bool) {
	pos, code, ok := c.parse(args)
	if !ok {
		return nil, code, false
	}
	if len(pos) != nargs {
		if len(pos) < nargs {
			return nil, c.usageError("missing %s", what), false
		}
		return nil, c.usageError("unexpected argument %q", pos[nargs]), false
	}
	if err := g.check(); err != nil {
		return nil, c.usageError("%v", err), false
	}
	return pos, 0, true
}

// listPageSize is the page size of 'locks list' without --limit (a variable for tests).
var listPageSize = store.MaxListLimit

func callContext(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), requestTimeout+extra)
}

// openStore opens the server's client store for a command, with a context for its calls
// (callContext(extra)); done closes both. A store that cannot be opened (a bad --server or
// --token) is a usage error: ok is false and code the exit code.
func (c *command) openStore(g *globals, extra time.Duration) (st *client.Store, ctx context.Context, done func(), code int, ok bool) {
	st, err := g.store()
	if err != nil {
		return nil, nil, nil, c.usageError("%v", err), false
	}
	ctx, cancel := callContext(extra)
	return st, ctx, func() { cancel(); st.Close() }, 0, true
}

func locksList(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks list", `Usage: baton locks list [--prefix P] [--holder H] [--limit N] [--watch [--interval 1s]] [-o table|json]

List live leases in key order. Without --limit, every page is fetched. --watch then asks the
server every --interval and prints the list again, under a time line, whenever a lease was
taken, released, expired or taken over (not for renewals), until interrupted (Ctrl-C; exit
code 0).

Example:
  baton locks list --prefix terraform/

Output (table):
  KEY             HOLDER       TOKEN  EXPIRES          LEASE_ID
  terraform/prod  ci-runner-7  42     14:31:49Z (14s)  9f0c2d…

With -o json, a JSON array of lease objects (docs/http-api.md).

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	prefix := c.fs.String("prefix", "", "only keys starting with `P`")
	holder := c.fs.String("holder", "", "only leases held by `H`")
	limit := c.fs.Int("limit", 0, "at most `N` leases (1-1000), one page")
	watch := c.fs.Bool("watch", false, "then print the list again each time a lease is taken, released or taken over, until interrupted")
	interval := pollFlag(c.fs)
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if *limit < 0 || *limit > store.MaxListLimit {
		return c.usageError("--limit must be between 1 and %d", store.MaxListLimit)
	}
	if code, ok := checkInterval(c, *interval); !ok {
		return code
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	list := func(ctx context.Context) ([]*store.Lease, error) {
		var all []*store.Lease
		p := &store.ListParams{Prefix: *prefix, Holder: *holder, Limit: *limit}
		if *limit == 0 {
			p.Limit = listPageSize
		}
		for {
			page, err := st.List(ctx, p)
			if err != nil {
				return nil, err
			}
			all = append(all, page...)
			if *limit != 0 || len(page) < p.Limit {
				return all, nil
			}
			p.After = page[len(page)-1].Key
		}
	}
	all, err := list(ctx)
	if err != nil {
		return c.fail(g, err)
	}
	if err := writeLeases(stdout, g, all); err != nil {
		return c.fail(g, err)
	}
	if *watch {
		return c.watchLeases(g, all, list, *interval)
	}
	return exitOK
}

func locksStatus(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks status", `Usage: baton locks status KEY [-o table|json]

Show the live lease on KEY, or say that KEY is free (exit code 0 either way).

Example:
  baton locks status terraform/prod

Output (table):
  KEY             HOLDER       TOKEN  EXPIRES          LEASE_ID
  terraform/prod  ci-runner-7  42     14:31:49Z (14s)  9f0c2d…
or
  terraform/prod is free

With -o json, the lease object (docs/http-api.md), or null if KEY is free.

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	key := pos[0]
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	l, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		if g.output == "json" {
			fmt.Fprintln(stdout, "null")
		} else {
			fmt.Fprintf(stdout, "%s is free\n", key)
		}
		return exitOK
	}
	if err != nil {
		return c.fail(g, err)
	}
	if err := writeLease(stdout, g, l); err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func locksAcquire(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks acquire", `Usage: baton locks acquire KEY [--holder NAME] [--ttl 15s] [--wait 0s] [--cooldown D] [--metadata JSON] [-o table|json]

Take the lock on KEY and print the lease, with its lease ID and fencing token. Nothing keeps
the lease alive: renew it with 'baton locks renew KEY --lease ID' before its TTL runs out, and
release it with 'baton locks release KEY --lease ID'. To run a command under a lock that is
kept alive for as long as the command runs, use 'baton run'.

The same --holder acquiring a key it holds gets its lease back, renewed (a safe retry).
With --cooldown D, KEY rests for D after the lease is released: every acquire is refused until
then (exit code 75), unless an operator ends the rest with 'baton locks force-release'.

Example:
  baton locks acquire deploy/web --holder job-1234 --ttl 5m --wait 30s --metadata '{"job":"1234"}'

Output (table):
  KEY         HOLDER    TOKEN  EXPIRES             LEASE_ID
  deploy/web  job-1234  43     14:36:34Z (5m0s)    5b1e07…

Exit code 75 if the lock is still held (or resting after a release) when --wait runs out:
  baton locks acquire: lock "deploy/web" held by "job-7" (token 42) until 14:32:15Z (in 41s)

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	holder := c.fs.String("holder", "", "holder `name` (default: host:pid:random)")
	ttl := c.fs.Duration("ttl", baton.DefaultTTL, "lease `TTL`, 1s to 24h")
	wait := c.fs.Duration("wait", 0, "wait up to `duration` for the lock (0: fail at once if it is held)")
	metadata := c.fs.String("metadata", "", "a `JSON` object stored with the lease (at most 4 KiB)")
	cooldown := c.fs.Duration("cooldown", 0, "keep KEY resting for `duration` after the lease is released, 0 to 24h")
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if *wait < 0 {
		return c.usageError("--wait must not be negative")
	}
	if *cooldown < 0 || *cooldown > store.MaxPause {
		return c.usageError("--cooldown must be between 0 and %s (got %s)", store.MaxPause, *cooldown)
	}
	p := &store.AcquireParams{Key: pos[0], LeaseID: randomHex(16), Holder: *holder, TTL: *ttl, Cooldown: *cooldown}
	if p.Holder == "" {
		p.Holder = defaultHolder()
	}
	if *metadata != "" {
		p.Metadata = json.RawMessage(*metadata)
	}
	if err := p.Validate(); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, *wait)
	if !ok {
		return code
	}
	defer done()
	var err error
	var l *store.Lease
	if *wait == 0 {
		l, err = st.Acquire(ctx, p)
	} else {
		locker, lerr := baton.NewLocker(st, nil)
		if lerr != nil {
			return c.fail(g, lerr)
		}
		wctx, wcancel := context.WithTimeout(ctx, *wait)
		l, err = locker.AcquireRecord(wctx, p)
		wcancel()
	}
	if err != nil {
		return c.fail(g, err)
	}
	if err := writeLease(stdout, g, l); err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func locksRenew(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks renew", `Usage: baton locks renew KEY --lease ID [--ttl 15s] [-o table|json]

Extend the lease ID on KEY by --ttl from now, and print it. Exit code 3 if the lease is no
longer the live lease on KEY (it expired, was released, taken over or force-released).

Example:
  baton locks renew deploy/web --lease 5b1e07… --ttl 5m

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	lease := c.fs.String("lease", "", "the lease `ID` (required)")
	ttl := c.fs.Duration("ttl", baton.DefaultTTL, "new `TTL` from now, 1s to 24h")
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if *lease == "" {
		return c.usageError("--lease is required")
	}
	p := &store.RenewParams{Key: pos[0], LeaseID: *lease, TTL: *ttl}
	if err := p.Validate(); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	l, err := st.Renew(ctx, p)
	if errors.Is(err, store.ErrNotHeld) {
		fmt.Fprintf(stderr, "%s: lease %s is not the live lease on %q (it expired, was released, taken over or force-released)\n", c.name, p.LeaseID, p.Key)
		return exitNotFound
	}
	if err != nil {
		return c.fail(g, err)
	}
	if err := writeLease(stdout, g, l); err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func locksRelease(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks release", `Usage: baton locks release KEY --lease ID [-o table|json]

Release the lease ID on KEY. Releasing a lease again is harmless ("already released", exit
code 0); exit code 3 if the lease is not the live lease on KEY (it expired and the key was
taken, or it was force-released).

Example:
  baton locks release deploy/web --lease 5b1e07…

Output:
  released lease 5b1e07… on deploy/web

With -o json: {"released": true, "already_released": false}

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	lease := c.fs.String("lease", "", "the lease `ID` (required)")
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if *lease == "" {
		return c.usageError("--lease is required")
	}
	p := &store.ReleaseParams{Key: pos[0], LeaseID: *lease}
	if err := p.Validate(); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	res, err := st.Release(ctx, p)
	if errors.Is(err, store.ErrNotHeld) {
		fmt.Fprintf(stderr, "%s: lease %s is not the live lease on %q (it expired and the key was taken, or it was force-released)\n", c.name, p.LeaseID, p.Key)
		return exitNotFound
	}
	if err != nil {
		return c.fail(g, err)
	}
	switch {
	case g.output == "json":
		err = writeJSON(stdout, map[string]bool{"released": !res.AlreadyReleased, "already_released": res.AlreadyReleased})
	case res.AlreadyReleased:
		_, err = fmt.Fprintf(stdout, "lease %s on %s was already released\n", p.LeaseID, p.Key)
	default:
		_, err = fmt.Fprintf(stdout, "released lease %s on %s\n", p.LeaseID, p.Key)
	}
	if err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func locksForceRelease(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton locks force-release", `Usage: baton locks force-release KEY --reason TEXT [-o table|json]

End whatever lease holds KEY, whoever holds it (admin role), and print the lease that was
ended. The key then rests for that lease's lock-delay. The holder finds out at its next renew;
it may still be working: prefer letting the lease expire.

If no lease holds KEY but KEY is resting (the cooldown after a release, or the lock-delay after
an expiry or a force-release), end that rest instead: the next acquire is granted at once. Both
are recorded in the audit log (force_release, clear_rest) with --reason. Exit code 3 if KEY is
free and not resting.

Examples:
  baton locks force-release terraform/prod --reason "runner ci-7 is wedged"
  baton locks force-release node/node-1 --reason "rebooted by hand, healthy"

Output when a rest was cleared:
  cleared the cooldown on node/node-1 (9m12s were left); the next acquire is granted at once
With -o json: {"rest": {"key": "node/node-1", "reason": "cooldown", "remaining_ms": 552000}}

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	reason := c.fs.String("reason", "", "why, for the server's log (required)")
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if *reason == "" {
		return c.usageError("--reason is required")
	}
	p := &store.ForceReleaseParams{Key: pos[0], Reason: *reason}
	if g.token == "" {
		p.Actor = osActor() // with a token, the server records the token's name instead
	}
	if err := p.Validate(); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	l, err := st.ForceRelease(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return clearRest(c, g, st, p, stdout)
	}
	if err != nil {
		return c.fail(g, err)
	}
	if err := writeLease(stdout, g, l); err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

// clearRest ends the rest of a key that no lease holds, for force-release.
func clearRest(c *command, g *globals, st store.Store, p *store.ForceReleaseParams, stdout io.Writer) int {
	ctx, cancel := callContext(0)
	defer cancel()
	rest, err := st.ClearRest(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(c.stderr, "%s: %q is free: no lease to end and no cooldown or lock-delay to clear\n", c.name, p.Key)
		return exitNotFound
	}
	if err != nil {
		return c.fail(g, err)
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.RestResponse{Rest: wire.Rest{Key: rest.Key, Reason: rest.Reason, RemainingMs: rest.Remaining.Milliseconds()}})
	} else {
		_, err = fmt.Fprintf(stdout, "cleared the %s on %s (%s were left); the next acquire is granted at once\n",
			rest.Reason, rest.Key, roundDuration(rest.Remaining))
	}
	if err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// defaultHolder is unique to this call, like the Locker's default: host:pid:random.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(6))
}
