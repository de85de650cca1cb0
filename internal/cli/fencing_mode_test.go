package cli

import (
	"fmt"
	"strings"
	"testing"
)

// baton run --shared tells CMD its mode (BATON_FENCING_MODE=shared); an exclusive run does not.
func TestRunFencingModeEnv(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lock", "db/x", "--shared"}, "shared\n"},
		{[]string{"--lock", "db/x"}, "unset\n"},
	} {
		_, _, done := f.runAsync(t, "", append(c.args, "--", "sh", "-c", `echo "${BATON_FENCING_MODE-unset}"`)...)
		if r := waitResult(t, done); r.code != 0 || r.stdout != c.want {
			t.Fatalf("run %v: %s; want %q", c.args, r, c.want)
		}
	}
}

// baton worker tells the CMD of a shared job its mode, and not that of an exclusive one.
func TestWorkerFencingModeEnv(t *testing.T) {
	f := newJobsFixture(t)
	if r := f.cli(t, "kinds", "set", "drain"); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	shared := f.submit(t, "--kind", "drain", "--resource", "node/1", "--shared").ID
	plain := f.submit(t, "--kind", "drain", "--resource", "node/2").ID
	errOut, done := f.workerAsync(t, "--kind", "drain", "--", "sh", "-c",
		`echo "${BATON_FENCING_MODE-unset}" > "$1/mode-$BATON_JOB_ID"`, "sh", dir)
	waitSeen(t, errOut, jobEnded(shared, "succeeded"))
	waitSeen(t, errOut, jobEnded(plain, "succeeded"))
	stopWorker(t, done)
	for id, want := range map[int64]string{shared: "shared\n", plain: "unset\n"} {
		if got := readFile(t, fmt.Sprintf("%s/mode-%d", dir, id)); got != want {
			t.Errorf("job %d: BATON_FENCING_MODE %q, want %q", id, strings.TrimSpace(got), want)
		}
	}
}
