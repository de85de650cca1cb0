-- Beyond one at a time (store/holds.go): shared holders, leases on several keys, limits of N.
--
-- A lease that asks for more than one exclusive key keeps one holds row per key it holds (mode
-- 'exclusive' or 'shared') and per limit it takes a unit of (mode 'unit', key: the limit's line
-- key, E'\x1e' then its name, which no key can equal: keys hold no control characters). Each held
-- key's leases row sums its holds up with lease_id '' and job_id 0: held (ended 0) until the latest
-- expiry of its holds, available after the latest expiry plus lock-delay, so that the acquire
-- statement, a claim's gate and a fence see the key held without reading holds. The holds and
-- the rows change in one transaction that has locked the keys' leases rows (holds.go).
CREATE TABLE holds (
    lease_id      text        NOT NULL,
    key           text        COLLATE "C" NOT NULL,
    mode          text        NOT NULL CHECK (mode IN ('exclusive', 'shared', 'unit')),
    lease_key     text        COLLATE "C" NOT NULL, -- the lease's first key (its holder renews and releases by it)
    holder        text        NOT NULL,
    owner         text        NOT NULL DEFAULT '',
    token         bigint      NOT NULL,
    acquired_at   timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    ended         smallint    NOT NULL DEFAULT 0 CHECK (ended IN (0, 1, 2)), -- 0 live until expires_at, 1 released, 2 force-released
    cooldown_ms   bigint      NOT NULL,
    lock_delay_ms bigint      NOT NULL,
    metadata      jsonb,
    PRIMARY KEY (lease_id, key)
);
CREATE INDEX holds_by_key ON holds (key, ended, expires_at);

-- Limits: a named capacity (1..1,000,000), set by an admin. Its row is locked by every grant of
-- a unit, so units are counted and granted one grant at a time.
CREATE TABLE limits (
    name       text        COLLATE "C" PRIMARY KEY,
    capacity   int         NOT NULL CHECK (capacity BETWEEN 1 AND 1000000),
    updated_at timestamptz NOT NULL
);

-- A ticket's mode, and the first key of its request (its waiter subscribes by that key, and is
-- woken by it): a request for several keys and limits has one ticket in each of their lines, all
-- with the same created_at and seq (seq drawn once from the column's identity sequence).
ALTER TABLE tickets
    ADD COLUMN mode      text NOT NULL DEFAULT 'exclusive' CHECK (mode IN ('exclusive', 'shared')),
    ADD COLUMN lease_key text NOT NULL DEFAULT '';
-- A waiter that gives up leaves every line of its request (LeaveLine) by its lease ID.
CREATE INDEX tickets_by_lease ON tickets (lease_id);

-- The audit log names the limit of a unit's grant and end, and of a ticket in a limit's line
-- (its key is then the lease's first key).
ALTER TABLE events ADD COLUMN limit_name text NOT NULL DEFAULT '';

-- The end of a gated attempt wakes the front ticket's waiter by name, under the key it waits by
-- (the first key of its request).
CREATE OR REPLACE FUNCTION jobs_gate_end() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    marked boolean;
    cool timestamptz;
    front text;
BEGIN
    SELECT waiters INTO marked FROM leases WHERE key = NEW.resource AND job_id = NEW.id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL; -- a lease took the row over after the attempt's lease expired
    END IF;
    SELECT cooldown_until INTO cool FROM resources WHERE key = NEW.resource AND cooldown_until > now();
    UPDATE leases SET job_id = 0, expires_at = least(expires_at, now()), available_at = coalesce(cool, now()),
        ended = CASE WHEN cool IS NOT NULL THEN 3 ELSE 1 END, waiters = false
    WHERE key = NEW.resource;
    SELECT CASE WHEN lease_key <> '' THEN lease_key ELSE key END || E'\x1e' || lease_id INTO front
    FROM tickets WHERE key = NEW.resource AND expires_at > now()
        ORDER BY first DESC, created_at, seq LIMIT 1;
    IF front IS NOT NULL THEN
        PERFORM pg_notify('{channel}', front);
    ELSIF marked THEN
        PERFORM pg_notify('{channel}', NEW.resource);
    END IF;
    RETURN NULL;
END
$$;

-- Tickets in a limit's line are recorded under the lease's first key, naming the limit.
CREATE OR REPLACE FUNCTION tickets_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, principal, limit_name)
    VALUES (CASE WHEN NEW.first THEN 'ticket_first' ELSE 'ticket_enqueue' END,
            CASE WHEN starts_with(NEW.key, E'\x1e') THEN NEW.lease_key ELSE NEW.key END, NEW.lease_id, NEW.holder, 0,
            CASE WHEN NEW.first THEN NEW.actor ELSE NEW.holder END, NEW.reason, NEW.owner,
            CASE WHEN starts_with(NEW.key, E'\x1e') THEN substr(NEW.key, 2) ELSE '' END);
    RETURN NULL;
END
$$;

-- Holds: the grant of each key and limit unit a lease holds beyond one exclusive key, and its
-- end. A unit's event names the lease's first key and the limit. A hold that expires records
-- nothing, as a lease that expires does not. A grant is recorded at its acquired_at and an end at
-- its expires_at (the instant it ended), both read after the transaction took its locks, not at
-- the transaction's start. The summary rows (leases with lease_id '') record
-- nothing (leases_audit, migration 0010).
CREATE FUNCTION holds_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.token <> OLD.token THEN
        INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal, limit_name)
        VALUES (NEW.acquired_at, 'acquire', CASE WHEN NEW.mode = 'unit' THEN NEW.lease_key ELSE NEW.key END, NEW.lease_id, NEW.holder,
                NEW.token, NEW.holder, NEW.owner, CASE WHEN NEW.mode = 'unit' THEN substr(NEW.key, 2) ELSE '' END);
    ELSE
        INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal, limit_name)
        VALUES (NEW.expires_at, CASE WHEN NEW.ended = 1 THEN 'release' ELSE 'force_release' END,
                CASE WHEN NEW.mode = 'unit' THEN NEW.lease_key ELSE NEW.key END, NEW.lease_id, NEW.holder,
                NEW.token, NEW.holder, NEW.owner, CASE WHEN NEW.mode = 'unit' THEN substr(NEW.key, 2) ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;

-- A schema audited already records holds from this migration on (audit.go creates the same
-- triggers when audit is enabled later).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'leases'::regclass AND tgname = 'leases_audit_insert') THEN
        CREATE OR REPLACE TRIGGER holds_audit_insert AFTER INSERT ON holds
            FOR EACH ROW EXECUTE FUNCTION holds_audit();
        CREATE OR REPLACE TRIGGER holds_audit_update AFTER UPDATE ON holds
            FOR EACH ROW WHEN (NEW.token <> OLD.token OR (OLD.ended = 0 AND NEW.ended <> 0))
            EXECUTE FUNCTION holds_audit();
    END IF;
END
$$;
