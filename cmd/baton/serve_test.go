package main

import (
	"bytes"
	"strings"
	"testing"
)

// A malformed duration in the environment is an error naming the variable, not a silent default.
func TestServeRejectsBadDurationEnv(t *testing.T) {
	t.Setenv("BATON_REAP_INTERVAL", "soon")
	var out, errOut bytes.Buffer
	code := serveCommand([]string{"--listen", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/b.db"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "BATON_REAP_INTERVAL") {
		t.Fatalf("exit %d, stderr %q; want 2 naming BATON_REAP_INTERVAL", code, errOut.String())
	}
}
