-- The job queue (the model is store/postgres/migrations/0002_jobs.sql). The execution record is
-- the lock: a running job's row carries its own lease (worker, token, lease_expires_at), and one
-- running job per resource is enforced by a unique index, whatever the code above does.
-- Times are Unix nanoseconds on the store's clock, durations nanoseconds; lists and maps are JSON
-- text. Every write runs in one BEGIN IMMEDIATE transaction, so SQLite's write lock plays the part
-- of PostgreSQL's row locks.

-- Kind definitions: every process and the server apply the same policy, guard and retry rules.
CREATE TABLE job_kinds (
    name          TEXT    NOT NULL PRIMARY KEY,
    policy        TEXT    NOT NULL CHECK (policy IN ('queue', 'skip', 'reject')),
    max_attempts  INTEGER NOT NULL CHECK (max_attempts >= 1),
    timeout_ns    INTEGER NOT NULL DEFAULT 0,
    cooldown_ns   INTEGER NOT NULL DEFAULT 0,
    from_states   TEXT    NOT NULL DEFAULT '[]', -- JSON array of states
    running_state TEXT    NOT NULL DEFAULT '',
    success_state TEXT    NOT NULL DEFAULT '',
    failure_state TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- One row per resource that ever had a job or a state.
CREATE TABLE resources (
    key        TEXT    NOT NULL PRIMARY KEY,
    state      TEXT    NOT NULL DEFAULT '',
    version    INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL,
    -- Per kind: no job of that kind starts on this resource before this time (kind cooldown).
    -- A JSON object {kind: unix ns}.
    cooldowns  TEXT    NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- Queue position within a resource, drawn under the write lock, so it follows submission order;
-- a manual retry draws a new one (back of the queue). Fencing tokens come from the 'token' row,
-- shared with leases.
INSERT INTO counters (name, value) VALUES ('job_seq', 0);

-- AUTOINCREMENT: the cleaner deletes the newest rows too, and a job ID must never be reused.
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    seq              INTEGER NOT NULL,
    kind             TEXT    NOT NULL,
    resource         TEXT    NOT NULL REFERENCES resources (key),
    args             TEXT    NOT NULL DEFAULT '{}',
    state            TEXT    NOT NULL CHECK (state IN ('scheduled', 'available', 'running', 'retryable',
                                                       'succeeded', 'cancelled', 'discarded', 'skipped')),
    -- The oldest unfinished job of its resource: the only one that may be claimed.
    head             INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT,
    errors           TEXT    NOT NULL DEFAULT '[]', -- JSON array of {attempt, at (unix ns), code, message}
    created_at       INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    attempted_at     INTEGER,
    finished_at      INTEGER,
    -- The latest attempt's lease.
    worker           TEXT    NOT NULL DEFAULT '',
    token            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    timeout_ns       INTEGER NOT NULL DEFAULT 0,
    CHECK (head IN (0, 1) AND cancel_requested IN (0, 1)),
    CHECK (NOT head OR state IN ('scheduled', 'available', 'running', 'retryable'))
);

-- The last line of defence: at most one running job per resource.
CREATE UNIQUE INDEX jobs_one_running_per_resource ON jobs (resource) WHERE state = 'running';
-- Idempotency keys are unique among jobs that exist (the cleaner frees them).
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Claiming: heads only, so blocked jobs behind a head are never scanned.
CREATE INDEX jobs_claimable ON jobs (kind, priority, seq)
    WHERE head AND state IN ('scheduled', 'available', 'retryable');
-- A resource's unfinished jobs in queue order: submit's busy check, promotion of the next head.
CREATE INDEX jobs_unfinished_by_resource ON jobs (resource, seq)
    WHERE state IN ('scheduled', 'available', 'running', 'retryable');
-- The reaper.
CREATE INDEX jobs_running_by_lease ON jobs (lease_expires_at) WHERE state = 'running';
-- The cleaner and the dead-letter view.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped');
-- Listing by state or by resource.
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_resource ON jobs (resource, id);
