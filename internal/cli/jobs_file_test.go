package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// cliStdin is cli with stdin.
func (f *fixture) cliStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	t.Setenv("BATON_SERVER", f.url)
	t.Setenv("BATON_TOKEN", "")
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (f *fixture) countJobs(t *testing.T) int {
	t.Helper()
	js, err := f.store.ListJobs(context.Background(), &store.JobListParams{Limit: store.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

func TestJobsSubmitFile(t *testing.T) {
	f := newJobsFixture(t)
	if err := f.store.RegisterKinds(context.Background(), []store.Kind{{Name: "deploy"}, {Name: "gate", Policy: store.PolicyReject}}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, `{"kind":"deploy","resource":"svc/a","args":{"v":1}}

{"kind":"deploy","resource":"svc/a","args":{"v":2},"idempotency_key":"a-v2"}
{"kind":"deploy","resource":"svc/b","delay_ms":60000,"priority":3}
`)
	type batch = wire.SubmitBatchResponse
	out := decodeJSON[batch](t, f.cli(t, "jobs", "submit", "--file", path, "-o", "json"))
	if len(out.Results) != 3 {
		t.Fatalf("results: %+v; want 3, one per line", out.Results)
	}
	a1, a2, b := out.Results[0].Job, out.Results[1].Job, out.Results[2].Job
	if !a1.Head || a2.Head || a2.Seq <= a1.Seq || a2.IdempotencyKey != "a-v2" || !b.Head ||
		b.State != store.JobScheduled || b.Priority != 3 || out.Results[1].Existing {
		t.Fatalf("jobs from the file: %+v; want svc/a's two in file order (the first its head), svc/b scheduled", out.Results)
	}

	// Again, from stdin, as a table: the keyed line names its job and is not submitted again.
	r := f.cliStdin(t, `{"kind":"deploy","resource":"svc/a","idempotency_key":"a-v2"}`+"\n"+`{"kind":"deploy","resource":"svc/c"}`,
		"jobs", "submit", "--file", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "svc/c") || !strings.Contains(r.stdout, "1 of 2 lines named jobs submitted before") {
		t.Fatalf("submit --file - : %s", r)
	}
	if n := f.countJobs(t); n != 4 {
		t.Fatalf("%d jobs; want 4 (the repeated key added none)", n)
	}

	// A bad line, or a refused job, fails the whole batch, naming the line.
	for _, c := range []struct {
		name, file string
		code       int
		stderr     string
	}{
		{"a bad resource", `{"kind":"deploy","resource":"svc/d"}` + "\n\n" + `{"kind":"deploy","resource":""}`, exitUsage, "line 3: invalid resource: must not be empty"},
		{"not JSON", `{"kind":"deploy","resource":"svc/d"}` + "\n" + `{"kind":`, exitUsage, "line 2: not a job object"},
		{"an unknown member", `{"kind":"deploy","resource":"svc/d","resourc":"x"}`, exitUsage, `line 1: not a job object: json: unknown field "resourc"`},
		{"an unregistered kind", `{"kind":"deploy","resource":"svc/d"}` + "\n" + `{"kind":"nope","resource":"svc/d"}`, exitUsage, "line 2: invalid kind: must name a registered kind (\"nope\" is not"},
		{"a negative delay", `{"kind":"deploy","resource":"svc/d","delay_ms":-1}`, exitUsage, "line 1: invalid delay_ms"},
		{"no jobs", "\n\n", exitUsage, "no jobs"},
		{"a refusal", `{"kind":"deploy","resource":"svc/d"}` + "\n" + `{"kind":"gate","resource":"svc/a"}`, exitBusy,
			`line 2: resource "svc/a" is busy: job ` + strconv.FormatInt(a1.ID, 10) + " is available"},
	} {
		r := f.cli(t, "jobs", "submit", "--file", writeFile(t, c.file))
		if r.code != c.code || !strings.Contains(r.stderr, c.stderr) || !strings.Contains(r.stderr, "nothing written") && c.code != exitUsage {
			t.Errorf("submit --file with %s: %s; want exit %d and %q", c.name, r, c.code, c.stderr)
		}
	}
	if n := f.countJobs(t); n != 4 {
		t.Fatalf("%d jobs after refused batches; want still 4", n)
	}
	if _, err := f.store.GetResource(context.Background(), "svc/d"); err == nil {
		t.Fatal("resource svc/d exists after refused batches")
	}

	for _, args := range [][]string{
		{"jobs", "submit", "--file", path, "--kind", "deploy"},
		{"jobs", "submit", "--file", path, "--in", "1m"},
	} {
		if r := f.cli(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "exclude each other") {
			t.Errorf("%v: %s; want a usage error", args, r)
		}
	}
	if r := f.cli(t, "jobs", "submit", "--file", filepath.Join(t.TempDir(), "missing.jsonl")); r.code != exitUsage {
		t.Errorf("submit --file of a missing file: %s; want exit 2", r)
	}
}
