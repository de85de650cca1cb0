package cli

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// `baton token new` prints a token of 32 random bytes and its auth-file line on stdout, nothing
// on stderr; a server given the line accepts the token with its role, and two tokens differ.
func TestTokenNew(t *testing.T) {
	r := cli(t, "token", "new", "--name", "ci", "--role", "write")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("token new: %s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("token new printed %q; want the token and the auth-file line", r.stdout)
	}
	token, line := lines[0], lines[1]
	if raw, err := base64.RawURLEncoding.DecodeString(token); err != nil || len(raw) != 32 {
		t.Fatalf("token %q: %d bytes, %v; want 32 random bytes, base64url", token, len(raw), err)
	}
	if want := "ci write " + server.HashToken(token); line != want {
		t.Fatalf("auth-file line %q, want %q", line, want)
	}
	if again := cli(t, "token", "new", "--name", "ci", "--role", "write"); again.code != 0 || strings.HasPrefix(again.stdout, token) {
		t.Fatalf("a second token new: %s; want another token", again)
	}

	auth, err := server.ParseAuth(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, Auth: auth, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/info", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"principal":"ci"`) || !strings.Contains(string(body), `"role":"write"`) {
		t.Fatalf("the server given the line: %d %s", resp.StatusCode, body)
	}

	// Defaults, and refusals naming the flag and its rule.
	if r := cli(t, "token", "new"); r.code != 0 || !strings.Contains(r.stdout, "\nclient read ") {
		t.Errorf("token new without flags: %s; want name client, role read", r)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "root"}, "--role must be read, write or admin"},
		{[]string{"--name", "two words"}, "--name must be one word"},
		{[]string{"--name", "#x"}, "--name must be one word"},
		{[]string{"--name", ""}, "--name must be one word"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		if r := cli(t, append([]string{"token", "new"}, c.args...)...); r.code != exitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("token new %q: %s; want exit 2 with %q and nothing on stdout", c.args, r, c.want)
		}
	}
	if r := cli(t, "token", "nwe"); r.code != exitUsage || !strings.Contains(r.stderr, `did you mean "new"?`) {
		t.Errorf("token nwe: %s", r)
	}
	if r := cli(t, "help", "token", "new"); r.code != 0 || !strings.Contains(r.stdout, "128 bits") {
		t.Errorf("help token new: %s", r)
	}
}
