package storeurl

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
	"github.com/batonhq/baton/store"
)

// secretsIn fails the test if text shows any of the secrets.
func secretsIn(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q: %s", what, s, text)
		}
	}
}

// A PostgreSQL store URL with a password in the userinfo and in the password and sslpassword
// parameters: the name Open returns (GET /v1/info, the start-up log) hides every one, and so
// does every error of an open that fails (unreachable server, unknown role, an unparsable URL,
// a bad parameter of Baton's).
func TestOpenPostgresHidesPasswords(t *testing.T) {
	_, schema := batontest.PostgresSchema(t)
	ctx := context.Background()
	base, err := url.Parse(batontest.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	withSecrets := func(user, host string, extra url.Values) string {
		u := *base
		u.User = url.UserPassword(user, "userinfo-s3cret")
		if host != "" {
			u.Host = host
		}
		q := u.Query()
		q.Set("password", "query-s3cret")
		q.Set("sslpassword", "sslkey-s3cret")
		for k, v := range extra {
			q[k] = v
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	secrets := []string{"userinfo-s3cret", "query-s3cret", "sslkey-s3cret"}

	// The test server trusts local connections, so the passwords do not stop the open.
	st, name, err := OpenLogged(ctx, withSecrets(base.User.Username(), "", url.Values{"baton_schema": {schema}}), slog.Default())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	st.Close()
	secretsIn(t, "the store's name", name, secrets...)
	if !strings.HasPrefix(name, "postgres:postgres://"+base.User.Username()+":xxxxx@") || !strings.Contains(name, "password=xxxxx") {
		t.Errorf("name %q: want the URL with the user and the passwords masked", name)
	}

	for _, raw := range []string{
		withSecrets("postgres", "127.0.0.1:1", url.Values{"connect_timeout": {"2"}}),
		withSecrets("no_such_role_"+schema, "", url.Values{"baton_schema": {schema}}),
		withSecrets("postgres", "", url.Values{"baton_max_conns": {"0"}}),
		withSecrets("postgres", "", url.Values{"sslmode": {"bogus"}}),
		"postgres://postgres:userinfo?s3cret@127.0.0.1:1/db",
		"postgres://postgres:userinfo-s3cret@127.0.0.1:1,127.0.0.1:2/db?password=query-s3cret",
	} {
		st, _, err := Open(ctx, raw)
		if err == nil {
			st.Close()
			t.Errorf("Open(%.40q…) succeeded", raw)
			continue
		}
		secretsIn(t, "the error", err.Error(), append(secrets, "userinfo?s3cret", "s3cret@")...)
	}
}

// A scheme registered by another module (etcd, DynamoDB, Kubernetes in baton-full) gets the
// same protection: a name or an error that echoes the URL is masked before anyone sees it.
func TestOpenRegisteredSchemeHidesSecrets(t *testing.T) {
	Register("echo-test", func(ctx context.Context, rest string, _ *slog.Logger) (store.Store, string, error) {
		if strings.Contains(rest, "fail") {
			return nil, "", &url.Error{Op: "open", URL: "echo-test://" + rest, Err: context.DeadlineExceeded}
		}
		st, _, err := Open(ctx, "sqlite://:memory:")
		return st, "echo-test:" + rest, err
	})
	st, name, err := Open(context.Background(), "echo-test://u:s3cret@h1?token=t0ken")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	secretsIn(t, "the name", name, "s3cret", "t0ken")
	if name != "echo-test:u:xxxxx@h1?token=xxxxx" {
		t.Errorf("name %q, want the opener's name with its secrets masked", name)
	}
	_, _, err = Open(context.Background(), "echo-test://u:s3cret@fail?token=t0ken")
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Open of a failing registered scheme: %v", err)
	}
	secretsIn(t, "the error", err.Error(), "s3cret", "t0ken")
}
