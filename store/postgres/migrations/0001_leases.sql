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
    took_over     boolean     NOT NULL DEFAULT false,
    -- Who force-released the lease, and why (for the audit log).
    end_actor     text        NOT NULL DEFAULT '',
    end_reason    text        NOT NULL DEFAULT ''
) WITH (fillfactor = 80); -- room for HOT updates: only the primary key is indexed

-- The audit log: written by triggers (created when a store opens with Config.Audit, see
-- audit.go), in the transaction of the change itself, so no statement that changes a lease can
-- skip it. Renewals and waiter flags write nothing.
CREATE TABLE events (
    id       bigserial   PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    kind     text        NOT NULL,
    key      text        COLLATE "C" NOT NULL,
    lease_id text        NOT NULL,
    holder   text        NOT NULL,
    token    bigint      NOT NULL,
    actor    text        NOT NULL,
    reason   text        NOT NULL DEFAULT ''
);
CREATE INDEX events_by_key ON events (key, id);

-- search_path is pinned to this schema at creation: callers' sessions have their own.
CREATE FUNCTION leases_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.lease_id <> OLD.lease_id THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor)
        VALUES (CASE WHEN NEW.took_over THEN 'expiry_takeover' ELSE 'acquire' END,
                NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder);
    ELSIF NEW.ended = 1 THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor)
        VALUES ('release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder);
    ELSE
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason)
        VALUES ('force_release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.end_actor, NEW.end_reason);
    END IF;
    RETURN NULL;
END
$$;
