package dynamodb

import (
	"context"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	cfg, name, err := parseURL("locks?region=eu-west-1&endpoint=http://127.0.0.1:4567&create_table=true&max_attempts=5")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table != "locks" || cfg.Region != "eu-west-1" || cfg.Endpoint != "http://127.0.0.1:4567" || !cfg.CreateTable || cfg.MaxAttempts != 5 {
		t.Fatalf("cfg = %+v", cfg)
	}
	if name != "dynamodb:locks@eu-west-1" {
		t.Fatalf("name = %q", name)
	}
	for rest, want := range map[string]string{
		"":                          "table",
		"ab":                        "table",
		"bad/table":                 "table",
		"locks?endpoint=127.0.0.1":  "endpoint",
		"locks?create_table=maybe":  "create_table",
		"locks?max_attempts=0":      "max_attempts",
		"locks?secret_key=x":        "unknown parameter",
		"locks?region=a&bogus=true": "unknown parameter",
	} {
		_, _, err := OpenURL(context.Background(), rest, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenURL(%q) = %v, want an error naming %s", rest, err, want)
		}
	}
}
