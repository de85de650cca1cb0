package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testredis"
)

// A malformed duration in the environment is an error naming the variable, not a silent default.
func TestServeRejectsBadDurationEnv(t *testing.T) {
	t.Setenv("BATON_REAP_INTERVAL", "soon")
	var out, errOut bytes.Buffer
	code := run([]string{"serve", "--listen", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/b.db"}, nil, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "BATON_REAP_INTERVAL") {
		t.Fatalf("exit %d, stderr %q; want 2 naming BATON_REAP_INTERVAL", code, errOut.String())
	}
}

// On a Redis server without persistence, baton serve refuses to start (its fencing tokens would
// repeat after a restart), saying why and how to opt out; with baton_allow_volatile=true it
// starts and warns through its own logger, naming the server's settings.
func TestServeRedisWithoutPersistence(t *testing.T) {
	addr := testredis.Start(t)
	var out, errOut bytes.Buffer
	code := run([]string{"serve", "--listen", "127.0.0.1:0", "--store", "redis://" + addr}, nil, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "baton_allow_volatile=true") || !strings.Contains(errOut.String(), "appendonly=no") {
		t.Fatalf("exit %d, stderr %q; want 1, refusing with the settings and the opt-out", code, errOut.String())
	}
	logged := &startLog{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := serveFlags{listen: "127.0.0.1:0", store: "redis://" + addr + "?baton_allow_volatile=true", shutdownGrace: time.Second}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f, slog.New(slog.NewTextHandler(logged, nil))) }()
	select {
	case <-logged.started:
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve with baton_allow_volatile=true: %v", err)
		}
	case err := <-done:
		t.Fatalf("serve with baton_allow_volatile=true ended before serving: %v\n%s", err, logged.String())
	}
	for _, want := range []string{"level=WARN", "does not persist every write", "appendonly=no", "appendfsync=everysec"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("serve's log lacks %q:\n%s", want, logged.String())
		}
	}
}

// startLog collects a log and closes started once "baton serving" is logged.
type startLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{}
}

func (l *startLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if bytes.Contains(p, []byte("baton serving")) {
		close(l.started)
	}
	return len(p), nil
}

func (l *startLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
