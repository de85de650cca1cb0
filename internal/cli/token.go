package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/batonhq/baton/server"
)

const tokenUsage = `Usage: baton token new [--name N] [--role read|write|admin]

Bearer tokens for 'baton serve --auth-file'.

Commands:
  new   print a new random token and its auth-file line

Run 'baton token new --help' for its flags.
`

func tokenCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton token", tokenUsage, map[string]subcommand{
		"new": tokenNew,
	}, args, g, stdout, stderr)
}

// tokenBytes is the randomness of a new token: 256 bits, twice the 128 that docs/cli.md asks
// of any token.
const tokenBytes = 32

func tokenNew(args []string, _ *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton token new", `Usage: baton token new [--name N] [--role read|write|admin]

Print a new token (32 random bytes from the system's secure source, base64url) on the first
line and its auth-file line ("name role sha256-hex") on the second. Give the token to the
client (BATON_TOKEN) and append the line to the server's --auth-file; the server keeps only the
hash, so the token is shown this once. Nothing is written anywhere else. A token made by hand
must have at least 128 bits of randomness too.

Examples:
  baton token new --name ci --role write
  baton token new --name ops --role admin | tail -n 1 >> tokens.txt   # the first line is the token

Exit codes: 0 printed; 2 usage error.
`, stdout, stderr)
	name, role := "client", "read"
	c.fs.StringVar(&name, "name", name, "the token's `name` in the auth file (logs and the audit log show it)")
	c.fs.StringVar(&role, "role", role, "the token's `role`: read, write or admin")
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageError("unexpected argument %q", pos[0])
	}
	if role != "read" && role != "write" && role != "admin" {
		return c.usageError("--role must be read, write or admin (got %q)", role)
	}
	if name == "" || strings.HasPrefix(name, "#") || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return c.usageError("--name must be one word, without spaces or control characters, not starting with # (got %q)", name)
	}
	raw := make([]byte, tokenBytes)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (it crashes the program instead)
	token := base64.RawURLEncoding.EncodeToString(raw)
	fmt.Fprintf(stdout, "%s\n%s %s %s\n", token, name, role, server.HashToken(token))
	return exitOK
}
