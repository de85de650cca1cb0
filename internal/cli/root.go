package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// rootCommand is the command tree, built anew for each run (its flags are bound to this run's
// values). Every command is listed here; each is declared, with its flags and help, in the file
// named after it.
func (a *app) rootCommand() *cobra.Command {
	root := a.command(&cobra.Command{
		Use: "baton COMMAND [flags]",
		Long: `baton: one job at a time on a resource.

Global flags of the client commands (all but 'serve', 'token', 'version' and 'completion';
before or after the command): --server URL (env BATON_SERVER, default ` + defaultServer + `),
--token TOKEN (env BATON_TOKEN), -o table|json (not 'run' and 'worker'; default table).
'baton help COMMAND' is 'baton COMMAND --help'.`,
		Args:          groupArgs,
		SilenceErrors: true, // report prints errors, once, in the CLI's own format
		SilenceUsage:  true,
		// Each command parses the flags before its word: the root parses the global flags of
		// `baton --server URL locks list` (it has them, bound to the same values as the client
		// commands'), and completion offers commands after them.
		TraverseChildren: true,
		Version:          readBuildDetails().String(),
		// Every command with -o checks it before it runs (commands run no pre-run of their own).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Lookup("output") != nil {
				return a.g.checkOutput()
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().NFlag() > 0 { // baton --server URL, and no command
				return usagef("missing command")
			}
			return a.runGroup(cmd, args)
		},
	}, meta{})
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("baton {{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { a.printHelp(cmd.OutOrStdout(), cmd) })
	root.SetHelpCommand(a.helpCommand())
	root.CompletionOptions.DisableDefaultCmd = true // completion.go declares baton completion
	a.addGlobalFlags(root, true)
	root.AddCommand(
		a.serveCommand(),
		a.locksCommand(),
		a.runCommand(),
		a.eventsCommand(),
		a.jobsCommand(),
		a.dlqCommand(),
		a.resourcesCommand(),
		a.explainCommand(),
		a.kindsCommand(),
		a.periodicCommand(),
		a.workerCommand(),
		a.fenceCommand(),
		a.limitsCommand(),
		a.ratesCommand(),
		a.tokenCommand(),
		a.versionCommand(),
		a.completionCommand(),
	)
	// Cobra adds --help (and the root's --version) to a command when it runs; adding them now
	// lets every command's help list them, whichever command shows it.
	root.InitDefaultVersionFlag()
	var initHelp func(*cobra.Command)
	initHelp = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.Flags().Lookup("help").Usage = "print this help"
		for _, sub := range c.Commands() {
			initHelp(sub)
		}
	}
	initHelp(root)
	root.Flags().Lookup("version").Usage = "print the version"
	return root
}

// group declares a command group: it runs one of its commands, and without one prints its help
// on stderr (exit code 2).
func (a *app) group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.Args = groupArgs
	cmd.RunE = a.runGroup
	cmd.AddCommand(subs...)
	return a.command(cmd, meta{})
}

func (a *app) helpCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "print a command's help",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				word := args[len(args)-len(rest)]
				if target == nil {
					target = cmd.Root()
				}
				return &usageError{msg: fmt.Sprintf("unknown command %q%s", word, didYouMean(word, commandNames(target), quoted)), help: true, of: target}
			}
			a.printHelp(a.stdout, target)
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, _, err := cmd.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, c := range target.Commands() {
				if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}, meta{exits: []int{exitOK, exitUsage}})
}

func (a *app) versionCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "version",
		Short: "print the version",
		Long:  "Print the version, the VCS revision the binary was built from and the Go version.",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(a.stdout, "baton", readBuildDetails())
			return nil
		},
	}, meta{exits: []int{exitOK}})
}
