package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// newJobsFixture is a real server over SQLite with the job queue: the store is served as it is
// (newFixture's wrapper, which signals lock refusals, has no job methods).
func newJobsFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &fixture{ts: ts, url: ts.URL, store: st}
}

func decodeJSON[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not a %T: %v\n%s", v, err, r)
	}
	return v
}

// submitted is the -o json output of 'jobs submit'.
type submitted struct {
	Job      wire.Job `json:"job"`
	Existing bool     `json:"existing"`
}

func (f *fixture) submit(t *testing.T, args ...string) wire.Job {
	t.Helper()
	return decodeJSON[submitted](t, f.cli(t, append(append([]string{"jobs", "submit"}, args...), "-o", "json")...)).Job
}

func (f *fixture) job(t *testing.T, id int64) *store.Job {
	t.Helper()
	j, err := f.store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("job %d: %v", id, err)
	}
	return j
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestJobsUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"jobs"}, 2, "Usage: baton jobs COMMAND"},
		{[]string{"jobs", "--help"}, 0, "submit"},
		{[]string{"jobs", "frob"}, 2, `unknown command "frob"`},
		{[]string{"help", "jobs", "submit"}, 0, "--idempotency-key"},
		{[]string{"jobs", "list", "--help"}, 0, "--after"},
		{[]string{"jobs", "show", "--help"}, 0, "error"},
		{[]string{"jobs", "cancel", "--help"}, 0, "a cancel is requested"},
		{[]string{"jobs", "retry", "--help"}, 0, "discarded"},
		{[]string{"dlq"}, 2, "Usage: baton dlq COMMAND"},
		{[]string{"dlq", "purge", "--help"}, 0, "--yes"},
		{[]string{"resources", "--help"}, 0, "set-state"},
		{[]string{"resources", "set-state", "--help"}, 0, "--if-version"},
		{[]string{"kinds", "set", "--help"}, 0, "--from-states"},
		{[]string{"worker", "--help"}, 0, "BATON_FENCING_TOKEN"},
		{[]string{"help", "worker"}, 0, "EX_DATAERR"},
		{[]string{"--help"}, 0, "worker      run CMD once per job of KIND"},

		{[]string{"jobs", "show"}, 2, "missing job ID"},
		{[]string{"jobs", "show", "x"}, 2, `job ID must be a positive integer (got "x")`},
		{[]string{"jobs", "cancel", "0"}, 2, "job ID must be a positive integer"},
		{[]string{"jobs", "retry", "1", "2"}, 2, `unexpected argument "2"`},
		{[]string{"jobs", "list", "--limit", "1001"}, 2, "--limit must be between 1 and 1000"},
		{[]string{"jobs", "list", "--state", "done"}, 2, "invalid --state: must be one of"},
		{[]string{"jobs", "list", "-o", "yaml"}, 2, "-o must be table or json"},
		{[]string{"dlq", "list", "--state", "running"}, 2, "unknown flag: --state"},
		{[]string{"dlq", "retry"}, 2, "missing job ID"},
		{[]string{"dlq", "purge"}, 2, "refusing to purge every dead letter without --yes"},
		{[]string{"dlq", "purge", "--kind", "k"}, 2, "refusing to purge every dead letter that matches the filters without --yes"},
		{[]string{"dlq", "purge", "x"}, 2, "job ID must be a positive integer"},
		{[]string{"resources", "show"}, 2, "missing KEY"},
		{[]string{"resources", "show", "a\nb"}, 2, "invalid KEY"},
		{[]string{"resources", "set-state", "k"}, 2, "missing KEY and STATE"},
		{[]string{"resources", "set-state", "k", ""}, 2, "invalid STATE: must not be empty"},
		{[]string{"resources", "set-state", "k", "s", "--if-version", "-1"}, 2, "--if-version must not be negative"},
		{[]string{"kinds", "set"}, 2, "missing NAME"},
		{[]string{"kinds", "set", "no spaces"}, 2, "invalid NAME: must contain only"},

		{[]string{"worker", "--kind", "k"}, 2, "missing CMD"},
		{[]string{"worker", "--", "true"}, 2, "--kind is required"},
		{[]string{"worker", "--kind", "k", "--concurrency", "0", "--", "true"}, 2, "--concurrency must be between 1 and 1000"},
		{[]string{"worker", "--kind", "k", "--grace", "-1s", "--", "true"}, 2, "--grace must not be negative"},
		{[]string{"worker", "--kind", "k", "--lease-ttl", "3s", "--grace", "2s", "--", "true"}, 2, "--grace 2s is longer than a third of --lease-ttl (1s)"},
		{[]string{"worker", "--kind", "k", "--shutdown-timeout", "-1s", "--", "true"}, 2, "--shutdown-timeout must not be negative"},
		{[]string{"worker", "--kind", "k", "--lease-ttl", "500ms", "--", "true"}, 2, "--lease-ttl must be between 1s and 24h0m0s (got 500ms)"},
		{[]string{"worker", "--kind", "a b", "--", "true"}, 2, "invalid --kind"},
		{[]string{"worker", "--kind", "k", "--name", "a\nb", "--", "true"}, 2, "invalid --name"},
		{[]string{"worker", "--kind", "k", "--", "baton-test-no-such-command"}, 127, "executable file not found"},
	}
	for _, c := range cases {
		r := cli(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.out) {
			t.Errorf("baton %q: %s\nwant exit %d and %q", c.args, r, c.code, c.out)
		}
		if c.code == 0 && r.stderr != "" {
			t.Errorf("baton %q: success with stderr %q", c.args, r.stderr)
		}
		if c.code == 2 && r.stdout != "" {
			t.Errorf("baton %q: usage error with stdout %q", c.args, r.stdout)
		}
	}
}

func TestJobsRoundTrip(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()

	// Kinds: set creates, a second set changes only the flags it is given.
	if r := f.cli(t, "kinds", "set", "deploy", "--max-attempts", "3", "--timeout", "1m"); r.code != 0 ||
		!strings.Contains(r.stdout, "deploy") || !strings.Contains(r.stdout, "1m0s") {
		t.Fatalf("kinds set: %s", r)
	}
	k := decodeJSON[wire.Kind](t, f.cli(t, "kinds", "set", "deploy", "--policy", "skip", "--from-states", ",ready", "-o", "json"))
	if k.Policy != store.PolicySkip || k.MaxAttempts != 3 || k.TimeoutMs != 60000 || strings.Join(k.FromStates, "|") != "|ready" {
		t.Fatalf("kinds set --policy kept %+v", k)
	}
	f.cli(t, "kinds", "set", "deploy", "--policy", "queue", "--from-states", "")
	kinds, err := f.store.Kinds(ctx)
	if err != nil || len(kinds) != 1 || kinds[0].Policy != store.PolicyQueue || kinds[0].MaxAttempts != 3 ||
		kinds[0].Timeout != time.Minute || len(kinds[0].FromStates) != 0 {
		t.Fatalf("the store has %+v, %v", kinds, err)
	}
	if ks := decodeJSON[[]wire.Kind](t, f.cli(t, "kinds", "list", "-o", "json")); len(ks) != 1 || ks[0].Name != "deploy" {
		t.Fatalf("kinds list: %+v", ks)
	}
	if r := f.cli(t, "kinds", "list"); r.code != 0 || !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "queue") {
		t.Fatalf("kinds list: %s", r)
	}

	// Submit.
	j1 := f.submit(t, "--kind", "deploy", "--resource", "svc/api", "--args", `{"version":"v2"}`,
		"--idempotency-key", "deploy:v2", "--priority", "3")
	if j1.ID == 0 || j1.State != store.JobAvailable || !j1.Head || j1.Attempt != 0 || j1.MaxAttempts != 3 ||
		j1.Priority != 3 || j1.IdempotencyKey != "deploy:v2" || compactJSON(t, j1.Args) != `{"version":"v2"}` {
		t.Fatalf("submitted %+v", j1)
	}
	if got := f.job(t, j1.ID); got.Resource != "svc/api" || got.Kind != "deploy" {
		t.Fatalf("the store has %+v", got)
	}
	// The same idempotency key: the existing job, said so, nothing new.
	r := f.cli(t, "jobs", "submit", "--kind", "deploy", "--resource", "svc/other", "--idempotency-key", "deploy:v2")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("already submitted: job %d", j1.ID)) || !strings.Contains(r.stdout, "svc/api") {
		t.Fatalf("resubmit: %s", r)
	}
	if s := decodeJSON[submitted](t, f.cli(t, "jobs", "submit", "--kind", "deploy", "--resource", "x", "--idempotency-key", "deploy:v2", "-o", "json")); !s.Existing || s.Job.ID != j1.ID {
		t.Fatalf("resubmit -o json: %+v", s)
	}
	j2 := f.submit(t, "--kind", "deploy", "--resource", "svc/api", "--in", "1h")
	if j2.State != store.JobScheduled || j2.Head || j2.ScheduledAt.Sub(j2.CreatedAt.Time) < 59*time.Minute {
		t.Fatalf("--in 1h: %+v", j2)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	j3 := f.submit(t, "--kind", "deploy", "--resource", "svc/web", "--at", at.Format(time.RFC3339), "--max-attempts", "7")
	if j3.State != store.JobScheduled || !j3.ScheduledAt.Equal(at) || j3.MaxAttempts != 7 || compactJSON(t, j3.Args) != `{}` {
		t.Fatalf("--at: %+v", j3)
	}
	if r := f.cli(t, "jobs", "submit", "--kind", "deploy", "--resource", "svc/db"); r.code != 0 ||
		!strings.Contains(r.stdout, "ID") || !strings.Contains(r.stdout, "svc/db") || !strings.Contains(r.stdout, "available") {
		t.Fatalf("submit (table): %s", r)
	}

	// List.
	r = f.cli(t, "jobs", "list")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 5 || !strings.Contains(r.stdout, "STATE") || r.stderr != "" {
		t.Fatalf("list: %s", r)
	}
	ids := func(jobs []wire.Job) string {
		var s []string
		for _, j := range jobs {
			s = append(s, fmt.Sprint(j.ID))
		}
		return strings.Join(s, ",")
	}
	want := func(js ...wire.Job) string { return ids(js) }
	if got := decodeJSON[[]wire.Job](t, f.cli(t, "jobs", "list", "--resource", "svc/api", "-o", "json")); ids(got) != want(j1, j2) {
		t.Fatalf("list --resource: %s", ids(got))
	}
	if got := decodeJSON[[]wire.Job](t, f.cli(t, "jobs", "list", "--state", "scheduled", "--kind", "deploy", "-o", "json")); ids(got) != want(j2, j3) {
		t.Fatalf("list --state scheduled: %s", ids(got))
	}
	r = f.cli(t, "jobs", "list", "--limit", "1")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, fmt.Sprintf("--after %d", j1.ID)) {
		t.Fatalf("list --limit 1: %s", r)
	}
	if got := decodeJSON[[]wire.Job](t, f.cli(t, "jobs", "list", "--after", fmt.Sprint(j1.ID), "--limit", "2", "-o", "json")); ids(got) != want(j2, j3) {
		t.Fatalf("list --after: %s", ids(got))
	}
	if r := f.cli(t, "jobs", "list", "--kind", "other"); r.code != 0 || r.stdout != "no jobs\n" {
		t.Fatalf("empty list: %s", r)
	}

	// Show.
	r = f.cli(t, "jobs", "show", fmt.Sprint(j1.ID))
	for _, s := range []string{"Kind:", "deploy", "svc/api", "available (head of its resource)", "0 of 3", `{"version":"v2"}`, "deploy:v2", "Errors:", "none"} {
		if r.code != 0 || !strings.Contains(r.stdout, s) {
			t.Fatalf("show: want %q in\n%s", s, r)
		}
	}
	if got := decodeJSON[wire.Job](t, f.cli(t, "jobs", "show", fmt.Sprint(j1.ID), "-o", "json")); got.ID != j1.ID || got.Seq != j1.Seq {
		t.Fatalf("show -o json: %+v", got)
	}
	if r := f.cli(t, "jobs", "show", "999"); r.code != exitNotFound || !strings.Contains(r.stderr, "job 999 not found") {
		t.Fatalf("show of an unknown job: %s", r)
	}

	// Cancel, then retry.
	if got := decodeJSON[wire.Job](t, f.cli(t, "jobs", "cancel", fmt.Sprint(j2.ID), "-o", "json")); got.State != store.JobCancelled {
		t.Fatalf("cancel: %+v", got)
	}
	if j := f.job(t, j2.ID); j.State != store.JobCancelled {
		t.Fatalf("the store has %+v", j)
	}
	if r := f.cli(t, "jobs", "cancel", fmt.Sprint(j2.ID)); r.code != exitConflict || !strings.Contains(r.stderr, fmt.Sprintf("cannot cancel job %d: it is cancelled", j2.ID)) {
		t.Fatalf("cancel of a cancelled job: %s", r)
	}
	if r := f.cli(t, "jobs", "cancel", "999"); r.code != exitNotFound {
		t.Fatalf("cancel of an unknown job: %s", r)
	}
	r = f.cli(t, "jobs", "retry", fmt.Sprint(j2.ID))
	if r.code != 0 || !strings.Contains(r.stdout, "available") {
		t.Fatalf("retry: %s", r)
	}
	if j := f.job(t, j2.ID); j.State != store.JobAvailable || j.Head || j.Seq <= j1.Seq {
		t.Fatalf("retried job: %+v", j)
	}
	if r := f.cli(t, "jobs", "retry", fmt.Sprint(j1.ID)); r.code != exitConflict || !strings.Contains(r.stderr, "it is available") {
		t.Fatalf("retry of an available job: %s", r)
	}
}

func TestJobsSubmitInvalidWritesNothing(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if err := f.store.RegisterKinds(ctx, []store.Kind{{Name: "deploy"}}); err != nil {
		t.Fatal(err)
	}
	ok := []string{"--kind", "deploy", "--resource", "svc/api"}
	with := func(extra ...string) []string { return append(append([]string{}, ok...), extra...) }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--resource", "r"}, "--kind is required"},
		{[]string{"--kind", "deploy"}, "--resource is required"},
		{with("--args", "[1]"), "invalid --args: must be a JSON object"},
		{with("--args", "{"), "invalid --args: must be a JSON object"},
		{with("--args", strings.Repeat(" ", 40<<10)+"{}"), "invalid --args: must be at most 32768 bytes"},
		{[]string{"--kind", "nope", "--resource", "r"}, "invalid --kind"}, // not registered: the server says so
		{[]string{"--kind", "a b", "--resource", "r"}, "invalid --kind: must contain only letters"},
		{[]string{"--kind", "deploy", "--resource", "a\x00b"}, "invalid --resource"},
		{with("--policy", "later"), `invalid --policy: must be "queue", "skip", "reject" or "replace"`},
		{with("--policy", "queue", "--debounce", "5s"), "invalid --debounce: applies only to policy replace"},
		{with("--policy", "replace", "--debounce", "1ms"), "invalid --debounce: must be 0 (none) or between 10ms and 24h0m0s"},
		{with("--max-attempts", "1001"), "invalid --max-attempts: must be between 1 and 1000"},
		{with("--priority", "10"), "invalid --priority: must be between 0 and 9"},
		{with("--in", "-1s"), "invalid --in: must be between 0"},
		{with("--idempotency-key", strings.Repeat("k", 300)), "invalid --idempotency-key"},
		{with("--at", "tomorrow"), "--at must be an RFC 3339 time"},
		{with("--at", "2030-01-01T00:00:00Z", "--in", "1m"), "--at and --in exclude each other"},
		{with("extra"), `unexpected argument "extra"`},
		{with("--bogus"), "unknown flag: --bogus"},
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
	if rs, err := f.store.ListResources(ctx, &store.ResourceListParams{}); err != nil || len(rs) != 0 {
		t.Fatalf("bad submits created %d resources (%v)", len(rs), err)
	}
}

func TestJobsSubmitBusyResource(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if err := f.store.RegisterKinds(ctx, []store.Kind{{Name: "migrate"}, {Name: "strict", Policy: store.PolicyReject}}); err != nil {
		t.Fatal(err)
	}
	head := f.submit(t, "--kind", "migrate", "--resource", "db/main")
	wantMsg := fmt.Sprintf(`resource "db/main" is busy: job %d is available`, head.ID)
	for _, args := range [][]string{
		{"--kind", "migrate", "--resource", "db/main", "--policy", "reject"},
		{"--kind", "strict", "--resource", "db/main"}, // the kind's policy
	} {
		r := f.cli(t, append([]string{"jobs", "submit"}, args...)...)
		if r.code != exitBusy || r.stdout != "" || !strings.Contains(r.stderr, wantMsg) {
			t.Fatalf("submit %q to a busy resource: %s\nwant exit 75 and %q", args, r, wantMsg)
		}
	}
	if jobs, err := f.store.ListJobs(ctx, &store.JobListParams{}); err != nil || len(jobs) != 1 {
		t.Fatalf("rejected submits wrote jobs: %d, %v", len(jobs), err)
	}
	// skip records the job as skipped; exit 0.
	if j := f.submit(t, "--kind", "migrate", "--resource", "db/main", "--policy", "skip"); j.State != store.JobSkipped ||
		len(j.Errors) != 1 || j.Errors[0].Code != store.CodeResourceBusy {
		t.Fatalf("skip: %+v", j)
	}
	// A free resource is not busy, even under reject.
	if j := f.submit(t, "--kind", "strict", "--resource", "db/other"); j.State != store.JobAvailable {
		t.Fatalf("reject on a free resource: %+v", j)
	}
}

// discard makes dead letters: claims the jobs and fails them permanently.
func (f *fixture) discard(t *testing.T, ids ...int64) {
	t.Helper()
	ctx := context.Background()
	jobs, err := f.store.ClaimJobs(ctx, &store.ClaimParams{Worker: "test", Kinds: []string{"k"}, Limit: 100, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if _, err := f.store.FailJob(ctx, &store.FailParams{ID: j.ID, Token: j.Token, Message: fmt.Sprintf("boom %d", j.ID), Permanent: true, Code: store.CodePermanent}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if j := f.job(t, id); j.State != store.JobDiscarded {
			t.Fatalf("job %d is %s", id, j.State)
		}
	}
}

func TestDLQ(t *testing.T) {
	f := newJobsFixture(t)
	ctx := context.Background()
	if err := f.store.RegisterKinds(ctx, []store.Kind{{Name: "k"}}); err != nil {
		t.Fatal(err)
	}
	a := f.submit(t, "--kind", "k", "--resource", "r1")
	b := f.submit(t, "--kind", "k", "--resource", "r2")
	c := f.submit(t, "--kind", "k", "--resource", "r3")
	f.submit(t, "--kind", "k", "--resource", "r1") // queued behind a: not a dead letter
	f.discard(t, a.ID, b.ID, c.ID)

	r := f.cli(t, "dlq", "list")
	if r.code != 0 || strings.Count(r.stdout, "discarded") != 3 || !strings.Contains(r.stdout, fmt.Sprintf("permanent: boom %d", a.ID)) {
		t.Fatalf("dlq list: %s", r)
	}
	if got := decodeJSON[[]wire.Job](t, f.cli(t, "dlq", "list", "--kind", "k", "--resource", "r2", "-o", "json")); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("dlq list --resource r2: %+v", got)
	}
	// Purge refuses without IDs or --yes, and deletes nothing.
	if r := f.cli(t, "dlq", "purge", "--resource", "r2"); r.code != exitUsage || !strings.Contains(r.stderr, "without --yes") {
		t.Fatalf("purge without --yes: %s", r)
	}
	if got := decodeJSON[[]wire.Job](t, f.cli(t, "dlq", "list", "-o", "json")); len(got) != 3 {
		t.Fatalf("after a refused purge: %d dead letters", len(got))
	}
	// Retry: every ID is tried; the exit code is the first failure's.
	r = f.cli(t, "dlq", "retry", fmt.Sprint(a.ID), "999")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "job 999 not found") || !strings.Contains(r.stdout, fmt.Sprint(a.ID)) {
		t.Fatalf("dlq retry: %s", r)
	}
	if j := f.job(t, a.ID); j.State != store.JobAvailable || j.Head {
		t.Fatalf("retried dead letter: %+v", j)
	}
	// Purge by ID, then the rest with --yes.
	if r := f.cli(t, "dlq", "purge", fmt.Sprint(b.ID)); r.code != 0 || r.stdout != "purged 1 dead letter\n" {
		t.Fatalf("purge by ID: %s", r)
	}
	if _, err := f.store.GetJob(ctx, b.ID); err != store.ErrNotFound {
		t.Fatalf("purged job: %v", err)
	}
	if r := f.cli(t, "dlq", "purge", "--yes", "-o", "json"); r.code != 0 || compactJSON(t, []byte(r.stdout)) != `{"purged":1}` {
		t.Fatalf("purge --yes: %s", r)
	}
	if r := f.cli(t, "dlq", "list"); r.code != 0 || r.stdout != "no dead letters\n" {
		t.Fatalf("dlq list after the purge: %s", r)
	}
	if j := f.job(t, a.ID); j.State != store.JobAvailable {
		t.Fatalf("purge touched a job that is not a dead letter: %+v", j)
	}
}

func TestResources(t *testing.T) {
	f := newJobsFixture(t)
	res := decodeJSON[wire.Resource](t, f.cli(t, "resources", "set-state", "db/main", "idle", "-o", "json"))
	if res.Key != "db/main" || res.State != "idle" || res.Version != 1 {
		t.Fatalf("set-state: %+v", res)
	}
	if r := f.cli(t, "resources", "set-state", "db/main", "busy", "--if-version", "0"); r.code != exitConflict ||
		!strings.Contains(r.stderr, `resource "db/main" is at version 1, not 0`) {
		t.Fatalf("set-state with a stale version: %s", r)
	}
	if r := f.cli(t, "resources", "set-state", "db/main", "busy", "--if-version", "1"); r.code != 0 || !strings.Contains(r.stdout, "busy") {
		t.Fatalf("set-state --if-version 1: %s", r)
	}
	if got, err := f.store.GetResource(context.Background(), "db/main"); err != nil || got.State != "busy" || got.Version != 2 {
		t.Fatalf("the store has %+v, %v", got, err)
	}
	f.cli(t, "resources", "set-state", "web/api", "up")
	r := f.cli(t, "resources", "show", "db/main")
	if r.code != 0 || !strings.Contains(r.stdout, "VERSION") || !strings.Contains(r.stdout, "busy") {
		t.Fatalf("show: %s", r)
	}
	if r := f.cli(t, "resources", "show", "nope"); r.code != exitNotFound || !strings.Contains(r.stderr, `resource "nope" not found`) {
		t.Fatalf("show of an unknown resource: %s", r)
	}
	if got := decodeJSON[[]wire.Resource](t, f.cli(t, "resources", "list", "--prefix", "db/", "-o", "json")); len(got) != 1 || got[0].Key != "db/main" {
		t.Fatalf("list --prefix: %+v", got)
	}
	listPageSize = 1 // every page is fetched
	t.Cleanup(func() { listPageSize = store.MaxListLimit })
	if r := f.cli(t, "resources", "list"); r.code != 0 || !strings.Contains(r.stdout, "db/main") || !strings.Contains(r.stdout, "web/api") {
		t.Fatalf("list: %s", r)
	}
}
