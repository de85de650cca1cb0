package sqlite

import (
	"github.com/batonhq/baton/store"
)

// supersede applies the replace policy (store/jobs_replace.go) for n, the job just inserted, in
// its transaction: the unfinished jobs of n's kind on n's resource before it end superseded (by
// n), but a running one, which is asked to stop. It returns n as it is now (superseding the head
// promotes the next job, which may be n) and how many jobs it ended (store.SubmitResult.Superseded).
func (x *jobTx) supersede(n *store.Job) (*store.Job, int, error) {
	olds, err := scanJobs(x.q.QueryContext(x.ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_unfinished_by_resource
		WHERE resource = ? AND state IN `+sqlUnfinished+` AND kind = ? AND id <> ? ORDER BY seq DESC`, n.Resource, n.Kind, n.ID))
	if err != nil || len(olds) == 0 {
		return n, 0, err
	}
	ended := 0
	// Newest first: ending a job that is not head changes no head, so that when the oldest (the
	// head, if any) ends, the jobs behind it that end too are final already and the promotion
	// skips them.
	for _, o := range olds {
		// superseded_by first: the audit trigger of the state change reads it.
		if _, err := x.q.ExecContext(x.ctx, `UPDATE jobs SET superseded_by = ?,
				cancel_requested = iif(state = 'running', 1, cancel_requested) WHERE id = ?`, n.ID, o.ID); err != nil {
			return nil, 0, err
		}
		o.SupersededBy = n.ID
		if o.State == store.JobRunning {
			continue // its attempt ends superseded when its worker reports or its lease expires
		}
		if err := x.end(o, store.JobSuperseded, true); err != nil {
			return nil, 0, err
		}
		ended++
	}
	if x.heads != nil {
		delete(x.heads, n.Resource) // a batch reads the head again
	}
	n, err = x.job(n.ID)
	return n, ended, err
}
