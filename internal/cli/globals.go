package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// defaultServer is the server address when neither --server nor BATON_SERVER is given.
const defaultServer = "http://127.0.0.1:7725"

// requestTimeout bounds one command's calls to the server (plus the wait, for waiting calls).
const requestTimeout = 30 * time.Second

// globals are the values of the flags every client command takes.
type globals struct {
	server string
	token  string
	output string
}

func defaultGlobals() *globals {
	g := &globals{server: os.Getenv("BATON_SERVER"), token: os.Getenv("BATON_TOKEN"), output: "table"}
	if g.server == "" {
		g.server = defaultServer
	}
	return g
}

// addGlobalFlags gives cmd the client commands' flags; withOutput adds -o. The root command has
// them too, for `baton --server URL locks list`: cobra parses the flags before the command word
// with the flags of the command that runs.
func (a *app) addGlobalFlags(cmd *cobra.Command, withOutput bool) {
	fs := cmd.Flags()
	fs.StringVar(&a.g.server, "server", a.g.server, "server `URL` (env BATON_SERVER)")
	fs.Var(secret{&a.g.token}, "token", "bearer `token` (env BATON_TOKEN; prefer the variable: flags show in ps)")
	if withOutput {
		fs.StringVarP(&a.g.output, "output", "o", a.g.output, "output `format`: table or json")
		enumFlag(cmd, "output", "table", "json")
	}
}

// secret is a string flag whose value --help never prints (it may come from BATON_TOKEN).
type secret struct{ p *string }

func (s secret) String() string { return "" }
func (s secret) Type() string   { return "string" }

func (s secret) Set(v string) error {
	*s.p = v
	return nil
}

// checkOutput refuses an -o other than table or json.
func (g *globals) checkOutput() error {
	if g.output != "table" && g.output != "json" {
		return usagef("-o must be table or json (got %q)", g.output)
	}
	return nil
}

// store returns a client store for the server, or an error that names the flag at fault.
func (g *globals) store() (*client.Store, error) {
	st, err := client.NewStore(client.Config{BaseURL: g.server, Token: g.token})
	var inv *store.InvalidArgumentError
	if errors.As(err, &inv) {
		switch inv.Field {
		case "base_url":
			return nil, fmt.Errorf("--server (or BATON_SERVER) %s", inv.Rule)
		case "token":
			return nil, fmt.Errorf("--token (or BATON_TOKEN) %s", inv.Rule)
		}
	}
	return st, err
}

// openStore opens the server's client store for a command, with a context for its calls
// (callContext(extra)); done closes both. A store that cannot be opened (a bad --server or
// --token) is a usage error.
func (a *app) openStore(extra time.Duration) (st *client.Store, ctx context.Context, done func(), err error) {
	st, err = a.g.store()
	if err != nil {
		return nil, nil, nil, usagef("%v", err)
	}
	ctx, cancel := callContext(extra)
	return st, ctx, func() { cancel(); st.Close() }, nil
}

// call checks p, then runs fn with the server's store for the time of one request: the body of
// a command that makes one call.
func (a *app) call(p interface{ Validate() error }, fn func(ctx context.Context, st *client.Store) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return a.withStore(fn)
}

// withStore opens the store, runs fn within one call's time, and closes the store.
func (a *app) withStore(fn func(ctx context.Context, st *client.Store) error) error {
	st, ctx, done, err := a.openStore(0)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, st)
}

// checkLimit is the rule of every --limit: 0 (the default page) or 1 to store.MaxListLimit.
func checkLimit(limit int) error {
	if limit < 0 || limit > store.MaxListLimit {
		return usagef("--limit must be between 1 and %d", store.MaxListLimit)
	}
	return nil
}

// required is the usage error of a required flag left out (or empty).
func required(flag, value string) error {
	if value == "" {
		return usagef("--%s is required", flag)
	}
	return nil
}

func callContext(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), requestTimeout+extra)
}
