package cli

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// A PostgreSQL password in the store URL (userinfo, password and sslpassword parameters) is
// shown nowhere by the binary: not in GET /v1/info (whose store field the dashboard's header
// shows) nor /metrics, not in the start-up log, and not in the error of a serve whose store
// cannot be reached.
func TestServeHidesStorePasswords(t *testing.T) {
	_, schema := batontest.PostgresSchema(t)
	bin := batontest.Build(t, "")
	base, err := url.Parse(batontest.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"userinfo-s3cret", "query-s3cret", "sslkey-s3cret"}
	storeURL := func(host string) string {
		u := *base
		u.User = url.UserPassword(base.User.Username(), "userinfo-s3cret")
		if host != "" {
			u.Host = host
		}
		q := u.Query()
		q.Set("password", "query-s3cret")
		q.Set("sslpassword", "sslkey-s3cret")
		q.Set("baton_schema", schema)
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
		return u.String()
	}
	shows := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the password %q:\n%s", what, s, text)
			}
		}
	}

	// The test server trusts local connections: the passwords do not stop it.
	s := batontest.Serve(t, bin, nil, "--store", storeURL(""))
	var info struct {
		Store string `json:"store"`
	}
	body := s.Get(t, "/v1/info")
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	shows("GET /v1/info", body)
	if !strings.HasPrefix(info.Store, "postgres:postgres://"+base.User.Username()+":xxxxx@") {
		t.Errorf("GET /v1/info store = %q, want the URL with the user name and the password masked", info.Store)
	}
	shows("GET /metrics", s.Get(t, "/metrics"))
	log := s.Log()
	if !strings.Contains(log, "baton serving") {
		t.Fatalf("no start-up line in the log:\n%s", log)
	}
	shows("the start-up log", log)

	out, err := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--store", storeURL("127.0.0.1:1")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connect") {
		t.Fatalf("serve on an unreachable store: %v\n%s", err, out)
	}
	shows("the error of serve on an unreachable store", string(out))
}
