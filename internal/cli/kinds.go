package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) kindsCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "kinds COMMAND [flags]",
		Short: "job kinds (set: admin)",
		Long: `Job kinds: a kind is registered before jobs of it can be submitted, and says how they run
(busy policy, attempts, timeout, cooldown, state guard). Definitions live in the server's
database: every submitter and worker applies the same rules.`,
	},
		a.kindsListCommand(),
		a.kindsSetCommand(),
	)
}

const kindOutputHelp = `Output (table):
  NAME    POLICY  ATTEMPTS  TIMEOUT  COOLDOWN  FROM_STATES  RUNNING_STATE  SUCCESS_STATE  FAILURE_STATE
  deploy  reject  3         10m0s    -         "",deployed  deploying      deployed       broken

("" is the state of a resource never set.) MODE and LIMITS columns are added when a kind
listed is shared or takes limits. With -o json: {"name", "policy", "max_attempts",
"timeout_ms", "cooldown_ms", "from_states", "running_state", "success_state", "failure_state",
"resource_cooldown_ms", "mode", "limits"}.`

func (a *app) kindsListCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:     "list [-o table|json]",
		Aliases: []string{"ls"},
		Short:   "list the registered kinds",
		Long: `List the registered kinds, by name.

` + kindOutputHelp + ` A JSON array for list.`,
		Args: noArgs,
	}, meta{exits: exitsRead, names: jobNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(*cobra.Command, []string) error {
		return a.withStore(func(ctx context.Context, st *client.Store) error {
			kinds, err := st.Kinds(ctx)
			if err != nil {
				return err
			}
			return writeKinds(a.stdout, a.g, kinds)
		})
	}
	return cmd
}

func (a *app) kindsSetCommand() *cobra.Command {
	var policy, fromStates, runningState, successState, failureState, mode string
	limits := &listFlag{}
	var maxAttempts int
	var timeout, cooldown, resourceCooldown, debounce time.Duration
	cmd := a.command(&cobra.Command{
		Use: `set NAME [--policy queue|skip|reject|replace] [--debounce D] [--max-attempts N] [--timeout D] [--cooldown D]
[--resource-cooldown D] [--from-states A,B] [--running-state S] [--success-state S] [--failure-state S]
[--mode exclusive|shared] [--limit TEMPLATE...] [-o table|json]`,
		Short: "create or change a kind (admin)",
		Long: `Create or change the kind NAME (admin) and print it. Flags not given keep the kind's current
values (for a new kind: the defaults). An empty value clears a setting: --timeout 0,
--from-states '' (any state), --success-state ''.

- --policy: what a submit does when the job's resource has unfinished jobs: queue behind them
  (default), skip (record the job as skipped), reject (refuse it; exit code 75) or replace
  (latest wins: the queued jobs of this kind on the resource are superseded by the new one, a
  running one is asked to stop, and the new one starts once it has ended).
- --debounce (policy replace only; 10ms to 24h, 0: none): each job starts no earlier than this
  long after its submit, so that a burst of submits runs once, the last.
- --max-attempts (default 5): attempts before the job is discarded (the dead letter queue),
  1 to 1000; 0 is refused (it does not mean "unlimited" nor "the default").
- --timeout: bounds one attempt ('baton worker' then stops CMD); 0 means none.
- --cooldown: after a job of this kind ends on a resource, the next one of this kind on that
  resource waits this long.
- --resource-cooldown: after a job of this kind ends on a resource after an attempt (succeeded,
  discarded or cancelled), the resource is "recently remediated" for this long, for every kind:
  a job submitted to it meanwhile is skipped (error code resource_cooldown, with the time left),
  not queued; a job already queued there starts after it. An admin ends it early with
  'baton resources clear-cooldown'.
- State guard: a job starts only if its resource's state is one of --from-states (comma
  separated; an empty item is the state of a resource never set, e.g. ',idle'; empty list:
  any state). --running-state is set when an attempt starts, --success-state when the job
  succeeds, --failure-state when it ends discarded or cancelled after an attempt.
- --mode: how the kind's jobs hold their resources, exclusive (default) or shared with other
  shared holders; a submit's --mode overrides it. Jobs of one resource still run one at a time.
- --limit (repeatable): each job of the kind takes one unit of the limit per attempt ('baton
  limits set NAME N'). A limit may be a template: its {args.NAME} parts take the value of the
  job's argument NAME (a string or a number), so 'zone/{args.zone}' is zone/eu for a job with
  args {"zone":"eu"}; a submit without that argument is refused. Giving --limit replaces the
  kind's limits; --limit '' clears them.

The change is a read and a replace: do not run two for the same kind at once.

Examples:
  baton kinds set deploy --policy queue --max-attempts 3 --timeout 10m
  baton kinds set remediate --policy skip --resource-cooldown 10m
  baton kinds set reindex --policy replace --debounce 30s
  baton kinds set migrate --from-states ,migrated --running-state migrating --success-state migrated --failure-state broken
  baton kinds set drain --mode shared --limit 'zone/{args.zone}'

` + kindOutputHelp,
		Args: exactArgs(1, "NAME"),
	}, meta{exits: exitsRead, writes: true, names: flagNames{"kind": "NAME", "name": "NAME", "limits": "--limit", "debounce": "--debounce"}})
	a.addGlobalFlags(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&policy, "policy", "", "queue, skip, reject or replace")
	fs.DurationVar(&debounce, "debounce", 0, "policy replace only: each job starts this long after its submit, 10ms-24h (0: none)")
	enumFlag(cmd, "policy", busyPolicies...)
	fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts before a job is discarded, 1-1000")
	fs.DurationVar(&timeout, "timeout", 0, "time limit of one attempt, up to 24h (0: none)")
	fs.DurationVar(&cooldown, "cooldown", 0, "pause between two jobs of this kind on one resource")
	fs.DurationVar(&resourceCooldown, "resource-cooldown", 0, "after a job of this kind ends on a resource, skip every submit to it for this long, up to 24h")
	fs.StringVar(&fromStates, "from-states", "", "comma-separated resource `states` a job may start from (empty: any)")
	fs.StringVar(&runningState, "running-state", "", "resource `state` set when an attempt starts")
	fs.StringVar(&successState, "success-state", "", "resource `state` set when a job succeeds")
	fs.StringVar(&failureState, "failure-state", "", "resource `state` set when a job ends discarded or cancelled")
	fs.StringVar(&mode, "mode", "", "how jobs hold their resources: exclusive or shared with other shared holders")
	enumFlag(cmd, "mode", store.ModeExclusive, store.ModeShared)
	fs.Var(limits, "limit", "each job takes one unit of the limit `TEMPLATE` (e.g. zone/{args.zone}); repeatable, '' clears")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if err := store.ValidateKind(name); err != nil {
			return err
		}
		if cmd.Flags().Changed("max-attempts") && (maxAttempts < 1 || maxAttempts > store.MaxMaxAttempts) {
			// The store reads 0 as "the default" (5): a 0 given on purpose must not become 5 silently.
			return usagef("--max-attempts must be between 1 and %d (got %d; leave it out to keep the current value)", store.MaxMaxAttempts, maxAttempts)
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		kinds, err := st.Kinds(ctx)
		if err != nil {
			return err
		}
		k := store.Kind{Name: name}
		if i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == name }); i >= 0 {
			k = kinds[i]
		}
		cmd.Flags().Visit(func(f *pflag.Flag) {
			switch f.Name {
			case "policy":
				k.Policy = store.BusyPolicy(policy)
			case "max-attempts":
				k.MaxAttempts = maxAttempts
			case "timeout":
				k.Timeout = timeout
			case "cooldown":
				k.Cooldown = cooldown
			case "resource-cooldown":
				k.ResourceCooldown = resourceCooldown
			case "debounce":
				k.Debounce = debounce
			case "from-states":
				k.FromStates = splitStates(fromStates)
			case "running-state":
				k.RunningState = runningState
			case "success-state":
				k.SuccessState = successState
			case "failure-state":
				k.FailureState = failureState
			case "mode":
				k.Mode = mode
			case "limit":
				k.Limits = limits.vals
			}
		})
		if err := k.Validate(); err != nil {
			return err
		}
		if err := st.RegisterKinds(ctx, []store.Kind{k}); err != nil {
			return err
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, wire.KindFrom(&k))
		}
		return writeKinds(a.stdout, a.g, []store.Kind{k})
	}
	return cmd
}

// splitStates reads --from-states: "" is the empty list (any state); otherwise comma-separated
// states, an empty item standing for the state of a resource never set. Duplicates are dropped.
func splitStates(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, st := range strings.Split(s, ",") {
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}

func writeKinds(w io.Writer, g *globals, kinds []store.Kind) error {
	if g.output == "json" {
		out := make([]wire.Kind, len(kinds))
		for i := range kinds {
			out[i] = wire.KindFrom(&kinds[i])
		}
		return writeJSON(w, out)
	}
	if len(kinds) == 0 {
		_, err := fmt.Fprintln(w, "no kinds registered")
		return err
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return printable(s)
	}
	// Mode and limits get columns only when a kind uses them, as most kinds do not.
	beyond := slices.ContainsFunc(kinds, func(k store.Kind) bool { return k.Mode == store.ModeShared || len(k.Limits) > 0 })
	tw := newTable(w)
	head := "NAME\tPOLICY\tATTEMPTS\tTIMEOUT\tCOOLDOWN\tFROM_STATES\tRUNNING_STATE\tSUCCESS_STATE\tFAILURE_STATE\tRESOURCE_COOLDOWN"
	if beyond {
		head += "\tMODE\tLIMITS"
	}
	fmt.Fprintln(tw, head)
	for _, k := range kinds {
		timeout, cooldown, resourceCooldown := "-", "-", "-"
		if k.Timeout > 0 {
			timeout = k.Timeout.String()
		}
		if k.Cooldown > 0 {
			cooldown = k.Cooldown.String()
		}
		if k.ResourceCooldown > 0 {
			resourceCooldown = k.ResourceCooldown.String()
		}
		from := "-"
		if len(k.FromStates) > 0 {
			states := make([]string, len(k.FromStates))
			for i, s := range k.FromStates {
				states[i] = strconv.Quote(s)
				if s != "" && !strings.ContainsAny(s, " \t\",") {
					states[i] = s
				}
			}
			from = strings.Join(states, ",")
		}
		policy := string(k.Policy)
		if k.Debounce > 0 {
			policy += " (debounce " + k.Debounce.String() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", k.Name, policy, k.MaxAttempts, timeout, cooldown,
			from, dash(k.RunningState), dash(k.SuccessState), dash(k.FailureState), resourceCooldown)
		if beyond {
			mode := store.ModeExclusive
			if k.Mode != "" {
				mode = k.Mode
			}
			fmt.Fprintf(tw, "\t%s\t%s", mode, dash(strings.Join(k.Limits, ",")))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
