package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// editDistance is the optimal-string-alignment distance between a and b: insertions,
// deletions, substitutions and swaps of two neighbours ("lokcs") count one each. The standard
// library has none, and a dependency is not worth twenty lines.
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

// commandsSection matches the lines of a usage text's "Commands:" list: "  name  what it does".
var commandsSection = regexp.MustCompile(`(?m)^Commands:\n((?:  .*\n)+)`)
var commandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)\s`)

// usageCommands returns the subcommands of group ("baton locks") that its usage text lists
// under "Commands:", or, for a group without that list, names in "baton GROUP SUB" lines.
func usageCommands(group, usage string) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if m := commandsSection.FindStringSubmatch(usage); m != nil {
		for _, l := range commandLine.FindAllStringSubmatch(m[1], -1) {
			add(l[1])
		}
		return out
	}
	re := regexp.MustCompile(regexp.QuoteMeta(group) + ` ([a-z][a-z0-9-]*)`)
	for _, l := range re.FindAllStringSubmatch(usage, -1) {
		add(l[1])
	}
	return out
}

// unknownCommand prints a group's refusal of an unknown subcommand, with a suggestion taken
// from its usage text, and returns the usage exit code.
func unknownCommand(stderr io.Writer, group, sub, usage string) int {
	fmt.Fprintf(stderr, "%s: unknown command %q%s\n\n%s", group, sub, didYouMean(sub, usageCommands(group, usage), quoted), usage)
	return exitUsage
}

// flagError is the usage error of a flag the parser refused, suggesting the flags of c that are
// close to an unknown one.
func (c *command) flagError(err error) int {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		var names []string
		c.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg += didYouMean(name, names, func(s string) string {
			if len(s) == 1 {
				return "-" + s
			}
			return "--" + s
		})
	}
	return c.usageError("%s", msg)
}

var topCommandLine = regexp.MustCompile(`(?m)^  baton ([a-z][a-z0-9-]*)`)

// topCommands returns the commands the top-level usage text lists ("  baton locks …").
func topCommands() []string {
	var out []string
	for _, m := range topCommandLine.FindAllStringSubmatch(usage, -1) {
		if len(out) == 0 || out[len(out)-1] != m[1] {
			out = append(out, m[1])
		}
	}
	return out
}
