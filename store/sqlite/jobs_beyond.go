package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton/store"
)

// Jobs beyond one key (store/jobs_holds.go). A job that holds its resource shared, holds extra
// resources or takes limits keeps them in jobs.beyond; its attempt is granted in the claim's
// write transaction by the rules of holds.go, as the lease j.AcquireParams asks, with the job's
// place in every line at its submit time. The claim statement (jobs.go) skips these jobs; the
// claim tries them first, in its second statement here.

// storedBeyond is jobs.beyond.
type storedBeyond struct {
	Shared    bool     `json:"shared,omitempty"`
	Tree      bool     `json:"tree,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Limits    []string `json:"limits,omitempty"`
}

// encodeBeyond is j's jobs.beyond: NULL for a plain job.
func encodeBeyond(j *store.Job) (sql.NullString, error) {
	if !j.Beyond() {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(storedBeyond{Shared: j.Shared, Tree: j.Tree, Resources: j.Resources, Limits: j.Limits})
	return sql.NullString{String: string(b), Valid: true}, err
}

// decodeBeyond sets j's holds from jobs.beyond.
func decodeBeyond(j *store.Job, v sql.NullString) error {
	if !v.Valid {
		return nil
	}
	var b storedBeyond
	if err := json.Unmarshal([]byte(v.String), &b); err != nil {
		return err
	}
	j.Shared, j.Tree, j.Resources, j.Limits = b.Shared, b.Tree, b.Resources, b.Limits
	return nil
}

// resolveHolds sets what job j, submitted with p, of kind k, holds; every limit it names must
// exist, and every resource in a tree must be a valid key of it (a job on a tree key is a Tree
// job, granted through holds). It writes nothing.
func (x *jobTx) resolveHolds(k *store.Kind, p *store.SubmitParams, j *store.Job) error {
	shared, limits, err := store.ResolveHolds(k, p)
	if err != nil {
		return err
	}
	for _, name := range limits {
		var c int
		err := x.queryRow(`SELECT capacity FROM limits WHERE name = ?`, name).Scan(&c)
		if errors.Is(err, sql.ErrNoRows) {
			return store.UnknownLimit(name)
		}
		if err != nil {
			return err
		}
	}
	for i, r := range append([]string{p.Resource}, p.Resources...) {
		prefix, err := x.treeOf(r)
		if err != nil {
			return err
		}
		if prefix == "" {
			continue
		}
		field := "resource"
		if i > 0 {
			field = "resources"
		}
		if err := store.ValidateTreeKey(field, r, prefix); err != nil {
			return err
		}
		j.Tree = j.Tree || i == 0
	}
	j.Shared, j.Limits = shared, limits
	if len(p.Resources) > 0 {
		j.Resources = append([]string(nil), p.Resources...)
	}
	return nil
}

// treeOf returns the prefix of key's tree, read in x; "" if none.
func (x *jobTx) treeOf(key string) (string, error) {
	probe := store.TreeProbe(key)
	var prefix sql.NullString
	if err := x.queryRow(`SELECT max(prefix) FROM trees WHERE prefix <= ?`, probe).Scan(&prefix); err != nil {
		return "", err
	}
	if !prefix.Valid || !strings.HasPrefix(probe, prefix.String) {
		return "", nil
	}
	return prefix.String, nil
}

// beyondBatch bounds the jobs with holds one claim tries.
const beyondBatch = 64

// claimBeyond starts, for p, the claimable heads with holds whose holds can be granted now, in
// claim order, until out holds p.Limit jobs; the others keep (or take) their place in their
// lines.
func (s *Store) claimBeyond(x *jobTx, p *store.ClaimParams, kinds string, out []*store.Job) ([]*store.Job, error) {
	tx, ok := x.q.(*sql.Tx)
	if !ok {
		return out, fmt.Errorf("claim: jobs with holds need the store's own transaction")
	}
	cands, err := scanJobs(tx.QueryContext(x.ctx, `SELECT `+jobColumns+` FROM jobs INDEXED BY jobs_beyond_heads
		WHERE head AND beyond IS NOT NULL AND state IN `+sqlClaimable+` AND scheduled_at <= ?1
			AND kind IN (SELECT value FROM json_each(?2))
		ORDER BY priority, seq LIMIT ?3`, x.now.UnixNano(), kinds, beyondBatch))
	if err != nil {
		return out, err
	}
	for _, j := range cands {
		if len(out) >= p.Limit {
			break
		}
		k, err := x.kind(j.Kind)
		if err != nil {
			return out, err
		}
		r, err := x.resource(j.Resource)
		if err != nil {
			return out, err
		}
		if !guardAllows(k, r.state, j.Attempt) {
			if err := x.discardUnguarded(j, k, r); err != nil {
				return out, err
			}
			continue
		}
		if next, reached, err := x.rateReached(k, j.Resource); err != nil || reached {
			if err == nil {
				err = x.rateWait(j, next)
			}
			if err != nil {
				return out, err
			}
			continue
		}
		a := j.AcquireParams(p.Worker, p.Owner, p.TTL)
		rates, err := grantRates(x.ctx, tx, a.Keys(), a.Limits)
		if err != nil {
			return out, err
		}
		if w, err := ratesReached(x.ctx, tx, rates, x.now); err != nil || w != nil {
			if err == nil {
				err = x.rateWait(j, w.Next)
			}
			if err != nil {
				return out, err
			}
			continue
		}
		l, err := s.grantJob(x, tx, j, p)
		if err != nil {
			return out, err
		}
		if l == nil {
			continue // it waits in its lines
		}
		if err := x.begin(j, k, r, p.Worker, p.Owner, int64(l.Token), l.ExpiresAt); err != nil {
			return out, err
		}
		if err := recordRates(x.ctx, tx, rates, x.now); err != nil {
			return out, err
		}
		j.Slots = l.Slots
		out = append(out, j)
	}
	return out, nil
}

// grantJob grants job j's attempt its holds, as the lease j.AcquireParams asks, at its place in
// its lines (its submit time); nil if it must wait, its tickets then written or kept alive for
// the claim's TTL. A limit deleted since the submit ends the job, discarded.
func (s *Store) grantJob(x *jobTx, tx *sql.Tx, j *store.Job, p *store.ClaimParams) (*store.Lease, error) {
	ctx, now := x.ctx, x.now.UnixNano()
	a := j.AcquireParams(p.Worker, p.Owner, p.TTL)
	caps := make([]int, len(a.Limits))
	for i, name := range a.Limits {
		err := s.hq(ctx, tx, sqlLimitCapacity).QueryRowContext(ctx, name).Scan(&caps[i])
		if errors.Is(err, sql.ErrNoRows) {
			x.addError(j, store.CodeUnknownLimit, fmt.Sprintf("limit %q was deleted after the job was submitted", name))
			return nil, x.end(j, store.JobDiscarded, false)
		}
		if err != nil {
			return nil, err
		}
	}
	me := place{at: j.CreatedAt.UnixNano(), has: true, job: j.ID}
	var refusal error
	trees, err := s.checkTreeKeys(ctx, tx, a)
	if err != nil {
		return nil, err
	}
	for i, k := range a.Keys() {
		if refusal, err = s.keyRefusal(ctx, tx, a, k, trees[i], now, me); err != nil || refusal != nil {
			break
		}
	}
	for i := 0; refusal == nil && err == nil && i < len(a.Limits); i++ {
		var ahead int
		refusal, err = s.limitRefusal(ctx, tx, a, a.Limits[i], caps[i], now, me, &ahead)
	}
	if err != nil {
		return nil, err
	}
	if refusal == nil {
		l, err := s.grantBeyond(ctx, tx, a, trees, now)
		for _, line := range a.Lines() {
			x.freed[line] = true // the next in a limit's line, or a shared one behind, may go too
		}
		return l, err
	}
	// Its place: one ticket per line, at its submit time, alive for the claim's TTL.
	lines := jsonList(a.Lines())
	if _, err := s.hq(ctx, tx, sqlEndTickets).ExecContext(ctx, a.LeaseID, lines); err != nil {
		return nil, err
	}
	for _, line := range a.Lines() {
		_, err := s.hq(ctx, tx, sqlEnqueueTicket).ExecContext(ctx, line, a.LeaseID, store.JobHolder(j.ID), "",
			me.at, now+int64(p.TTL), 0, a.HoldMode(), a.Key)
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// endHolds ends the holds of j's running attempt (its end: completed, failed, reaped) and
// settles its keys' summary rows; their lines are woken after the commit.
func (x *jobTx) endHolds(j *store.Job) error {
	if x.s == nil {
		return fmt.Errorf("end of job %d: its holds need the store's own transaction", j.ID)
	}
	tx, ok := x.q.(*sql.Tx)
	if !ok {
		return fmt.Errorf("end of job %d: its holds need the store's own transaction", j.ID)
	}
	_, woken, err := x.s.releaseHoldsTx(x.ctx, tx, &store.ReleaseParams{Key: j.Resource, LeaseID: store.JobLeaseID(j.ID),
		Owner: j.Owner}, x.now.UnixNano())
	if err != nil && !errors.Is(err, store.ErrNotHeld) {
		return err
	}
	for _, k := range woken {
		x.freed[k] = true
	}
	return nil
}

// leaveLines drops the tickets of job j, which ends without running (cancelled, discarded,
// skipped): the lock requests behind it need not wait for them to lapse. Its lines are woken
// after the commit.
func (x *jobTx) leaveLines(j *store.Job) error {
	res, err := x.q.ExecContext(x.ctx, `DELETE FROM tickets WHERE lease_id = ?`, store.JobLeaseID(j.ID))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		a := j.AcquireParams("", "", 0)
		for _, line := range a.Lines() {
			x.freed[line] = true
		}
	}
	return nil
}

// heartbeatHolds extends the holds of job id's running attempt (resource, owner) by ttl from
// now; store.ErrNotHeld if they ended (an admin force-released one of its keys).
func (s *Store) heartbeatHolds(ctx context.Context, id int64, resource, owner string, ttl time.Duration) error {
	_, err := s.renewHolds(ctx, &store.RenewParams{Key: resource, LeaseID: store.JobLeaseID(id), Owner: owner, TTL: ttl})
	return err
}
