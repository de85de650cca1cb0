package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/server"
)

func (a *app) tokenCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use:   "token COMMAND [flags]",
		Short: "bearer tokens for 'baton serve --auth-file'",
		Long:  "Bearer tokens for 'baton serve --auth-file'.",
	}, a.tokenNewCommand())
}

// tokenBytes is the randomness of a new token: 256 bits, twice the 128 that docs/cli.md asks
// of any token.
const tokenBytes = 32

func (a *app) tokenNewCommand() *cobra.Command {
	name, role := "client", "read"
	cmd := a.command(&cobra.Command{
		Use:   "new [--name N] [--role read|write|admin]",
		Short: "print a new random token and its auth-file line",
		Long: `Print a new token (32 random bytes from the system's secure source, base64url) on the first
line and its auth-file line ("name role sha256-hex") on the second. Give the token to the
client (BATON_TOKEN) and append the line to the server's --auth-file; the server keeps only the
hash, so the token is shown this once. Nothing is written anywhere else. A token made by hand
must have at least 128 bits of randomness too.

Examples:
  baton token new --name ci --role write
  baton token new --name ops --role admin | tail -n 1 >> tokens.txt   # the first line is the token`,
		Args: noArgs,
	}, meta{exits: []int{exitOK, exitUsage}})
	cmd.Flags().StringVar(&name, "name", name, "the token's `name` in the auth file (logs and the audit log show it)")
	cmd.Flags().StringVar(&role, "role", role, "the token's `role`: read, write or admin")
	enumFlag(cmd, "role", "read", "write", "admin")
	cmd.RunE = func(*cobra.Command, []string) error {
		if role != "read" && role != "write" && role != "admin" {
			return usagef("--role must be read, write or admin (got %q)", role)
		}
		if name == "" || strings.HasPrefix(name, "#") || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return usagef("--name must be one word, without spaces or control characters, not starting with # (got %q)", name)
		}
		raw := make([]byte, tokenBytes)
		_, _ = rand.Read(raw) // crypto/rand.Read never fails (it crashes the program instead)
		token := base64.RawURLEncoding.EncodeToString(raw)
		_, err := fmt.Fprintf(a.stdout, "%s\n%s %s %s\n", token, name, role, server.HashToken(token))
		return err
	}
	return cmd
}
