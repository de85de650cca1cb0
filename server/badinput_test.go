package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/sqlite"
)

// syncBuffer is a log sink the server's handlers may write to concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func postgresDSN() string {
	if v := os.Getenv("BATON_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// openPostgres opens a store on a fresh schema of the test database, dropped when t ends; it
// skips t when PostgreSQL is unreachable, unless CI is set.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), server.HangGuard)
	defer cancel()
	conn, err := pgx.Connect(ctx, postgresDSN())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable under CI: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	_ = conn.Close(ctx)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "bs_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), server.HangGuard)
		defer cancel()
		conn, err := pgx.Connect(ctx, postgresDSN())
		if err != nil {
			t.Errorf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	st, err := postgres.Open(ctx, postgresDSN(), postgres.Config{Schema: schema, Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openSQLiteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// textFixture serves st without auth (every caller is admin), logging to log.
func textFixture(t *testing.T, st store.Store) (*fixture, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	srv, err := server.New(server.Config{Store: st, MaxWait: 5 * time.Second, Version: "test",
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &fixture{t: t, url: ts.URL}, log
}

// Bytes that are not Unicode text, in query parameters, paths and JSON bodies, on SQLite and
// PostgreSQL: a 400 naming the field, nothing written, nothing logged as an error. PostgreSQL
// used to refuse such a prefix or cursor itself (SQLSTATE 22021): a 503 and an ERROR log.
// encoding/json used to turn such body strings into U+FFFD: a different key than the one sent.
func TestNonTextInputIsRefusedNamingTheField(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{"sqlite": openSQLiteStore, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			nonTextInput(t, open(t))
		})
	}
}

func nonTextInput(t *testing.T, st store.Store) {
	f, log := textFixture(t, st)
	if r := f.do("PUT", "/v1/kinds/build", "", "application/json", `{}`); r.status != 200 {
		t.Fatalf("PUT /v1/kinds/build: %d %s", r.status, r.raw)
	}
	cases := []struct {
		name, method, path, body, field string
	}{
		// Query parameters.
		{"list prefix NUL", "GET", "/v1/locks?prefix=a%00", "", "prefix"},
		{"list prefix invalid UTF-8", "GET", "/v1/locks?prefix=a%FF", "", "prefix"},
		{"list cursor NUL", "GET", "/v1/locks?cursor=%00", "", "cursor"},
		{"list cursor invalid UTF-8", "GET", "/v1/locks?cursor=k%C3", "", "cursor"},
		{"list holder NUL", "GET", "/v1/locks?holder=h%00", "", "holder"},
		{"list holder invalid UTF-8", "GET", "/v1/locks?holder=%FF", "", "holder"},
		{"list prefix bad escape", "GET", "/v1/locks?prefix=%zz", "", "prefix"},
		{"list holder semicolon", "GET", "/v1/locks?holder=a;b", "", "holder"},
		{"events key NUL", "GET", "/v1/events?key=%00", "", "key"},
		{"events key invalid UTF-8", "GET", "/v1/events?key=%FF", "", "key"},
		{"jobs resource NUL", "GET", "/v1/jobs?resource=r%00", "", "resource"},
		{"jobs resource invalid UTF-8", "GET", "/v1/jobs?resource=r%FF", "", "resource"},
		{"jobs kind invalid UTF-8", "GET", "/v1/jobs?kind=%FF", "", "kind"},
		{"jobs state invalid UTF-8", "GET", "/v1/jobs?state=%FF", "", "state"},
		{"resources prefix NUL", "GET", "/v1/resources?prefix=%00", "", "prefix"},
		{"resources prefix invalid UTF-8", "GET", "/v1/resources?prefix=%FF", "", "prefix"},
		{"resources after invalid UTF-8", "GET", "/v1/resources?after=a%FF", "", "after"},
		// Paths.
		{"get key NUL", "GET", "/v1/locks/a%00b", "", "key"},
		{"get key invalid UTF-8", "GET", "/v1/locks/a%FFb", "", "key"},
		{"get resource invalid UTF-8", "GET", "/v1/resources/a%FF", "", "resource"},
		{"set state of resource NUL", "PUT", "/v1/resources/a%00/state", `{"state":"X"}`, "resource"},
		{"put kind invalid UTF-8", "PUT", "/v1/kinds/k%FF", `{}`, "kind"},
		// Raw bytes and surrogate escapes in JSON bodies.
		{"acquire key invalid UTF-8", "POST", "/v1/locks/acquire", "{\"key\":\"a\xffb\"}", "key"},
		{"acquire key surrogate", "POST", "/v1/locks/acquire", `{"key":"a\ud800b"}`, "key"},
		{"acquire key low surrogate", "POST", "/v1/locks/acquire", `{"key":"\udc00"}`, "key"},
		{"acquire key NUL", "POST", "/v1/locks/acquire", `{"key":"a\u0000b"}`, "key"},
		{"acquire holder invalid UTF-8", "POST", "/v1/locks/acquire", "{\"key\":\"k\",\"holder\":\"h\xfe\"}", "holder"},
		{"acquire holder surrogate", "POST", "/v1/locks/acquire", `{"key":"k","holder":"\ud83d"}`, "holder"},
		{"acquire lease ID invalid UTF-8", "POST", "/v1/locks/acquire", "{\"key\":\"k\",\"lease_id\":\"\xc3\"}", "lease_id"},
		{"acquire metadata invalid UTF-8", "POST", "/v1/locks/acquire", "{\"key\":\"k\",\"metadata\":{\"a\":\"\xff\"}}", "metadata"},
		{"acquire metadata surrogate", "POST", "/v1/locks/acquire", `{"key":"k","metadata":{"a":"\ud800"}}`, "metadata"},
		{"acquire metadata NUL", "POST", "/v1/locks/acquire", `{"key":"k","metadata":{"a":"\u0000"}}`, "metadata"},
		{"renew key invalid UTF-8", "POST", "/v1/locks/renew", "{\"key\":\"\xff\",\"lease_id\":\"x\"}", "key"},
		{"release lease ID surrogate", "POST", "/v1/locks/release", `{"key":"k","lease_id":"\udfff"}`, "lease_id"},
		{"force-release reason invalid UTF-8", "POST", "/v1/locks/force-release", "{\"key\":\"k\",\"reason\":\"\xff\"}", "reason"},
		{"force-release reason NUL", "POST", "/v1/locks/force-release", `{"key":"k","reason":"a\u0000b"}`, "reason"},
		{"force-release actor surrogate", "POST", "/v1/locks/force-release", `{"key":"k","reason":"r","actor":"\ud800"}`, "actor"},
		{"submit resource invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"build\",\"resource\":\"r\xff\"}", "resource"},
		{"submit resource surrogate", "POST", "/v1/jobs", `{"kind":"build","resource":"r\ud800"}`, "resource"},
		{"submit resource NUL", "POST", "/v1/jobs", `{"kind":"build","resource":"r\u0000"}`, "resource"},
		{"submit kind invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"b\xffuild\",\"resource\":\"r\"}", "kind"},
		{"submit args invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"build\",\"resource\":\"r\",\"args\":{\"x\":\"\xff\"}}", "args"},
		{"submit args surrogate", "POST", "/v1/jobs", `{"kind":"build","resource":"r","args":{"x":["\ud800"]}}`, "args"},
		{"submit args NUL", "POST", "/v1/jobs", `{"kind":"build","resource":"r","args":{"x":"\u0000"}}`, "args"},
		{"submit idempotency key surrogate", "POST", "/v1/jobs", `{"kind":"build","resource":"r","idempotency_key":"\ud800"}`, "idempotency_key"},
		{"claim worker invalid UTF-8", "POST", "/v1/jobs/claim", "{\"worker\":\"w\xff\",\"kinds\":[\"build\"]}", "worker"},
		{"claim kinds surrogate", "POST", "/v1/jobs/claim", `{"worker":"w","kinds":["\ud800"]}`, "kinds"},
		{"fail message invalid UTF-8", "POST", "/v1/jobs/1/fail", "{\"token\":1,\"message\":\"\xff\"}", "message"},
		{"purge resource invalid UTF-8", "POST", "/v1/dlq/purge", "{\"resource\":\"\xff\"}", "resource"},
		{"purge resource NUL", "POST", "/v1/dlq/purge", `{"resource":"\u0000"}`, "resource"},
		{"put kind state invalid UTF-8", "PUT", "/v1/kinds/deploy", "{\"from_states\":[\"\xff\"]}", "from_states"},
		{"register kinds surrogate", "POST", "/v1/kinds", `{"kinds":[{"name":"deploy","running_state":"\ud800"}]}`, "kinds"},
		{"set state invalid UTF-8", "PUT", "/v1/resources/r/state", "{\"state\":\"S\xff\"}", "state"},
		{"set state NUL", "PUT", "/v1/resources/r/state", `{"state":"S\u0000"}`, "state"},
	}
	for _, c := range cases {
		ctype := ""
		if c.body != "" {
			ctype = "application/json"
		}
		r := f.do(c.method, c.path, "", ctype, c.body)
		if r.status != 400 || r.body["code"] != "invalid_argument" || r.body["field"] != c.field {
			t.Errorf("%s: %d %s, want 400 invalid_argument naming %q", c.name, r.status, r.raw, c.field)
		}
	}
	// Nothing was written.
	for path, member := range map[string]string{"/v1/locks": "leases", "/v1/events": "events", "/v1/jobs": "jobs", "/v1/resources": "resources"} {
		r := f.do("GET", path, "", "", "")
		if items, ok := r.body[member].([]any); r.status != 200 || !ok || len(items) != 0 {
			t.Errorf("GET %s after refused requests: %d %s", path, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/v1/kinds", "", "", ""); r.status != 200 || strings.Contains(r.raw, "deploy") {
		t.Errorf("GET /v1/kinds after refused requests: %d %s", r.status, r.raw)
	}
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("bad input logged errors:\n%s", log)
	}

	// Escapes of valid text are fine, and arrive as sent.
	r := f.post("/v1/locks/acquire", "", `{"key":"caf\u00e9/\ud83d\ude00","holder":"h\u00e9","metadata":{"a":"\ud83d\ude00"}}`)
	sameMetadata := strings.Contains(r.raw, `"metadata":{"a":"\ud83d\ude00"}`) || strings.Contains(r.raw, `"metadata":{"a":"😀"}`) // jsonb normalises
	if r.status != 200 || !strings.Contains(r.raw, `"key":"café/😀"`) || !sameMetadata {
		t.Fatalf("acquire with escapes of valid text: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/v1/locks?prefix=caf%C3%A9/&holder=h%C3%A9", "", "", ""); r.status != 200 || !strings.Contains(r.raw, "café/😀") {
		t.Fatalf("list by a UTF-8 prefix: %d %s", r.status, r.raw)
	}
	// A failure message is what a handler said: NUL in it is cleaned, not refused (PostgreSQL
	// cannot store it).
	if r := f.post("/v1/jobs", "", `{"kind":"build","resource":"r"}`); r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.raw)
	}
	r = f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["build"]}`)
	jobs, _ := r.body["jobs"].([]any)
	if r.status != 200 || len(jobs) != 1 {
		t.Fatalf("claim: %d %s", r.status, r.raw)
	}
	j := jobs[0].(map[string]any)
	r = f.post("/v1/jobs/"+jsonNumber(j["id"])+"/fail", "", `{"token":`+jsonNumber(j["token"])+`,"message":"a\u0000b"}`)
	if r.status != 200 || !strings.Contains(r.raw, `"message":"a�b"`) {
		t.Fatalf("fail with NUL in the message: %d %s", r.status, r.raw)
	}
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("valid requests logged errors:\n%s", log)
	}
}

func jsonNumber(v any) string {
	f, _ := v.(float64)
	return strconv.FormatInt(int64(f), 10)
}
