package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store/sqlite"
)

// syncLog is a log buffer safe for the server's goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Refused requests are counted by reason (a fixed set) and logged at most once a second per
// reason, with how many were not logged, the remote address and the path, and never any part of
// a token.
func TestAuthFailuresAreCountedAndLogged(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := server.ParseAuth(strings.NewReader("reader read " + server.HashToken(readToken) + "\nwriter write " + server.HashToken(writeToken) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := &syncLog{}
	srv, err := server.New(server.Config{Store: st, Auth: a, AllowedHosts: []string{"baton.internal"},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	f := &fixture{t: t, url: ts.URL}

	const n = 40
	const guessed = "Zq8xK3vW9tLm2Rp7Yc4N"
	start := time.Now()
	for range n {
		f.post("/v1/locks/acquire", "", `{"key":"k"}`)
		f.post("/v1/locks/acquire", guessed, `{"key":"k"}`)
		f.post("/v1/locks/acquire", readToken, `{"key":"k"}`)
		hostRequest(t, f, "GET", "/v1/locks", "evil.example", readToken, "", nil)
		hostRequest(t, f, "POST", "/v1/locks/acquire", "", writeToken, `{"key":"k"}`,
			map[string]string{"Sec-Fetch-Site": "cross-site"})
	}
	elapsed := time.Since(start)
	raw := f.do("GET", "/metrics", "", "", "").raw
	for _, reason := range []string{"missing", "unknown_token", "forbidden", "host", "cross_origin"} {
		if v, ok := metricValue(raw, `baton_http_auth_failures_total{reason="`+reason+`"}`); !ok || v != n {
			t.Errorf("baton_http_auth_failures_total{reason=%q} = %v (present %v), want %d", reason, v, ok, n)
		}
	}
	out := log.String()
	lines := regexp.MustCompile(`(?m)^.*msg="request refused".*$`).FindAllString(out, -1)
	perReason := map[string]int{}
	for _, l := range lines {
		m := regexp.MustCompile(`reason=(\S+)`).FindStringSubmatch(l)
		if m == nil || !strings.Contains(l, "remote=127.0.0.1:") || !strings.Contains(l, "path=/v1/locks") || !strings.Contains(l, "suppressed=") {
			t.Errorf("log line lacks reason, remote, path or suppressed: %s", l)
			continue
		}
		perReason[m[1]]++
	}
	limit := 1 + int(elapsed/time.Second)
	for _, reason := range []string{"missing", "unknown_token", "forbidden", "host", "cross_origin"} {
		if perReason[reason] < 1 || perReason[reason] > limit {
			t.Errorf("%d log lines for reason %s over %s; want 1 to %d", perReason[reason], reason, elapsed, limit)
		}
	}
	for i := 0; i+6 <= len(guessed); i++ {
		if strings.Contains(out, guessed[i:i+6]) {
			t.Fatalf("the log holds part (%q) of a guessed token:\n%s", guessed[i:i+6], out)
		}
	}
	for _, token := range []string{readToken, writeToken} {
		if strings.Contains(out, token) {
			t.Fatalf("the log holds the token %q:\n%s", token, out)
		}
	}
	if !strings.Contains(out, `name=reader`) {
		t.Errorf("a forbidden call's line does not name the token's owner (its name is no secret):\n%s", out)
	}
}
