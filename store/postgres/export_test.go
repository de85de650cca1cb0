package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/store"
)

// ListenerPID is the backend PID of s's LISTEN connection.
func ListenerPID(s *Store) uint32 { return s.lis.pid.Load() }

// ListenerConnects counts the LISTEN connections s has established; a reconnect is counted after
// its wake-up of all subscribers was sent.
func ListenerConnects(s *Store) uint64 { return s.lis.connects.Load() }

// ChannelName exposes the NOTIFY channel naming rule.
var ChannelName = channelName

// ListSQL returns the lease listing statements of schema: without and with the upper bound.
func ListSQL(schema string) (list, bounded string) {
	q := buildQueries(schema)
	return q.list, q.listBounded
}

// ListJobsSQL returns ListJobs' statement of schema for a set of filters (bits: kind 1,
// resource 2) and a state ("" for any).
func ListJobsSQL(schema string, filters int, state store.JobState) string {
	return buildJobQueries(schema, "c").list[listKey{filters, state}]
}

// ResourceListBoundedSQL returns ListResources' statement with the upper bound.
func ResourceListBoundedSQL(schema string) string {
	return buildJobQueries(schema, "c").resourceListBounded
}

// RunningJobsSQL returns the statements that read the running jobs: the reaper's candidates
// and the kind statistics.
func RunningJobsSQL(schema string) (reap, stats string) {
	return buildJobQueries(schema, "c").reapCandidates,
		kindStatsQuery(schema)
}

// SubmitManySQL returns the bulk submit's statements of schema: the resource lock, the insert
// of a batch without idempotency keys, and the insert of a batch with some.
func SubmitManySQL(schema string) (lock, noKeys, keys string) {
	q := buildSubmitQueries(schema, "c")
	return q.lock, q.insertNoKeys, q.insert
}

// MigrateTo brings schema up to version and no further, as a binary of that version would.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	for _, m := range migrations {
		if m.version > version {
			break
		}
		if err := apply(ctx, pool, schema, m); err != nil {
			return err
		}
	}
	return nil
}

// EnableAudit creates the audit triggers of schema.
var EnableAudit = enableAudit

// PromoteFinishedSQL returns the promotion that follows a single job's end, of schema.
func PromoteFinishedSQL(schema string) string {
	return buildJobQueries(schema, channelName(schema)).promoteFinished
}

// ClaimSQL returns the claim statement of schema.
func ClaimSQL(schema string) string { return buildJobQueries(schema, channelName(schema)).claim }

// SkipFailoverGuard turns the failover guard (failover.go) off for stores opened until it is
// turned on again: the broken variant of the failover test.
func SkipFailoverGuard(skip bool) { skipEpochs.Store(skip) }

// EpochBits is where a timeline's tokens start: (timeline-1) << EpochBits.
const EpochBits = epochBits

// EventsSQL returns Events' query of schema for each of the four shapes (see store.EventsParams.Shape).
func EventsSQL(schema string, shape int) string { return buildQueries(schema).events[shape] }

// RelatedSQL returns the statement that reads what a grant in a tree meets on its related keys.
func RelatedSQL(schema string) string { return buildHoldQueries(schema, "c").related }

// TreeOneOutcome runs the one-round-trip grant of p (an exclusive request for a key of the tree
// of prefix) and says whether it decided (granted or refused) rather than handing the request
// back to the holds' transaction.
func (s *Store) TreeOneOutcome(ctx context.Context, p *store.AcquireParams, prefix string) (decided bool, l *store.Lease, err error) {
	l, how, err := s.acquireTreeOne(ctx, p, prefix, nil)
	return how != treeOneHandBack, l, err
}
