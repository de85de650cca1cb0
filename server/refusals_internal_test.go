package server

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// One line per reason and second: the refusals in between are counted on the next line.
func TestRefusalLogIsRateLimited(t *testing.T) {
	var out bytes.Buffer
	f := newRefusals(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&out, nil)))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	r := httptest.NewRequest("POST", "/v1/locks/acquire", nil)
	for range 5 {
		f.refused(r, reasonUnknown, "")
	}
	f.refused(r, reasonMissing, "")
	now = now.Add(999 * time.Millisecond)
	f.refused(r, reasonUnknown, "")
	now = now.Add(time.Millisecond)
	f.refused(r, reasonUnknown, "")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"reason=unknown_token", "reason=missing", "reason=unknown_token"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d lacks %s: %s", i, w, lines[i])
		}
	}
	if !strings.Contains(lines[0], "suppressed=0") || !strings.Contains(lines[2], "suppressed=5") {
		t.Errorf("suppressed counts: %q, %q; want 0 then 5", lines[0], lines[2])
	}
}
