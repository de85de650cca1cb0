package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// editDistance is the optimal-string-alignment distance between a and b: insertions,
// deletions, substitutions and swaps of two neighbours ("lokcs") count one each. Cobra's own
// suggestions use the Levenshtein distance, where a swap counts two: "lokcs" would be as far
// from "locks" as "lists" is.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// suggest returns the candidates close to word: within a third of its length in edits (at
// least 1, at most 3), or having it as a prefix; the closest first, at most three.
func suggest(word string, candidates []string) []string {
	if word == "" {
		return nil
	}
	limit := min(max(len(word)/3, 1), 3)
	type scored struct {
		s string
		d int
	}
	var found []scored
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d <= limit || (len(word) >= 2 && strings.HasPrefix(c, word)) {
			found = append(found, scored{c, d})
		}
	}
	for i := 1; i < len(found); i++ { // insertion sort: a handful of entries, stable
		for j := i; j > 0 && found[j].d < found[j-1].d; j-- {
			found[j], found[j-1] = found[j-1], found[j]
		}
	}
	var out []string
	for _, f := range found[:min(len(found), 3)] {
		out = append(out, f.s)
	}
	return out
}

// didYouMean is "; did you mean X?" (or "X or Y"), or "" when nothing is close.
func didYouMean(word string, candidates []string, quote func(string) string) string {
	s := suggest(word, candidates)
	if len(s) == 0 {
		return ""
	}
	for i := range s {
		s[i] = quote(s[i])
	}
	return "; did you mean " + strings.Join(s, " or ") + "?"
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }

// commandNames are the names of cmd's subcommands that its help lists.
func commandNames(cmd *cobra.Command) []string {
	var out []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			out = append(out, c.Name())
		}
	}
	return out
}

// groupArgs is the Args of a command group: no argument (its RunE prints the help), "help", or
// a usage error for an unknown subcommand that suggests the close ones.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 || args[0] == "help" {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q%s", args[0], didYouMean(args[0], commandNames(cmd), quoted)), help: true}
}

// runGroup is the RunE of a command group: its help for "help", or on stderr with exit code 2
// when no command is given.
func (a *app) runGroup(cmd *cobra.Command, args []string) error {
	if len(args) > 0 { // "help", as groupArgs let through
		a.printHelp(a.stdout, cmd)
		return nil
	}
	return &usageError{help: true}
}

// flagError is the usage error of a flag pflag refused, suggesting the command's flags that
// are close to an unknown one, and saying what a refused value must be.
func flagError(cmd *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &unknown):
		name := unknown.GetSpecifiedName()
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
				if f.Shorthand != "" {
					names = append(names, f.Shorthand)
				}
			}
		})
		return usagef("%v%s", err, didYouMean(name, names, func(s string) string {
			if len(s) == 1 {
				return "-" + s
			}
			return "--" + s
		}))
	case errors.As(err, &invalid):
		return usagef("invalid value %q for %s: %s", invalid.GetValue(), flagName(invalid.GetFlag()), valueRule(invalid.GetFlag()))
	}
	return usagef("%v", err)
}

// valueRule says what a flag's value must be, from its type.
func valueRule(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "must be true or false"
	case "int", "int64":
		return "must be an integer"
	case "duration":
		return "must be a duration such as 5s or 24h"
	}
	return "invalid value"
}
