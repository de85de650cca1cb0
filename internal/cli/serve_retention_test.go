package cli

import (
	"bytes"
	"strings"
	"testing"
)

// --dead-letter-retention and BATON_DEAD_LETTER_RETENTION: a negative or malformed value is a
// usage error (exit 2) naming the flag or the variable, before anything starts.
func TestServeDeadLetterRetentionRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		env, flag, want string
	}{
		{flag: "-1h", want: "--dead-letter-retention (or BATON_DEAD_LETTER_RETENTION) must not be negative (got -1h0m0s)"},
		{env: "-5m", want: "--dead-letter-retention (or BATON_DEAD_LETTER_RETENTION) must not be negative (got -5m0s)"},
		{env: "a week", want: "BATON_DEAD_LETTER_RETENTION"},
	} {
		if c.env != "" { // the cases without a variable come first
			t.Setenv("BATON_DEAD_LETTER_RETENTION", c.env)
		}
		args := []string{"--listen", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/b.db"}
		if c.flag != "" {
			args = append(args, "--dead-letter-retention", c.flag)
		}
		var out, errOut bytes.Buffer
		if code := run(append([]string{"serve"}, args...), nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("env %q flag %q: exit %d, stderr %q; want 2 and %q", c.env, c.flag, code, errOut.String(), c.want)
		}
	}
}
