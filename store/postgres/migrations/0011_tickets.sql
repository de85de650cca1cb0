-- One resource, one line: a waiting lock request is a ticket in its key's line, beside the key's
-- unfinished jobs. A ticket's place is its arrival (created_at, when its waiter was first
-- refused); a break-glass ticket (first) goes before every other ticket and job. The waiter keeps
-- it alive by retrying (each refused attempt moves expires_at on by the lease TTL); an expired
-- ticket is skipped by everyone, and its waiter's next refusal starts it again at the back. The
-- acquire statement enqueues and ends tickets in the step that refuses or grants.
CREATE TABLE tickets (
    key        text        NOT NULL,
    lease_id   text        NOT NULL,
    holder     text        NOT NULL,
    owner      text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    first      boolean     NOT NULL DEFAULT false,
    actor      text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    -- Orders tickets of one arrival instant by when they were enqueued.
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (key, lease_id)
);
CREATE INDEX tickets_line ON tickets (key, first DESC, created_at, seq);

-- The end of a gated attempt wakes the front ticket's waiter by name (payload key, then \x1e and
-- its lease ID), or, with no ticket, the waiters marked on the row.
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
    SELECT lease_id INTO front FROM tickets WHERE key = NEW.resource AND expires_at > now()
        ORDER BY first DESC, created_at, seq LIMIT 1;
    IF front IS NOT NULL THEN
        PERFORM pg_notify('{channel}', NEW.resource || E'\x1e' || front);
    ELSIF marked THEN
        PERFORM pg_notify('{channel}', NEW.resource);
    END IF;
    RETURN NULL;
END
$$;

-- The audit log records a ticket when it joins the line (ticket_enqueue, or ticket_first for a
-- break-glass request, with its reason) and when it rejoins after expiring or is moved to the
-- front; its grant is the lease's acquire. The trigger is created with the others when audit is
-- enabled (audit.go).
CREATE FUNCTION tickets_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, principal)
    VALUES (CASE WHEN NEW.first THEN 'ticket_first' ELSE 'ticket_enqueue' END, NEW.key, NEW.lease_id, NEW.holder, 0,
            CASE WHEN NEW.first THEN NEW.actor ELSE NEW.holder END, NEW.reason, NEW.owner);
    RETURN NULL;
END
$$;

-- A schema audited already records tickets from this migration on.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'leases'::regclass AND tgname = 'leases_audit_insert') THEN
        CREATE OR REPLACE TRIGGER tickets_audit_insert AFTER INSERT ON tickets
            FOR EACH ROW EXECUTE FUNCTION tickets_audit();
        CREATE OR REPLACE TRIGGER tickets_audit_update AFTER UPDATE ON tickets
            FOR EACH ROW WHEN (NEW.created_at <> OLD.created_at OR NEW.first <> OLD.first)
            EXECUTE FUNCTION tickets_audit();
    END IF;
END
$$;
