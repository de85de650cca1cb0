-- Latest wins (store.PolicyReplace, store/jobs_replace.go): a policy "replace", a kind's debounce,
-- a final job state "superseded" and the job that superseded a job (jobs.superseded_by; 0 for
-- none). SQLite cannot change a CHECK constraint in place, so job_kinds and jobs are rebuilt the
-- way SQLite documents (create the new table, copy, drop the old, rename), in this migration's
-- transaction, with every index of jobs created again. The audit triggers on jobs go with the old
-- table; migrate re-creates them in this same transaction (see applyOne).

CREATE TABLE job_kinds_new (
    name                 TEXT    NOT NULL PRIMARY KEY,
    policy               TEXT    NOT NULL CHECK (policy IN ('queue', 'skip', 'reject', 'replace')),
    max_attempts         INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout_ns           INTEGER NOT NULL DEFAULT 0,
    cooldown_ns          INTEGER NOT NULL DEFAULT 0,
    from_states          TEXT    NOT NULL DEFAULT '[]',
    running_state        TEXT    NOT NULL DEFAULT '',
    success_state        TEXT    NOT NULL DEFAULT '',
    failure_state        TEXT    NOT NULL DEFAULT '',
    resource_cooldown_ns INTEGER NOT NULL DEFAULT 0,
    mode                 TEXT    NOT NULL DEFAULT '',
    limits               TEXT    NOT NULL DEFAULT '[]',
    debounce_ns          INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO job_kinds_new (name, policy, max_attempts, timeout_ns, cooldown_ns, from_states, running_state,
        success_state, failure_state, resource_cooldown_ns, mode, limits)
    SELECT name, policy, max_attempts, timeout_ns, cooldown_ns, from_states, running_state,
        success_state, failure_state, resource_cooldown_ns, mode, limits FROM job_kinds;
DROP TABLE job_kinds;
ALTER TABLE job_kinds_new RENAME TO job_kinds;

CREATE TABLE jobs_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    seq              INTEGER NOT NULL,
    kind             TEXT    NOT NULL,
    resource         TEXT    NOT NULL REFERENCES resources (key),
    args             TEXT    NOT NULL DEFAULT '{}',
    state            TEXT    NOT NULL CHECK (state IN ('scheduled', 'available', 'running', 'retryable',
                                                       'succeeded', 'cancelled', 'discarded', 'skipped', 'superseded')),
    head             INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT,
    errors           TEXT    NOT NULL DEFAULT '[]',
    created_at       INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    attempted_at     INTEGER,
    finished_at      INTEGER,
    worker           TEXT    NOT NULL DEFAULT '',
    token            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    timeout_ns       INTEGER NOT NULL DEFAULT 0,
    owner            TEXT    NOT NULL DEFAULT '',
    reaped           INTEGER NOT NULL DEFAULT 0 CHECK (reaped IN (0, 1)),
    beyond           TEXT,
    superseded_by    INTEGER NOT NULL DEFAULT 0,
    CHECK (head IN (0, 1) AND cancel_requested IN (0, 1)),
    CHECK (NOT head OR state IN ('scheduled', 'available', 'running', 'retryable'))
);
INSERT INTO jobs_new (id, seq, kind, resource, args, state, head, attempt, max_attempts, priority, idempotency_key,
        errors, created_at, scheduled_at, attempted_at, finished_at, worker, token, lease_expires_at,
        cancel_requested, timeout_ns, owner, reaped, beyond)
    SELECT id, seq, kind, resource, args, state, head, attempt, max_attempts, priority, idempotency_key,
        errors, created_at, scheduled_at, attempted_at, finished_at, worker, token, lease_expires_at,
        cancel_requested, timeout_ns, owner, reaped, beyond FROM jobs;
-- A job ID is never reused: the new table continues the old one's AUTOINCREMENT sequence (its
-- newest rows may have been deleted by the cleaner).
DELETE FROM sqlite_sequence WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs';
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

-- The indexes of jobs (migrations 0002, 0006, 0010, 0012), the cleaner's with superseded jobs.
CREATE UNIQUE INDEX jobs_one_running_per_resource
    ON jobs (resource, iif(beyond IS NOT NULL AND json_extract(beyond, '$.shared'), id, 0))
    WHERE state = 'running';
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_claimable ON jobs (kind, priority, seq)
    WHERE head AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX jobs_unfinished_by_resource ON jobs (resource, seq)
    WHERE state IN ('scheduled', 'available', 'running', 'retryable');
CREATE INDEX jobs_running_by_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at)
    WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded');
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_resource ON jobs (resource, id);
CREATE INDEX jobs_unfinished_by_kind ON jobs (state, kind)
    WHERE state IN ('scheduled', 'available', 'running', 'retryable');
CREATE INDEX jobs_beyond_heads ON jobs (priority, seq)
    WHERE head AND beyond IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
