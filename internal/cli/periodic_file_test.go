package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPeriodicFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"periodic": [
		{"name": "a", "schedule": "@every 30s", "kind": "k", "resource": "r/1", "args": {"x": 1}, "policy": "skip", "priority": 2},
		{"name": "b", "schedule": "CRON_TZ=Europe/Paris 0 3 * * *", "kind": "k", "resource": "r/2"}]}`)
	jobs, err := readPeriodicFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Name != "a" || jobs[0].Policy != "skip" || jobs[0].Priority != 2 || string(jobs[0].Args) != `{"x": 1}` ||
		jobs[1].Schedule != "CRON_TZ=Europe/Paris 0 3 * * *" {
		t.Fatalf("readPeriodicFile = %+v", jobs)
	}
	for body, want := range map[string]string{
		`{"periodic": [{"name": "a", "schedule": "@every 0.5s", "kind": "k", "resource": "r"}]}`:                                                                     "periodic[0].schedule",
		`{"periodic": [{"name": "a", "schedule": "@every 1s", "kind": "k", "resource": "r"}, {"name": "a", "schedule": "@every 1s", "kind": "k", "resource": "r"}]}`: "periodic[1].name",
		`{"periodic": [{"name": "a", "schedule": "@every 1s", "kind": "", "resource": "r"}]}`:                                                                        "periodic[0].kind",
		`{"periodic": [{"name": "a", "schedule": "@every 1s", "kind": "k", "resource": "r", "policy": "x"}]}`:                                                        "periodic[0].policy",
		`{"periodic": [{"name": "a", "schedule": "@every 1s", "kind": "k", "resource": "r", "args": [1]}]}`:                                                          "periodic[0].args",
		`{"periodic": [{"name": "a", "schedule": "@every 1s", "kind": "k", "resource": "r", "next_run": "2026-01-01T00:00:00Z"}]}`:                                   "periodic[0].next_run",
		`{"periodic": []} {"periodic": []}`: "more than one JSON document",
		`[{"name": "a"}]`:                   "not a periodic job file",
		`{"jobs": []}`:                      `unknown field "jobs"`,
	} {
		_, err := readPeriodicFile(write("bad.json", body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readPeriodicFile(%s) = %v; want an error naming %s", body, err, want)
		}
	}
	if _, err := readPeriodicFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}
