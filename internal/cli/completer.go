package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// isCompletionRequest reports a call of the completion scripts: baton __complete ARGS (cobra's
// hidden command, the script's way to ask what completes the last of ARGS).
func isCompletionRequest(args []string) bool {
	return len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd)
}

// registerCompletions gives the tree's flags and arguments what completes them, from their
// declarations: an enum flag (enumFlag) completes to its values, a file flag (fileFlag) to file
// names, a command that runs a command line (run, worker) to file names after its flags; any
// other value or argument to nothing, never to file names (a key, an ID, a URL is none).
// Cobra keeps flag completions in a map of its own for the life of the process, so only a
// completion request registers them.
func (a *app) registerCompletions(root *cobra.Command) {
	none, files := cobra.ShellCompDirectiveNoFileComp, cobra.ShellCompDirectiveDefault
	root.CompletionOptions.DefaultShellCompDirective = &none
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if a.metaOf(cmd).cmdLine {
			cmd.CompletionOptions.DefaultShellCompDirective = &files
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			switch {
			case f.Annotations[valuesAnnotation] != nil:
				_ = cmd.RegisterFlagCompletionFunc(f.Name, completeValues(f))
			case f.Annotations[fileAnnotation] != nil:
				_ = cmd.RegisterFlagCompletionFunc(f.Name, func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
					return nil, files
				})
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeValues completes the values of an enum flag; for a flag that takes several separated
// by commas (--state available,ret<TAB>), the last one.
func completeValues(f *pflag.Flag) cobra.CompletionFunc {
	values := f.Annotations[valuesAnnotation]
	list, _ := f.Value.(*listFlag)
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		prefix := ""
		if list != nil && list.split {
			if i := strings.LastIndex(toComplete, ","); i >= 0 {
				prefix = toComplete[:i+1]
			}
		}
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(prefix+v, toComplete) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
