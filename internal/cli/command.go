// Package cli is the baton binary: the server (`baton serve`), a CLI for its HTTP API
// (`baton locks …`, `baton jobs …`), `baton run`, which runs a command while holding a lock, and
// `baton worker`, which runs a command for each job of a queue. cmd/baton is its main package;
// cmd/baton-full, a module of its own, is the same binary with the backends whose clients are
// too heavy for the core module (etcd) registered as store URLs.
package cli

import (
	"fmt"
	"io"
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

const usage = `baton: one job at a time on a resource.

Usage:
  baton serve [flags]                      run the HTTP API server
  baton locks list|status|acquire|renew|release|force-release [flags]
                                           inspect and manage locks on a server
  baton run --lock KEY [flags] -- CMD ...  run CMD while holding the lock KEY
  baton events [--key KEY]                 the audit log (admin)
  baton jobs submit|list|show|cancel|retry [flags]
                                           submit and manage jobs
  baton dlq list|retry|purge [flags]       the dead letters (discarded jobs)
  baton resources list|show|set-state      resources' recorded states
  baton kinds list|set [flags]             job kinds (set: admin)
  baton periodic list                      periodic jobs (serve --periodic-file), next runs
  baton worker --kind KIND [flags] -- CMD ...
                                           run CMD once per job of KIND
  baton fence check [--resource R] [--fencing-token T]
                                           refuse a stale fencing token (exit 76)
  baton fence reset RESOURCE --reason TEXT delete a resource's fence (admin)
  baton token new [--name N] [--role R]    print a new token and its --auth-file line
  baton version                            print the version
  baton completion bash|zsh|fish           print a shell completion script

Global flags of the client commands (all but 'serve'; before or after the command):
  --server URL   server address (env BATON_SERVER, default ` + defaultServer + `)
  --token TOKEN  bearer token (env BATON_TOKEN)
  -o FORMAT      table or json (not 'run' and 'worker'; default table)

Run 'baton COMMAND --help' for a command's flags and examples.

Exit codes: 0 success (for 'run': CMD's exit code); 1 error (server unreachable, unexpected);
2 usage error; 3 not found or not held; 4 job state or resource version conflict;
75 lock or resource busy; 76 lease lost while CMD ran, or a stale fencing token ('fence
check'); 77 unauthorized or forbidden.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "version", "--version", "-version", "-v":
		fmt.Fprintln(stdout, "baton", readBuildDetails())
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(args) > 1 && args[0] == "help" {
			// `baton help locks list` is `baton locks list --help`.
			return run(append(append([]string(nil), args[1:]...), "--help"), stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	case "serve":
		return serveCommand(args[1:], stdout, stderr)
	case "completion":
		return completionCommand(args[1:], stdout, stderr)
	}
	// Global flags may come before the command word: baton --server URL locks list.
	g := defaultGlobals()
	top := newCommand("baton", usage, stdout, stderr)
	g.register(top.fs, true)
	rest, code, ok := top.parseUntilCommand(args)
	if !ok {
		return code
	}
	if len(rest) == 0 {
		return top.usageError("missing command")
	}
	switch rest[0] {
	case "locks":
		return locksCommand(rest[1:], g, stdout, stderr)
	case "run":
		return runCommand(rest[1:], g, stdin, stdout, stderr)
	case "events":
		return eventsCommand(rest[1:], g, stdout, stderr)
	case "jobs":
		return jobsCommand(rest[1:], g, stdin, stdout, stderr)
	case "dlq":
		return dlqCommand(rest[1:], g, stdout, stderr)
	case "resources":
		return resourcesCommand(rest[1:], g, stdout, stderr)
	case "kinds":
		return kindsCommand(rest[1:], g, stdout, stderr)
	case "worker":
		return workerCommand(rest[1:], g, stdout, stderr)
	case "serve":
		return serveCommand(rest[1:], stdout, stderr)
	case "fence":
		return fenceCommand(rest[1:], g, stdout, stderr)
	case "periodic":
		return periodicCommand(rest[1:], g, stdout, stderr)
	case "token":
		return tokenCommand(rest[1:], g, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "baton: unknown command %q%s\n\n%s", rest[0], didYouMean(rest[0], topCommands(), quoted), usage)
		return exitUsage
	}
}

func versionString() string { return readBuildDetails().Version }
