-- Leases: one row per key, ever. Release and force-release mark the row ended instead of deleting
-- it, so a key's history never restarts and every grant after the first draws its token inside the
-- row lock (see lease.go).
--
-- Runs with search_path set to the store's schema; names stay unqualified.

-- One store-wide sequence: tokens increase across keys, releases, expiries and restarts.
CREATE SEQUENCE token_seq AS bigint;

CREATE TABLE leases (
    -- "C" collation: byte order, as Go sorts strings, so List pages are ordered as callers expect
    -- and key >= prefix is an exact lower bound of the prefix range.
    key           text COLLATE "C" PRIMARY KEY,
    lease_id      text        NOT NULL,
    holder        text        NOT NULL,
    token         bigint      NOT NULL,
    acquired_at   timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    -- 0 live until expires_at, 1 released, 2 force-released.
    ended         smallint    NOT NULL DEFAULT 0 CHECK (ended IN (0, 1, 2)),
    -- The key may be granted to a new lease at or after this instant.
    available_at  timestamptz NOT NULL,
    cooldown_ms   bigint      NOT NULL,
    lock_delay_ms bigint      NOT NULL,
    metadata      jsonb,
    -- A waiting acquire was refused while this lease was live: its release must NOTIFY. Releases
    -- nobody waits for skip the NOTIFY, whose commit-time lock serialises all notifying commits.
    waiters       boolean     NOT NULL DEFAULT false,
    -- This grant took over an expired lease that was never released (a crashed holder).
    took_over     boolean     NOT NULL DEFAULT false
) WITH (fillfactor = 80); -- room for HOT updates: only the primary key is indexed
