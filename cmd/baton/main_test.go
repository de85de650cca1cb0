package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, "baton "},
		{[]string{"help"}, 0, "Usage:"},
		{nil, 2, "Usage:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.out) {
			t.Errorf("baton %v = %d, %q %q; want %d and %q", c.args, code, out.String(), errOut.String(), c.code, c.out)
		}
	}
}
