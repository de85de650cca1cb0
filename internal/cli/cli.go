// Package cli is the baton binary: the server (`baton serve`), a CLI for its HTTP API
// (`baton locks …`, `baton jobs …`), `baton run`, which runs a command while holding a lock, and
// `baton worker`, which runs a command for each job of a queue. cmd/baton is its main package;
// cmd/baton-full, a module of its own, is the same binary with the backends whose clients are
// too heavy for the core module (etcd) registered as store URLs.
//
// The commands are a cobra command tree, declared once (root.go lists them, each command's file
// declares it with its flags); help, usage errors, suggestions and shell completion come from
// that tree, and errors become exit codes in one place (exitcodes.go).
package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with
// -ldflags "-X github.com/batonhq/baton/internal/cli.version=v1.2.3".
var version = ""

// revision is the VCS revision, set at build time (-X .../internal/cli.revision=$(git rev-parse
// HEAD)) where Go does not embed it itself (a git worktree, -buildvcs=false).
var revision = ""

// Main runs the baton command line args (without the program name) and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(args, stdin, stdout, stderr)
}

// app is one run of the command line: its streams, the values of the global flags and what the
// command tree knows of each command beyond cobra's fields.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	g              *globals
	meta           map[*cobra.Command]*meta
}

// meta is what the help, the error report and the argument rewriting know of a command.
type meta struct {
	// exits are the exit codes the command's help lists (a group lists its commands').
	exits []int
	// writes marks a command that changes the server's data: only its refusals of bad input end
	// with "(nothing written)", which would mislead on a read.
	writes bool
	// names maps the store's field names to the command's flags or arguments, so that invalid
	// input is reported as the user wrote it; nil reports fields as the store names them.
	names flagNames
	// cmdLine marks a command whose first argument starts a command line of its own (run,
	// worker): what follows it is CMD's, flags included.
	cmdLine bool
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	if _, isFile := stderr.(*os.File); !isFile {
		// Commands that run CMDs (run, worker) write to stderr from several goroutines, and
		// os/exec copies CMD's output through a goroutine for a writer that is not a file.
		stderr = &lockedWriter{w: stderr}
	}
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, g: defaultGlobals(), meta: map[*cobra.Command]*meta{}}
}

// command registers what the tree knows of cmd beyond cobra's fields, and returns cmd.
func (a *app) command(cmd *cobra.Command, m meta) *cobra.Command {
	a.meta[cmd] = &m
	return cmd
}

// metaOf is cmd's meta (the zero meta for cobra's own commands).
func (a *app) metaOf(cmd *cobra.Command) *meta {
	if m := a.meta[cmd]; m != nil {
		return m
	}
	return &meta{}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := newApp(stdin, stdout, stderr)
	root := a.rootCommand()
	args, cmd, err := a.compatArgs(root, args)
	if err != nil {
		return a.report(cmd, err)
	}
	if isCompletionRequest(args) {
		a.registerCompletions(root)
	}
	root.SetArgs(args)
	cmd, err = root.ExecuteC()
	return a.report(cmd, err)
}

func versionString() string { return readBuildDetails().Version }
