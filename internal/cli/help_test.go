package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/help")

// helpEnv clears the variables that flags take their defaults from, so that the help shows the
// built-in defaults.
func helpEnv(t *testing.T) {
	for _, v := range []string{"BATON_SERVER", "BATON_TOKEN", "BATON_RESOURCE", "BATON_LOCK_KEY", "BATON_FENCING_TOKEN"} {
		t.Setenv(v, "")
	}
}

// visibleCommands is every command of the tree that a user can run, the root and the groups
// included, and cobra's help command.
func visibleCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			out = append(out, visibleCommands(c)...)
		}
	}
	return out
}

// Every command's --help, as golden files (testdata/help; go test -run TestHelpGolden -update
// rewrites them): printed on stdout with exit code 0, with no panic text, and with the default
// of every flag whose default is not its zero value.
func TestHelpGolden(t *testing.T) {
	helpEnv(t)
	cmds := visibleCommands(newApp(nil, nil, nil).rootCommand())
	if len(cmds) < 40 {
		t.Fatalf("%d commands: the walk missed some", len(cmds))
	}
	for _, cmd := range cmds {
		path := cmd.CommandPath()
		t.Run(path, func(t *testing.T) {
			args := append(strings.Fields(path)[1:], "--help")
			r := cli(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("baton %q: %s", args, r)
			}
			for _, bad := range []string{"panic", "PANIC", "%!", "<nil>"} {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("baton %q prints %q:\n%s", args, bad, r.stdout)
				}
			}
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if def, ok := defaultText(f); ok && !f.Hidden && !strings.Contains(flagRow(r.stdout, f.Name), "(default "+def+")") {
					t.Errorf("baton %q: --%s lacks (default %s):\n%s", args, f.Name, def, r.stdout)
				}
			})
			golden := filepath.Join("testdata", "help", strings.ReplaceAll(path, " ", "_")+".golden")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestHelpGolden -update writes it)", err)
			}
			if r.stdout != string(want) {
				t.Errorf("baton %q --help differs from %s (go test -run TestHelpGolden -update rewrites it):\n--- got\n%s--- want\n%s",
					args[:len(args)-1], golden, r.stdout, want)
			}
		})
	}
}

// flagRow is the lines of a help's flag list about the flag name: its line and the lines that
// continue its text.
func flagRow(help, name string) string {
	_, flags, _ := strings.Cut(help, "\nFlags:\n")
	var row []string
	in := false
	for _, line := range strings.Split(flags, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "-"):
			in = strings.Contains(line, "--"+name+" ") || strings.HasSuffix(line, "--"+name)
		case trimmed == "":
			in = false
		}
		if in {
			row = append(row, line)
		}
	}
	return strings.Join(row, "\n")
}

// `baton help COMMAND...` and `baton COMMAND --help` print the same; so do -h and -help (one
// dash, as the flag package read it).
func TestHelpSpellings(t *testing.T) {
	helpEnv(t)
	want := cli(t, "locks", "list", "--help")
	for _, args := range [][]string{{"help", "locks", "list"}, {"locks", "list", "-h"}, {"locks", "list", "-help"}, {"locks", "ls", "--help"}} {
		if r := cli(t, args...); r.code != 0 || r.stdout != want.stdout || r.stderr != "" {
			t.Errorf("baton %q: %s\nwant the help of baton locks list --help", args, r)
		}
	}
	// Without a command, a group prints its help on stderr with the usage exit code.
	if r := cli(t, "locks"); r.code != exitUsage || r.stdout != "" || r.stderr != cli(t, "locks", "--help").stdout {
		t.Errorf("baton locks: %s", r)
	}
}
