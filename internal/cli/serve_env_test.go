package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveCmd is the serve command of a fresh command tree.
func serveCmd(t *testing.T) *cobra.Command {
	t.Helper()
	cmd, _, err := newApp(nil, io.Discard, io.Discard).rootCommand().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// Every serve flag reads its BATON_ variable (BATON_MAX_WAIT and BATON_SHUTDOWN_GRACE were
// once ignored), its help names it, and the command line wins over it. The test walks the flag
// set itself, so a flag added later without a working variable fails here.
func TestServeEveryFlagHasAWorkingEnvVar(t *testing.T) {
	var names []string
	serveCmd(t).Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			names = append(names, f.Name)
		}
	})
	if len(names) < 14 {
		t.Fatalf("serve has %d flags: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			fresh := serveCmd(t)
			fl := fresh.Flags().Lookup(name)
			env := serveEnvName(name)
			if !strings.Contains(fl.Usage, "(env "+env+")") {
				t.Errorf("--%s's help does not name %s: %q", name, env, fl.Usage)
			}
			val, other := valuesFor(t, fl)
			t.Setenv(env, val)
			if err := fresh.ParseFlags(nil); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if err := serveFromEnv(fresh.Flags()); err != nil {
				t.Fatalf("%s=%s: %v", env, val, err)
			}
			if got := fl.Value.String(); got != val {
				t.Errorf("%s=%s: --%s is %q", env, val, name, got)
			}
			// The command line wins.
			fresh = serveCmd(t)
			fl = fresh.Flags().Lookup(name)
			if err := fresh.ParseFlags([]string{"--" + name + "=" + other}); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if err := serveFromEnv(fresh.Flags()); err != nil {
				t.Fatal(err)
			}
			if got := fl.Value.String(); got != other {
				t.Errorf("%s=%s and --%s=%s: got %q, want the flag's", env, val, name, other, got)
			}
		})
	}
}

// valuesFor gives two valid values of the flag's type, both unlike its default.
func valuesFor(t *testing.T, fl *pflag.Flag) (string, string) {
	switch fl.Value.Type() {
	case "bool":
		if fl.DefValue == "true" {
			return "false", "false"
		}
		return "true", "true"
	case "int":
		return "7", "9"
	case "duration":
		return "7s", "9s"
	case "string", "strings":
		return "env-" + fl.Name, "flag-" + fl.Name
	default:
		t.Fatalf("--%s: no test value for %s", fl.Name, fl.Value.Type())
		return "", ""
	}
}

// A variable whose value its flag refuses is a usage error naming the variable and the rule.
func TestServeRejectsBadEnvValues(t *testing.T) {
	for env, rule := range map[string]string{
		"BATON_MAX_WAIT":         "must be a duration",
		"BATON_SHUTDOWN_GRACE":   "must be a duration",
		"BATON_MAX_QUEUE":        "must be an integer",
		"BATON_INSECURE_NO_AUTH": "must be true or false",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "soon")
			r := cli(t, "serve", "--listen", "127.0.0.1:0", "--store", "sqlite://"+t.TempDir()+"/b.db")
			if r.code != 2 || !strings.Contains(r.stderr, env+`="soon": `+rule) {
				t.Fatalf("%s=soon: %v; want exit 2 naming the variable and %q", env, r, rule)
			}
		})
	}
}

// serve reports an unknown flag or an extra argument as every other command does: one line
// naming it and a pointer to --help, not the whole flag list.
func TestServeUsageErrorsLikeOtherCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bogus"}, "baton serve: unknown flag: --bogus\nRun 'baton serve --help' for usage.\n"},
		{[]string{"serve", "extra"}, "baton serve: unexpected argument \"extra\"\nRun 'baton serve --help' for usage.\n"},
	} {
		r := cli(t, c.args...)
		if r.code != 2 || r.stderr != c.want || r.stdout != "" {
			t.Errorf("%v: %v\nwant exit 2 and stderr %q", c.args, r, c.want)
		}
		other := cli(t, "locks", "list", "--bogus")
		if !strings.HasSuffix(other.stderr, "Run 'baton locks list --help' for usage.\n") {
			t.Errorf("locks list --bogus no longer ends like this test expects serve to: %q", other.stderr)
		}
	}
	r := cli(t, "serve", "--help")
	for _, want := range []string{"Usage: baton serve", "redis://", "etcd://", "baton-full", "--shutdown-grace", "BATON_SHUTDOWN_GRACE"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("serve --help: exit %d, lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
}

// A value the server refuses is a usage error naming the flag (exit 2), not the server's field.
func TestServeRefusedSettingNamesTheFlag(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"--max-wait", "-5s"}},
		{[]string{"--max-inflight", "-1"}},
		{[]string{"--allowed-host", "baton.internal:7725"}},
	} {
		r := cli(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/b.db"}, c.args...)...)
		want := "baton serve: " + c.args[0] + " " + c.args[1] + ": must be "
		if r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "max_") {
			t.Errorf("%v: %v\nwant exit 2 and %q", c.args, r, want)
		}
	}
}
