package chaos

import (
	"testing"
	"time"
)

// checkReplace on made-up runs: one resource, jobs 1, 2, 3 submitted in that order with policy
// replace; in the clean run 1 is superseded while queued, 2 is stopped while running and
// superseded, 3 runs last and succeeds. Each mutation is a violation of the contract the check
// must catch.
func TestReplaceCheckCatchesViolations(t *testing.T) {
	ev := func(ms int, kind string, job int64, accepted bool) event {
		return event{At: time.Duration(ms) * time.Millisecond, Kind: kind, Key: "r", Job: job, Token: uint64(job), Accepted: accepted}
	}
	clean := func() ([]apiJob, []event, map[int64]bool) {
		jobs := []apiJob{
			{ID: 1, Resource: "r", State: "superseded", SupersededBy: 2},
			{ID: 2, Resource: "r", State: "superseded", SupersededBy: 3},
			{ID: 3, Resource: "r", State: "succeeded"},
		}
		events := []event{
			ev(0, "enter", 2, true), ev(10, "write", 2, true), ev(20, "exit", 2, true),
			ev(30, "enter", 3, true), ev(40, "write", 3, true), ev(50, "exit", 3, true),
			ev(60, "write", 2, false), // a late write of 2, refused by the fence
		}
		return jobs, events, map[int64]bool{2: true}
	}
	cases := []struct {
		name   string
		mutate func(jobs []apiJob, events *[]event, stopped map[int64]bool)
		want   string // violation kind, "" for none
	}{
		{"clean", func([]apiJob, *[]event, map[int64]bool) {}, ""},
		{"older job succeeds after the newest", func(jobs []apiJob, events *[]event, _ map[int64]bool) {
			jobs[1].State = "succeeded"
			*events = append(*events, ev(70, "write", 2, true), ev(80, "exit", 2, true))
		}, "replace_ran_after_replacer"},
		{"superseded job enters after its replacer", func(_ []apiJob, events *[]event, _ map[int64]bool) {
			*events = append(*events, ev(70, "enter", 1, true))
		}, "replace_ran_after_replacer"},
		{"newest never ran", func(jobs []apiJob, events *[]event, _ map[int64]bool) {
			*events = (*events)[:3]
		}, "replace_newest"},
		{"newest cancelled", func(jobs []apiJob, _ *[]event, _ map[int64]bool) {
			jobs[2].State = "cancelled"
		}, "replace_newest"},
		{"older job discarded", func(jobs []apiJob, _ *[]event, _ map[int64]bool) {
			jobs[0].State = "discarded"
		}, "replace_end_state"},
		{"superseded by an earlier job", func(jobs []apiJob, _ *[]event, _ map[int64]bool) {
			jobs[1].SupersededBy = 1
		}, "replace_end_state"},
		{"running job never asked to stop", func(_ []apiJob, _ *[]event, stopped map[int64]bool) {
			delete(stopped, 2)
		}, "replace_not_exercised"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs, events, stopped := clean()
			c.mutate(jobs, &events, stopped)
			r := &report{}
			checkReplace(map[string][]int64{"r": {1, 2, 3}}, jobs, events, stopped, r, &counter{})
			got := r.violations.String()
			if c.want == "" && got != "none" {
				t.Errorf("violations %s, want none", got)
			}
			if c.want != "" && r.violations.get(c.want) == 0 {
				t.Errorf("violations %s, want %s", got, c.want)
			}
		})
	}
	t.Run("job not listed", func(t *testing.T) {
		jobs, events, stopped := clean()
		r := &report{}
		checkReplace(map[string][]int64{"r": {1, 2, 3}}, jobs[1:], events, stopped, r, &counter{})
		if r.violations.get("replace_lost") == 0 {
			t.Errorf("violations %s, want replace_lost", r.violations.String())
		}
	})
}
