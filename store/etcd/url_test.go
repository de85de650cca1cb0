package etcd

import (
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	cfg, name, err := parseURL("u:p%40ss@127.0.0.1:2379,127.0.0.2:2379/?baton_prefix=app/&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if name != "etcd:127.0.0.1:2379,127.0.0.2:2379" || cfg.Username != "u" || cfg.Password != "p@ss" ||
		cfg.Prefix != "app/" || cfg.DialTimeout != 2*time.Second || len(cfg.Endpoints) != 2 || cfg.Endpoints[0] != "http://127.0.0.1:2379" {
		t.Fatalf("parseURL = %+v, %q", cfg, name)
	}
	for bad, want := range map[string]string{
		"":                              "bad host",
		"127.0.0.1":                     "bad host",
		"127.0.0.1:2379?x=1":            "unknown parameter \"x\"",
		"127.0.0.1:2379?dial_timeout=0": "dial_timeout",
	} {
		if _, _, err := parseURL(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseURL(%q) = %v, want an error containing %q", bad, err, want)
		}
	}
	if got := redactUser("u:secret@h:1?baton_prefix=x"); strings.Contains(got, "secret") {
		t.Errorf("redactUser kept the password: %q", got)
	}
}
