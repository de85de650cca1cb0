package cli

import (
	"fmt"
	"io"
)

// subcommand runs one command of a group with the arguments after its name.
type subcommand = func(args []string, g *globals, stdout, stderr io.Writer) int

// runGroup runs a command group (baton locks, baton jobs, …): its usage for help, or on stderr
// with exit code 2 when no command is given; the subcommand args[0] names (aliases are entries
// of their own); or, for an unknown name, a usage error that suggests a close one.
func runGroup(group, usage string, subs map[string]subcommand, args []string, g *globals, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if run, ok := subs[args[0]]; ok {
		return run(args[1:], g, stdout, stderr)
	}
	return unknownCommand(stderr, group, args[0], usage)
}
