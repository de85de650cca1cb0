package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// compatArgs rewrites the command line for pflag, so that what the flag package accepted before
// still works, and refuses a flag that takes one value given twice (pflag would keep the last):
//
//   - "-name" (one dash, a long flag's name) becomes "--name", as docs/cli.md allows;
//   - "--o" (two dashes, a one-letter flag) becomes "-o".
//
// It walks the command words as cobra does, so that each flag is looked up on the command that
// will parse it, and it knows which flags take a value, so that a value such as "-1s" is left
// alone. "--" ends the flags, and so does the first argument of a command that runs a command
// line of its own (run, worker): CMD's flags are CMD's. For a completion request (baton
// __complete ARGS), ARGS are rewritten but for the word being completed, and repeats are not
// refused. cmd is the command an error is about.
func (a *app) compatArgs(root *cobra.Command, args []string) (out []string, cmd *cobra.Command, err error) {
	cur, last, complete := root, len(args), false
	if isCompletionRequest(args) {
		out = append(out, args[0])
		args, last, complete = args[1:], len(args)-2, true
	}
	seen := map[string]bool{} // flags of cur that take one value, given already
	words := true             // a command word may still come
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case i >= last:
			out = append(out, s)
			continue
		case s == "--":
			return append(out, args[i:]...), cur, nil
		case len(s) < 2 || s[0] != '-': // an argument ("-" alone is one too: stdin)
			if words {
				if sub := subcommand(cur, s); sub != nil {
					cur, seen = sub, map[string]bool{}
					out = append(out, s)
					continue
				}
				words = false
			}
			if a.metaOf(cur).cmdLine {
				return append(out, args[i:]...), cur, nil
			}
			out = append(out, s)
			continue
		}
		s = dashes(cur, s)
		out = append(out, s)
		f, attached := lookupFlag(cur, s)
		if f == nil || f.NoOptDefVal != "" { // unknown (pflag says so), or a switch
			continue
		}
		if !attached && i+1 < last {
			i++
			out = append(out, args[i])
		}
		if _, repeatable := f.Value.(*listFlag); !repeatable && !complete {
			if seen[f.Name] {
				return nil, cur, usagef("%s is given twice; it takes one value", flagName(f))
			}
			seen[f.Name] = true
		}
	}
	return out, cur, nil
}

// dashes gives a flag the dashes pflag wants: --name for a long flag, -x for a shorthand.
func dashes(cmd *cobra.Command, s string) string {
	body := strings.TrimLeft(s, "-")
	name, _, _ := strings.Cut(body, "=")
	switch {
	case strings.HasPrefix(s, "--"):
		if len(name) == 1 && shorthand(cmd, name) != nil {
			return "-" + body
		}
	case len(name) > 1 && (longFlag(cmd, name) != nil || shorthand(cmd, name[:1]) == nil):
		// -name of a long flag; an unknown one too, so that pflag's error names --name.
		// -ojson, a shorthand with its value attached, stays.
		return "--" + body
	}
	return s
}

// lookupFlag finds the flag of s ("--name", "--name=v", "-o", "-ojson", "-o=json") and reports
// whether its value is attached to it.
func lookupFlag(cmd *cobra.Command, s string) (*pflag.Flag, bool) {
	if body, ok := strings.CutPrefix(s, "--"); ok {
		name, _, attached := strings.Cut(body, "=")
		return longFlag(cmd, name), attached
	}
	body := s[1:]
	return shorthand(cmd, body[:1]), len(body) > 1
}

// longFlag looks a flag up by name, cobra's help and version flags included (cobra adds them
// when the command runs).
func longFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if f := cmd.Flag(name); f != nil {
		return f
	}
	switch {
	case name == "help", name == "version" && !cmd.HasParent():
		return &pflag.Flag{Name: name, NoOptDefVal: "true"}
	}
	return nil
}

func shorthand(cmd *cobra.Command, letter string) *pflag.Flag {
	if f := cmd.Flags().ShorthandLookup(letter); f != nil {
		return f
	}
	switch {
	case letter == "h", letter == "v" && !cmd.HasParent():
		return &pflag.Flag{Name: letter, NoOptDefVal: "true"}
	}
	return nil
}

// subcommand is cmd's subcommand named (or aliased) word, or nil.
func subcommand(cmd *cobra.Command, word string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == word || c.HasAlias(word) {
			return c
		}
	}
	return nil
}

// flagName is a flag as the help writes it: -o for the output flag, --name for the others.
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand
	}
	return "--" + f.Name
}

// noArgs refuses arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// exactArgs wants n arguments, what names them for a missing one ("KEY", "KEY and STATE").
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return usagef("missing %s", what)
		case len(args) > n:
			return usagef("unexpected argument %q", args[n])
		}
		return nil
	}
}

// minArgs wants at least one argument, what names it.
func minArgs(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("missing %s", what)
		}
		return nil
	}
}
