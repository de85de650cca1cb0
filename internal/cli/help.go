package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpWidth is the width the help's flag list and exit codes are wrapped to.
const helpWidth = 100

// printHelp writes cmd's help, all of it from the command tree: the usage line (cmd.Use, whose
// lines after the first continue it, or, starting with "|", give another form), the text
// (cmd.Long), the subcommands, the flags with their defaults, and the exit codes.
func (a *app) printHelp(w io.Writer, cmd *cobra.Command) {
	var b strings.Builder
	parent := ""
	if cmd.HasParent() {
		parent = cmd.Parent().CommandPath() + " "
	}
	for i, line := range strings.Split(cmd.Use, "\n") {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "Usage: %s%s\n", parent, line)
		case strings.HasPrefix(line, "|"):
			fmt.Fprintf(&b, "       %s%s\n", parent, strings.TrimSpace(line[1:]))
		default:
			fmt.Fprintf(&b, "         %s\n", strings.TrimSpace(line))
		}
	}
	if long := strings.Trim(cmd.Long, "\n"); long != "" {
		b.WriteString("\n" + long + "\n")
	}
	if names := commandNames(cmd); len(names) > 0 {
		b.WriteString("\nCommands:\n")
		width := 0
		for _, n := range names {
			width = max(width, len(n))
		}
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name(), c.Short)
			}
		}
		fmt.Fprintf(&b, "\nRun '%s COMMAND --help' for a command's flags.\n", cmd.CommandPath())
	}
	if flags := flagList(cmd.Flags()); flags != "" {
		b.WriteString("\nFlags:\n" + flags)
	}
	if line := exitCodesLine(a.exits(cmd)); line != "" {
		b.WriteString("\n" + line)
	}
	_, _ = io.WriteString(w, b.String())
}

// exits are the exit codes of cmd's help: its own, or for a group those of its commands.
func (a *app) exits(cmd *cobra.Command) []int {
	if own := a.metaOf(cmd).exits; own != nil {
		return own
	}
	var all []int
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			for _, code := range a.exits(c) {
				if !slices.Contains(all, code) {
					all = append(all, code)
				}
			}
		}
	}
	return all
}

// exitCodesLine is "Exit codes: 0 success; 1 error ...", the codes in the table's order.
func exitCodesLine(codes []int) string {
	var parts []string
	for _, e := range exitCodeTable {
		if slices.Contains(codes, e.code) {
			parts = append(parts, e.name+" "+e.meaning)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(wrap("Exit codes: "+strings.Join(parts, "; ")+".", helpWidth), "\n") + "\n"
}

// flagList lists the visible flags of fs, one a line: the flag, its value's name, what it does
// and its default (every default that is not the zero value is shown).
func flagList(fs *pflag.FlagSet) string {
	type row struct{ flag, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		value, usage := pflag.UnquoteUsage(f)
		flag := "      --" + f.Name
		if f.Shorthand != "" {
			flag = "  -" + f.Shorthand + ", --" + f.Name
		}
		if value != "" {
			flag += " " + value
		}
		if def, ok := defaultText(f); ok {
			usage += " (default " + def + ")"
		}
		rows = append(rows, row{flag, usage})
		width = max(width, len(flag))
	})
	width = min(width, 34)
	var b strings.Builder
	for _, r := range rows {
		lines := wrap(r.usage, helpWidth-width-2)
		if len(r.flag) > width { // a long flag: its text starts on the next line
			fmt.Fprintf(&b, "%s\n", r.flag)
			r.flag = ""
		}
		for i, l := range lines {
			if i > 0 {
				r.flag = ""
			}
			fmt.Fprintf(&b, "%-*s  %s\n", width, r.flag, l)
		}
	}
	return b.String()
}

// defaultText is the flag's default as its help shows it, and false for a zero value (no
// default worth showing): "" (a string's, or a secret's), 0, 0s, false.
func defaultText(f *pflag.Flag) (string, bool) {
	switch f.DefValue {
	case "", "0", "0s", "false", "[]":
		return "", false
	}
	if f.Value.Type() == "string" {
		return fmt.Sprintf("%q", f.DefValue), true
	}
	return f.DefValue, true
}

// wrap breaks text into lines of at most width runes at spaces (a longer word gets a line of
// its own). A parenthesis that names an environment variable or a default is kept whole.
func wrap(text string, width int) []string {
	const nbsp = "\x00" // not a space to strings.Fields, unlike U+00A0
	for _, group := range []string{"(env ", "(default "} {
		text = strings.ReplaceAll(text, group, strings.TrimSuffix(group, " ")+nbsp)
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		word = strings.ReplaceAll(word, nbsp, " ")
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		lines = []string{""}
	}
	return lines
}
