package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) locksCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "locks COMMAND [flags]",
		Short: "inspect and manage locks on a server",
		Long:  "Inspect and manage locks on a baton server.",
	},
		a.locksListCommand(),
		a.locksStatusCommand(),
		a.locksAcquireCommand(),
		a.locksRenewCommand(),
		a.locksReleaseCommand(),
		a.locksForceReleaseCommand(),
		a.locksWaitersCommand(),
	)
}

// listPageSize is the page size of 'locks list' without --limit (a variable for tests).
var listPageSize = store.MaxListLimit

func (a *app) locksListCommand() *cobra.Command {
	var prefix, holder string
	var limit int
	var watch bool
	var interval time.Duration
	cmd := a.command(&cobra.Command{
		Use:     "list [--prefix P] [--holder H] [--limit N] [--watch [--interval 1s]] [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list live leases",
		Long: `List live leases in key order. Without --limit, every page is fetched. --watch then asks the
server every --interval and prints the list again, under a time line, whenever a lease was
taken, released, expired or taken over (not for renewals), until interrupted (Ctrl-C; exit
code 0).

Example:
  baton locks list --prefix terraform/

Output (table):
  KEY             HOLDER       TOKEN  EXPIRES          LEASE_ID
  terraform/prod  ci-runner-7  42     14:31:49Z (14s)  9f0c2d…

With -o json, a JSON array of lease objects (docs/http-api.md).`,
		Args: noArgs,
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&prefix, "prefix", "", "only keys starting with `P`")
	fs.StringVar(&holder, "holder", "", "only leases held by `H`")
	fs.IntVar(&limit, "limit", 0, "at most `N` leases (1-1000), one page")
	fs.BoolVar(&watch, "watch", false, "then print the list again each time a lease is taken, released or taken over, until interrupted")
	pollFlag(cmd, &interval)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		if err := checkInterval(interval); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		list := func(ctx context.Context) ([]*store.Lease, error) {
			return listPages(limit, func(after string, n int) ([]*store.Lease, error) {
				return st.List(ctx, &store.ListParams{Prefix: prefix, Holder: holder, After: after, Limit: n})
			}, func(l *store.Lease) string { return l.Key })
		}
		all, err := list(ctx)
		if err != nil {
			return err
		}
		if err := writeLeases(a.stdout, a.g, all); err != nil {
			return err
		}
		if watch {
			return a.watchLeases(cmd, all, list, interval)
		}
		return nil
	}
	return cmd
}

func (a *app) locksStatusCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:     "status KEY [-o table|json]",
		Aliases: []string{"get"},
		Short:   "show the lease on a key, or that it is free",
		Long: `Show the live lease on KEY, or say that KEY is free (exit code 0 either way).

Example:
  baton locks status terraform/prod

Output (table):
  KEY             HOLDER       TOKEN  EXPIRES          LEASE_ID
  terraform/prod  ci-runner-7  42     14:31:49Z (14s)  9f0c2d…
or
  terraform/prod is free

With -o json, the lease object (docs/http-api.md), or null if KEY is free.`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		key := args[0]
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		l, err := st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			if a.g.output == "json" {
				fmt.Fprintln(a.stdout, "null")
			} else {
				fmt.Fprintf(a.stdout, "%s is free\n", key)
			}
			return nil
		}
		if err != nil {
			return err
		}
		return writeLease(a.stdout, a.g, l)
	}
	return cmd
}

func (a *app) locksAcquireCommand() *cobra.Command {
	var holder, metadata string
	locks, limits := &listFlag{}, &listFlag{}
	var shared bool
	var ttl, wait, cooldown time.Duration
	cmd := a.command(&cobra.Command{
		Use:   "acquire KEY [--lock KEY2...] [--shared] [--limit NAME...] [--holder NAME] [--ttl 15s] [--wait 0s] [--cooldown D] [--metadata JSON] [-o table|json]",
		Short: "take a lock (no keepalive: renew it yourself, or use 'baton run')",
		Long: `Take the lock on KEY and print the lease, with its lease ID and fencing token. Nothing keeps
the lease alive: renew it with 'baton locks renew KEY --lease ID' before its TTL runs out, and
release it with 'baton locks release KEY --lease ID'. To run a command under a lock that is
kept alive for as long as the command runs, use 'baton run'.

The same --holder acquiring a key it holds gets its lease back, renewed (a safe retry).
With --cooldown D, KEY rests for D after the lease is released: every acquire is refused until
then (exit code 75), unless an operator ends the rest with 'baton locks force-release'.
--lock KEY2 (repeatable) holds more keys with KEY, all or nothing, under one token; --shared
holds them shared with other shared holders; --limit NAME (repeatable) takes one unit of the
limit NAME (SQLite and PostgreSQL stores only; see 'baton run --help').

Example:
  baton locks acquire deploy/web --holder job-1234 --ttl 5m --wait 30s --metadata '{"job":"1234"}'

Output (table):
  KEY         HOLDER    TOKEN  EXPIRES             LEASE_ID
  deploy/web  job-1234  43     14:36:34Z (5m0s)    5b1e07…

Exit code 75 if the lock is still held (or resting after a release) when --wait runs out:
  baton locks acquire: lock "deploy/web" held by "job-7" (token 42) until 14:32:15Z (in 41s)`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitBusy, exitAuth}})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&holder, "holder", "", "holder `name` (default: host:pid:random)")
	fs.DurationVar(&ttl, "ttl", baton.DefaultTTL, "lease `TTL`, 1s to 24h")
	fs.DurationVar(&wait, "wait", 0, "wait up to `duration` for the lock (0: fail at once if it is held)")
	fs.StringVar(&metadata, "metadata", "", "a `JSON` object stored with the lease (at most 4 KiB)")
	fs.DurationVar(&cooldown, "cooldown", 0, "keep KEY resting for `duration` after the lease is released, 0 to 24h")
	fs.Var(locks, "lock", "also hold the key `KEY2`, all or nothing; repeatable")
	fs.BoolVar(&shared, "shared", false, "hold the keys shared with other shared holders (exclusive by default)")
	fs.Var(limits, "limit", "also take one unit of the limit `NAME`; repeatable")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if wait < 0 {
			return usagef("--wait must not be negative")
		}
		if cooldown < 0 || cooldown > store.MaxRest {
			return usagef("--cooldown must be between 0 and %s (got %s)", store.MaxRest, cooldown)
		}
		p := &store.AcquireParams{Key: args[0], LeaseID: randomHex(16), Holder: holder, TTL: ttl, Cooldown: cooldown,
			Shared: shared, Resources: locks.vals, Limits: limits.vals}
		if p.Holder == "" {
			p.Holder = defaultHolder()
		}
		if metadata != "" {
			p.Metadata = json.RawMessage(metadata)
		}
		if err := p.Validate(); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(wait)
		if err != nil {
			return err
		}
		defer done()
		var l *store.Lease
		if wait == 0 {
			l, err = st.Acquire(ctx, p)
		} else {
			locker, lerr := baton.NewLocker(st, nil)
			if lerr != nil {
				return lerr
			}
			wctx, wcancel := context.WithTimeout(ctx, wait)
			l, err = locker.AcquireRecord(wctx, p)
			wcancel()
		}
		if err != nil {
			return err
		}
		return writeLease(a.stdout, a.g, l)
	}
	return cmd
}

func (a *app) locksRenewCommand() *cobra.Command {
	var lease string
	var ttl time.Duration
	cmd := a.command(&cobra.Command{
		Use:   "renew KEY --lease ID [--ttl 15s] [-o table|json]",
		Short: "extend a lease",
		Long: `Extend the lease ID on KEY by --ttl from now, and print it. Exit code 3 if the lease is no
longer the live lease on KEY (it expired, was released, taken over or force-released).

Example:
  baton locks renew deploy/web --lease 5b1e07… --ttl 5m`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsLookup})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&lease, "lease", "", "the lease `ID` (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", baton.DefaultTTL, "new `TTL` from now, 1s to 24h")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := required("lease", lease); err != nil {
			return err
		}
		p := &store.RenewParams{Key: args[0], LeaseID: lease, TTL: ttl}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			l, err := st.Renew(ctx, p)
			if errors.Is(err, store.ErrNotHeld) {
				return explain(err, "lease %s is not the live lease on %q (it expired, was released, taken over or force-released)", p.LeaseID, p.Key)
			}
			if err != nil {
				return err
			}
			return writeLease(a.stdout, a.g, l)
		})
	}
	return cmd
}

func (a *app) locksReleaseCommand() *cobra.Command {
	var lease string
	cmd := a.command(&cobra.Command{
		Use:   "release KEY --lease ID [-o table|json]",
		Short: "release a lease",
		Long: `Release the lease ID on KEY. Releasing a lease again is harmless ("already released", exit
code 0); exit code 3 if the lease is not the live lease on KEY (it expired and the key was
taken, or it was force-released).

Example:
  baton locks release deploy/web --lease 5b1e07…

Output:
  released lease 5b1e07… on deploy/web

With -o json: {"released": true, "already_released": false}`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsLookup})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&lease, "lease", "", "the lease `ID` (required)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := required("lease", lease); err != nil {
			return err
		}
		p := &store.ReleaseParams{Key: args[0], LeaseID: lease}
		return a.call(p, func(ctx context.Context, st *client.Store) error { return a.release(ctx, st, p) })
	}
	return cmd
}

// release is locks release's call.
func (a *app) release(ctx context.Context, st *client.Store, p *store.ReleaseParams) error {
	res, err := st.Release(ctx, p)
	if errors.Is(err, store.ErrNotHeld) {
		return explain(err, "lease %s is not the live lease on %q (it expired and the key was taken, or it was force-released)", p.LeaseID, p.Key)
	}
	if err != nil {
		return err
	}
	switch {
	case a.g.output == "json":
		return writeJSON(a.stdout, map[string]bool{"released": !res.AlreadyReleased, "already_released": res.AlreadyReleased})
	case res.AlreadyReleased:
		_, err = fmt.Fprintf(a.stdout, "lease %s on %s was already released\n", p.LeaseID, p.Key)
	default:
		_, err = fmt.Fprintf(a.stdout, "released lease %s on %s\n", p.LeaseID, p.Key)
	}
	return err
}

func (a *app) locksForceReleaseCommand() *cobra.Command {
	var reason string
	cmd := a.command(&cobra.Command{
		Use:   "force-release KEY --reason TEXT [-o table|json]",
		Short: "end whoever's lease holds a key (admin)",
		Long: `End whatever lease holds KEY, whoever holds it (admin role), and print the lease that was
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
With -o json: {"rest": {"key": "node/node-1", "reason": "cooldown", "remaining_ms": 552000}}`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsLookup})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the server's log (required)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := required("reason", reason); err != nil {
			return err
		}
		p := &store.ForceReleaseParams{Key: args[0], Reason: reason, Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			l, err := st.ForceRelease(ctx, p)
			if errors.Is(err, store.ErrNotFound) {
				return a.clearRest(st, &store.ClearRestParams{Key: p.Key, Reason: p.Reason, Actor: p.Actor})
			}
			if err != nil {
				return err
			}
			return writeLease(a.stdout, a.g, l)
		})
	}
	return cmd
}

// clearRest ends the rest of a key that no lease holds, for force-release.
func (a *app) clearRest(st store.Store, p *store.ClearRestParams) error {
	ctx, cancel := callContext(0)
	defer cancel()
	rest, err := st.ClearRest(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return explain(err, "%q is free: no lease to end and no cooldown or lock-delay to clear", p.Key)
	}
	if err != nil {
		return err
	}
	if a.g.output == "json" {
		return writeJSON(a.stdout, wire.RestResponse{Rest: wire.Rest{Key: rest.Key, Reason: rest.Reason, RemainingMs: rest.Remaining.Milliseconds()}})
	}
	_, err = fmt.Fprintf(a.stdout, "cleared the %s on %s (%s were left); the next acquire is granted at once\n",
		rest.Reason, rest.Key, roundDuration(rest.Remaining))
	return err
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
