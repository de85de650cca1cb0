-- The job queue. The execution record is the lock: a running job's row carries its own lease
-- (worker, token, lease_expires_at), and one running job per resource is enforced by a unique
-- index, whatever the code above does.
--
-- Runs with search_path set to the store's schema; names stay unqualified.

-- Kind definitions: every process and the server apply the same policy, guard and retry rules.
CREATE TABLE job_kinds (
    name          text COLLATE "C" PRIMARY KEY,
    policy        text    NOT NULL CHECK (policy IN ('queue', 'skip', 'reject')),
    max_attempts  int     NOT NULL CHECK (max_attempts >= 1),
    timeout_ms    bigint  NOT NULL DEFAULT 0,
    cooldown_ms   bigint  NOT NULL DEFAULT 0,
    from_states   text[]  NOT NULL DEFAULT '{}',
    running_state text    NOT NULL DEFAULT '',
    success_state text    NOT NULL DEFAULT '',
    failure_state text    NOT NULL DEFAULT '',
    -- A worker found nothing to claim and may be waiting: submits and promotions of this kind
    -- NOTIFY until then. Busy queues skip the NOTIFY, whose commit-time lock serialises commits.
    waiting_until timestamptz NOT NULL DEFAULT '-infinity'
);

-- One row per resource that ever had a job or a state. Submits and job ends lock it, so that the
-- head of a resource's queue is decided by one transaction at a time.
CREATE TABLE resources (
    key        text COLLATE "C" PRIMARY KEY,
    state      text        NOT NULL DEFAULT '',
    version    bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Per kind: no job of that kind starts on this resource before this time (kind cooldown).
    cooldowns  jsonb       NOT NULL DEFAULT '{}'
);

-- Queue position within a resource. Drawn under the resource's row lock, so per resource it
-- follows submission order; a manual retry draws a new one (back of the queue).
CREATE SEQUENCE job_seq AS bigint;

CREATE TABLE jobs (
    id               bigserial PRIMARY KEY,
    seq              bigint      NOT NULL,
    kind             text COLLATE "C" NOT NULL,
    resource         text COLLATE "C" NOT NULL REFERENCES resources (key),
    args             jsonb       NOT NULL DEFAULT '{}',
    state            text        NOT NULL CHECK (state IN ('scheduled', 'available', 'running', 'retryable',
                                                           'succeeded', 'cancelled', 'discarded', 'skipped')),
    -- The oldest unfinished job of its resource: the only one that may be claimed.
    head             boolean     NOT NULL DEFAULT false,
    attempt          int         NOT NULL DEFAULT 0,
    max_attempts     int         NOT NULL,
    priority         smallint    NOT NULL DEFAULT 0,
    idempotency_key  text,
    errors           jsonb       NOT NULL DEFAULT '[]',
    created_at       timestamptz NOT NULL DEFAULT now(),
    scheduled_at     timestamptz NOT NULL,
    attempted_at     timestamptz,
    finished_at      timestamptz,
    -- The latest attempt's lease. token comes from token_seq, shared with leases.
    worker           text        NOT NULL DEFAULT '',
    token            bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    cancel_requested boolean     NOT NULL DEFAULT false,
    timeout_ms       bigint      NOT NULL DEFAULT 0,
    CHECK (NOT head OR state IN ('scheduled', 'available', 'running', 'retryable'))
);

-- The last line of defence: at most one running job per resource.
CREATE UNIQUE INDEX jobs_one_running_per_resource ON jobs (resource) WHERE state = 'running';
-- At most one head per resource: the queue order has one front.
CREATE UNIQUE INDEX jobs_one_head_per_resource ON jobs (resource) WHERE head;
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
