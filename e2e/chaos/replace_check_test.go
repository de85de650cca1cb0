package chaos

import (
	"strconv"
	"strings"
	"time"
)

// checkReplace judges a run of policy replace (latest wins) once its jobs have ended.
// perResource lists each resource's job IDs in submission order (every submit a replace), jobs
// are the jobs as the server lists them at the end, events the fenced resource's calls, and
// stopped the jobs whose CMD a worker stopped because the job was asked to stop
// (cancelStoppedJobs). Per resource:
//
//   - the newest job ended succeeded and entered the resource (replace_newest);
//   - every other job ended succeeded (it finished before a later one came) or superseded, its
//     superseded_by a later job of the resource; any other end (discarded, cancelled, ...) or a
//     job not listed is replace_end_state or replace_lost;
//   - no job made an accepted call to the resource after a later job of the resource had entered
//     (replace_ran_after_replacer): a superseded job never runs once its replacer started, and
//     the newest job is the last to enter.
//
// Over the whole run, the case must have been exercised (replace_not_exercised): some job was
// superseded while queued, and some while running, its CMD stopped by its worker.
// counts gets succeeded, superseded_queued (never entered), superseded_running (stopped),
// superseded_after_run (an attempt entered, e.g. one a fault ended, and it was superseded later)
// and succeeded_before_replaced.
func checkReplace(perResource map[string][]int64, jobs []apiJob, events []event, stopped map[int64]bool, r *report, counts *counter) {
	byID := map[int64]apiJob{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	firstEnter, lastAccepted := map[int64]time.Duration{}, map[int64]time.Duration{}
	for _, e := range events {
		if e.Job == 0 || !e.Accepted {
			continue
		}
		if at, ok := firstEnter[e.Job]; e.Kind == "enter" && (!ok || e.At < at) {
			firstEnter[e.Job] = e.At
		}
		lastAccepted[e.Job] = max(lastAccepted[e.Job], e.At)
	}
	submitted := 0
	for res, ids := range perResource {
		submitted += len(ids)
		pos := map[int64]int{}
		for i, id := range ids {
			pos[id] = i
		}
		var latest int64 // the job with the latest accepted call among those before i
		for i, id := range ids {
			j, listed := byID[id]
			switch {
			case !listed:
				r.violate("replace_lost", "%s: job %d (#%d) was submitted but is not listed", res, id, i)
			case i == len(ids)-1:
				if _, entered := firstEnter[id]; j.State != "succeeded" || !entered {
					r.violate("replace_newest", "%s: the newest job %d ended %s (entered: %v)", res, id, j.State, entered)
				}
				counts.add("succeeded", 1)
			case j.State == "succeeded":
				counts.add("succeeded_before_replaced", 1)
			case j.State == "superseded":
				if p, ok := pos[j.SupersededBy]; !ok || p <= i {
					r.violate("replace_end_state", "%s: job %d (#%d) superseded by %d, not a later job of its resource", res, id, i, j.SupersededBy)
				}
				_, entered := firstEnter[id]
				switch {
				case stopped[id]:
					counts.add("superseded_running", 1)
				case entered:
					counts.add("superseded_after_run", 1)
				default:
					counts.add("superseded_queued", 1)
				}
			default:
				r.violate("replace_end_state", "%s: job %d (#%d) ended %s, neither succeeded nor superseded", res, id, i, j.State)
			}
			if at, ok := firstEnter[id]; ok && latest != 0 && lastAccepted[latest] > at {
				r.violate("replace_ran_after_replacer", "%s: job %d made an accepted call at %s, after the later job %d (#%d) entered at %s",
					res, latest, lastAccepted[latest], id, i, at)
			}
			if _, ok := lastAccepted[id]; ok && (latest == 0 || lastAccepted[id] > lastAccepted[latest]) {
				latest = id
			}
		}
	}
	if len(jobs) != submitted {
		r.violate("replace_lost", "%d jobs submitted, %d listed", submitted, len(jobs))
	}
	if counts.get("superseded_queued") == 0 || counts.get("superseded_running") == 0 {
		r.violate("replace_not_exercised", "superseded while queued: %d, while running: %d; want both",
			counts.get("superseded_queued"), counts.get("superseded_running"))
	}
}

// cancelStoppedJobs are the jobs whose CMD a worker stopped because the job was asked to stop
// (a replace, or a cancel), as the workers' log says.
func cancelStoppedJobs(log string) map[int64]bool {
	jobs := map[int64]bool{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "stopping CMD") || !strings.Contains(line, "job cancelled") {
			continue
		}
		if m := jobField.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			jobs[id] = true
		}
	}
	return jobs
}
