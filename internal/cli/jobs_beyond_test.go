package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/store"
)

// Jobs beyond one key through the CLI: kinds set --mode/--limit, jobs submit with --resource
// repeated, --shared/--mode and --limit, --file with those members, and the printouts.
func TestJobsBeyondOneKey(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	for _, l := range []string{"global", "zone/eu"} {
		if _, err := f.store.SetLimit(ctx, &store.SetLimitParams{Name: l, Capacity: 3}); err != nil {
			t.Fatal(err)
		}
	}

	r := f.cli(t, "kinds", "set", "drain", "--mode", "shared", "--limit", "zone/{args.zone}")
	if r.code != 0 || !strings.Contains(r.stdout, "MODE") || !strings.Contains(r.stdout, "LIMITS") ||
		!strings.Contains(r.stdout, "shared") || !strings.Contains(r.stdout, "zone/{args.zone}") {
		t.Fatalf("kinds set --mode --limit: %s", r)
	}
	if r := f.cli(t, "kinds", "set", "plain"); r.code != 0 || strings.Contains(r.stdout, "MODE") {
		t.Fatalf("kinds set of a plain kind shows the mode column: %s", r)
	}
	kinds, err := f.store.Kinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == "drain" })
	if i < 0 || kinds[i].Mode != store.ModeShared || !slices.Equal(kinds[i].Limits, []string{"zone/{args.zone}"}) {
		t.Fatalf("kinds after set: %+v", kinds)
	}

	j := f.submit(t, "--kind", "drain", "--resource", "node/1", "--resource", "rack/1", "--limit", "global",
		"--args", `{"zone":"eu"}`)
	if !j.Shared || !slices.Equal(j.Resources, []string{"rack/1"}) || !slices.Equal(j.Limits, []string{"global", "zone/eu"}) {
		t.Fatalf("submit -o json: %+v", j)
	}
	r = f.cli(t, "jobs", "show", strconv.FormatInt(j.ID, 10))
	for _, want := range []string{"Mode:", "shared", "Also holds:", "rack/1", "Limits:", "global, zone/eu"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("jobs show lacks %q: %s", want, r)
		}
	}
	// --mode exclusive overrides the kind's shared mode.
	if j := f.submit(t, "--kind", "drain", "--resource", "node/2", "--mode", "exclusive", "--args", `{"zone":"eu"}`); j.Shared {
		t.Fatalf("submit --mode exclusive of a shared kind: %+v", j)
	}
	if j := f.submit(t, "--kind", "plain", "--resource", "node/3", "--shared"); !j.Shared || j.Limits != nil {
		t.Fatalf("submit --shared: %+v", j)
	}

	// A file's jobs carry the same members.
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	lines := `{"kind":"plain","resource":"node/4","shared":true,"resources":["rack/2"],"limits":["global"]}` + "\n" +
		`{"kind":"plain","resource":"node/5","mode":"exclusive"}` + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.cli(t, "jobs", "submit", "--file", file); r.code != 0 {
		t.Fatalf("submit --file: %s", r)
	}
	jobs, err := f.store.ListJobs(ctx, &store.JobListParams{Resource: "node/4"})
	if err != nil || len(jobs) != 1 || !jobs[0].Shared || !slices.Equal(jobs[0].Resources, []string{"rack/2"}) ||
		!slices.Equal(jobs[0].Limits, []string{"global"}) {
		t.Fatalf("the file's job on node/4: %+v, %v", jobs, err)
	}
}

// Bad input beyond one key is refused naming the flag, and writes nothing.
func TestJobsBeyondOneKeyInvalid(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if err := f.store.RegisterKinds(ctx, []store.Kind{{Name: "deploy"}, {Name: "zoned", Limits: []string{"zone/{args.zone}"}}}); err != nil {
		t.Fatal(err)
	}
	ok := []string{"--kind", "deploy", "--resource", "svc/api"}
	with := func(extra ...string) []string { return append(append([]string{}, ok...), extra...) }
	var many []string
	for i := range store.MaxResources + 1 {
		many = append(many, "--resource", "r/"+strconv.Itoa(i))
	}
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(`{"kind":"deploy","resource":"a","shared":true,"mode":"exclusive"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{with("--shared", "--mode", "exclusive"), "--shared and --mode exclusive exclude each other"},
		{with("--mode", "both"), `invalid --mode: must be "exclusive" or "shared"`},
		{with("--resource", "svc/api"), "invalid --resource: must not name a key twice"},
		{with("--resource", "x", "--resource", "x"), "invalid --resource: must not name a key twice"},
		{append([]string{"--kind", "deploy", "--resource", "svc/api"}, many...), "invalid --resource: must name at most 16"},
		{with("--limit", "a\nb"), "invalid --limit"},
		{with("--limit", "nope"), "invalid --limit: names an unknown limit"},
		{[]string{"--kind", "zoned", "--resource", "svc/api"}, "invalid --args member zone: must be set"},
		{[]string{"--file", file}, "line 1: invalid mode"},
		{[]string{"--file", file, "--shared"}, "--file and --shared exclude each other"},
	}
	for _, c := range cases {
		r := f.cli(t, append([]string{"jobs", "submit"}, c.args...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, c.want) {
			t.Errorf("submit %q: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
	if jobs, err := f.store.ListJobs(ctx, &store.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Fatalf("bad submits wrote %d jobs (%v)", len(jobs), err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "both"}, "invalid --mode"},
		{[]string{"--limit", "zone/{zone}"}, "invalid --limit"},
		{[]string{"--limit", "a", "--limit", "b/{args.x-y}"}, "invalid --limit"},
	} {
		r := f.cli(t, append([]string{"kinds", "set", "deploy"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("kinds set %q: %s\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
}
