package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/store"
)

// Tokens across a failover (docs/guarantees.md, "PostgreSQL failover").
//
// Every token is drawn from one sequence. A replica promoted after its primary died may lag what
// the primary handed out: its sequence would hand out tokens again that holders of the lost grants
// still carry, and a fence would take a late write of theirs for a new one. PostgreSQL gives every
// promotion a new timeline, greater than every timeline before it. So tokens carry the timeline in
// their high bits: each new connection of the store, before its first statement, raises the
// sequence to at least (timeline − 1) << epochBits. The tokens of timeline T are then at least
// (T−1)·2^40, and every token of an earlier timeline is below that, as long as a timeline hands
// out fewer than 2^40 (a million a second for 12 days). Timeline 1 keeps the plain sequence.
//
// The grants lost with the old primary may also still be held: their holders run on. So a
// timeline first seen after an earlier one starts a quarantine: for Config.FailoverQuarantine
// from when the store first saw it, the store grants no lease and starts no job attempt
// (RestingError, reason store.ReasonFailover), until every lease granted before the failover has
// expired. Renewals go on: a holder whose grant reached the replica keeps its lease; one whose
// grant was lost is refused at its next renew and stops.
//
// A connection to a standby (in recovery) is refused: pg_current_wal_lsn() fails there.

// skipEpochs turns the guard off: only tests set it, to show what a failover does without it.
var skipEpochs atomic.Bool

// epochBits is where a timeline's tokens start: (timeline − 1) << epochBits.
const epochBits = 40

// failoverGuard is a store's view of its database's timeline and quarantine. The pool's
// AfterConnect (Open) and the store's opening run prepare; grants ask check.
type failoverGuard struct {
	schema     string
	quarantine time.Duration
	// report, if set, receives what prepare read instead of the guard itself (AfterConnect's
	// probe, which reports to the stores of its schema).
	report func(tl int32, first time.Time, earlier bool, now time.Time)

	mu       sync.Mutex
	timeline int32     // the latest timeline seen
	until    time.Time // end of the quarantine on this process's clock (monotonic); zero: none
}

// prepareSQL raises the token sequence to the current timeline's epoch and records the timeline;
// it returns the timeline, when the store first saw it, whether an earlier one was seen before
// it, the database's clock, and whether it raised the sequence.
// The caller holds the epoch lock, so that two connections cannot both see the sequence below
// the epoch and the second set it back after the first's connection drew tokens above it.
var prepareSQL = `WITH tl AS (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int AS t),
ins AS (INSERT INTO {epochs} (timeline, first_seen) SELECT t, now() FROM tl ON CONFLICT (timeline) DO NOTHING RETURNING first_seen),
raised AS (SELECT CASE WHEN (SELECT last_value FROM {seq}) < (tl.t::bigint - 1) << {bits}
	THEN setval('{seqname}', (tl.t::bigint - 1) << {bits}) END AS v FROM tl)
SELECT tl.t, coalesce((SELECT first_seen FROM ins), (SELECT e.first_seen FROM {epochs} e WHERE e.timeline = tl.t)),
	EXISTS (SELECT 1 FROM {epochs} e WHERE e.timeline < tl.t), now(), (SELECT v FROM raised) IS NOT NULL
FROM tl`

// newGuard is the guard of schema's store with quarantine q (0: store.MaxTTL).
func newGuard(schema string, q time.Duration) *failoverGuard {
	if q <= 0 {
		q = store.MaxTTL
	}
	return &failoverGuard{schema: schema, quarantine: q}
}

// sql is prepareSQL for the guard's schema.
func (g *failoverGuard) sql() string {
	seq := pgx.Identifier{g.schema, "token_seq"}.Sanitize()
	return strings.NewReplacer("{epochs}", pgx.Identifier{g.schema, "token_epochs"}.Sanitize(),
		"{seq}", seq, "{seqname}", seq, "{bits}", strconv.Itoa(epochBits)).Replace(prepareSQL)
}

// prepare runs on conn before its first statement for the store: it raises the token sequence
// to the timeline's epoch and learns whether the timeline is in quarantine. A schema not yet
// migrated is left alone (it issued no token yet).
func (g *failoverGuard) prepare(ctx context.Context, conn *pgx.Conn) error {
	if skipEpochs.Load() {
		return nil
	}
	var ready bool
	err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{g.schema, "token_epochs"}.Sanitize()).Scan(&ready)
	if err != nil || !ready {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('baton token epochs ' || $1::text))`, g.schema); err != nil {
		return err
	}
	var tl int32
	var first, now time.Time
	var earlier, raised bool
	if err := tx.QueryRow(ctx, g.sql()).Scan(&tl, &first, &earlier, &now, &raised); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55000" { // object_not_in_prerequisite_state: in recovery
			return fmt.Errorf("postgres: the server is a standby (in recovery), not a primary: %w", err)
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if g.report != nil {
		g.report(tl, first, earlier, now)
		return nil
	}
	g.saw(tl, first, earlier, now)
	return nil
}

// saw records timeline tl, first seen at first (database clock, now when read): in quarantine
// until first+quarantine if an earlier timeline was seen before it.
func (g *failoverGuard) saw(tl int32, first time.Time, earlier bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if tl < g.timeline {
		return // an older connection's report
	}
	g.timeline = tl
	g.until = time.Time{}
	if left := first.Add(g.quarantine).Sub(now); earlier && left > 0 {
		g.until = time.Now().Add(left)
	}
}

// check refuses a grant of key while the quarantine lasts.
func (g *failoverGuard) check(key string) error {
	g.mu.Lock()
	until := g.until
	g.mu.Unlock()
	if until.IsZero() {
		return nil
	}
	if left := time.Until(until); left > 0 {
		return &store.RestingError{Key: key, Reason: store.ReasonFailover, Remaining: left}
	}
	return nil
}

// prepareOne runs prepare on one connection of the pool: at open, after the migration, so that
// the store knows the timeline even if every connection was made before the epochs table was.
func (s *Store) prepareOne(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return s.guard.prepare(ctx, c.Conn())
}

// guards are the guards of the stores of this process built by New, by schema: a caller's pool
// that runs AfterConnect reports to them.
var guards = struct {
	sync.Mutex
	by map[string][]*failoverGuard
}{by: map[string][]*failoverGuard{}}

func registerGuard(g *failoverGuard) (unregister func()) {
	guards.Lock()
	defer guards.Unlock()
	guards.by[g.schema] = append(guards.by[g.schema], g)
	return func() {
		guards.Lock()
		defer guards.Unlock()
		gs := guards.by[g.schema]
		for i, x := range gs {
			if x == g {
				guards.by[g.schema] = append(gs[:i:i], gs[i+1:]...)
				break
			}
		}
		if len(guards.by[g.schema]) == 0 {
			delete(guards.by, g.schema)
		}
	}
}

// AfterConnect is the hook a pool given to New should run on each new connection
// (pgxpool.Config.AfterConnect), as Open's pool does: it raises the token sequence of schema
// ("" for DefaultSchema) to the connection's timeline before the pool uses the connection, and
// tells the stores of schema in this process built by New of a failover, so that they hold
// grants back for their quarantine. A connection to a standby fails. Without it, a store built by
// New learns the timeline only when it opens.
func AfterConnect(schema string) func(context.Context, *pgx.Conn) error {
	if schema == "" {
		schema = DefaultSchema
	}
	return func(ctx context.Context, conn *pgx.Conn) error {
		probe := &failoverGuard{schema: schema, report: func(tl int32, first time.Time, earlier bool, now time.Time) {
			guards.Lock()
			gs := slices.Clone(guards.by[schema])
			guards.Unlock()
			for _, g := range gs {
				g.saw(tl, first, earlier, now)
			}
		}}
		return probe.prepare(ctx, conn)
	}
}

// grantConn acquires a connection for a grant of key and checks the failover guard after: a
// connection made on a new timeline reported it (AfterConnect) before the pool hands it out, so
// no grant runs on a promoted replica before the store knows of its quarantine. A check before
// the acquire would let the grant that makes the first connection through.
func (s *Store) grantConn(ctx context.Context, key string) (*pgxpool.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.guard.check(key); err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

// grantRow runs the grant statement sql on a connection from grantConn; the row's Scan returns
// the guard's refusal, if any, and releases the connection.
func (s *Store) grantRow(ctx context.Context, key, sql string, args ...any) pgx.Row {
	c, err := s.grantConn(ctx, key)
	if err != nil {
		return errRow{err}
	}
	return releasingRow{c.QueryRow(ctx, sql, args...), c}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type releasingRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r releasingRow) Scan(dest ...any) error {
	defer r.c.Release()
	return r.row.Scan(dest...)
}
