-- One resource, one line: a key is one resource for leases and jobs alike. A live lease and a
-- running job attempt on the same key exclude each other.
--
-- The leases row of a key is the one record of who holds it, once the key has been locked at
-- least once ("a lock key"): a job attempt on a lock key holds the row as its gate (job_id = the
-- job, holder 'job:<id>', lease_id '', token the attempt's, expires_at the attempt's lease), so
-- the acquire statement, unchanged, refuses the key while the attempt is live, and the claim
-- takes the row under its row lock, drawing the token there: per key, tokens strictly increase
-- across leases and attempts. Keys that were never locked have no row and cost claims nothing
-- but an index probe. See lease.go (acquire), jobs_sql.go (claimSQL) and resource_line.go.

-- The job attempt that holds the row (0: none).
ALTER TABLE leases ADD COLUMN job_id bigint NOT NULL DEFAULT 0;
-- 3: resting after a job, until the resource cooldown of the job's kind ends.
ALTER TABLE leases DROP CONSTRAINT leases_ended_check;
ALTER TABLE leases ADD CONSTRAINT leases_ended_check CHECK (ended IN (0, 1, 2, 3));
-- The resource has been locked at least once (its leases row exists): lock-only keys are resources.
ALTER TABLE resources ADD COLUMN locks boolean NOT NULL DEFAULT false;
-- The job's attempts take the key's leases row as their gate. Set true on the unfinished jobs of a
-- key when it first becomes a lock key (resource_line.go), so that a claim whose snapshot predates
-- that sees it on the row it locks. A claim sets it on the attempt it starts (true: it holds the
-- gate; false: the key has no leases row), so that only gated attempts' ends fire jobs_gate_end,
-- and the end of the attempt sets it back to NULL.
ALTER TABLE jobs ADD COLUMN gated boolean;

-- Existing databases: every key with a leases row is a lock key; its unfinished jobs are gated;
-- a live running attempt on a key whose row is free takes the row. (An attempt and a lease that
-- both hold a key now, granted by an earlier version, are left as they are: each ends on its own.)
INSERT INTO resources (key, locks) SELECT key, true FROM leases ON CONFLICT (key) DO UPDATE SET locks = true;
UPDATE jobs j SET gated = true
WHERE j.state IN ('scheduled', 'available', 'running', 'retryable')
    AND EXISTS (SELECT 1 FROM leases l WHERE l.key = j.resource);
UPDATE jobs SET gated = false WHERE state = 'running' AND gated IS NULL;
UPDATE leases l SET job_id = j.id, lease_id = '', holder = 'job:' || j.id, owner = j.owner, token = j.token,
    acquired_at = now(), expires_at = j.lease_expires_at, available_at = j.lease_expires_at, ended = 0,
    took_over = false, metadata = NULL, cooldown_ms = 0, lock_delay_ms = 0
FROM jobs j
WHERE j.resource = l.key AND j.state = 'running' AND j.lease_expires_at > now() AND l.available_at <= now();

-- Processes of earlier versions know nothing of gates. These constraints make the two things
-- they would get wrong fail instead: their claims do not set gated (so a job they start could run
-- beside a lease), and their grants do not clear job_id (so a lease they grant over an expired
-- attempt's gate would be freed when that attempt ends). New code always sets both.
ALTER TABLE jobs ADD CONSTRAINT jobs_running_gated CHECK (state <> 'running' OR gated IS NOT NULL);
ALTER TABLE leases ADD CONSTRAINT leases_gate_is_the_stores CHECK (job_id = 0 OR lease_id = '');

-- The first grant ever of a key inserts its row. If the key is already a resource (jobs were
-- submitted to it, or its state was set), the insert is refused with SQLSTATE BTN01 and the store
-- first makes it a lock key (markLockKey in resource_line.go), which waits out claims in flight;
-- the acquire is then retried. Otherwise the key becomes a resource here: a submit to it waits for
-- this row (its insert of the resources row conflicts) and finds the key locked. Gate rows
-- (lease_id '') are the store's own and pass.
CREATE FUNCTION leases_first_grant() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- Read first, which waits for nobody: an insert that met a resources row locked by another
    -- transaction would wait for it, and that one may be waiting for this new leases row.
    PERFORM FROM resources WHERE key = NEW.key;
    IF FOUND THEN
        RAISE EXCEPTION 'baton: key % is a resource that has not been locked before', NEW.key
            USING ERRCODE = 'BTN01';
    END IF;
    INSERT INTO resources (key, locks) VALUES (NEW.key, true) ON CONFLICT (key) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'baton: key % is a resource that has not been locked before', NEW.key
            USING ERRCODE = 'BTN01';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER leases_first_grant AFTER INSERT ON leases
    FOR EACH ROW WHEN (NEW.lease_id <> '') EXECUTE FUNCTION leases_first_grant();

-- When an attempt that holds its key's row ends (completed, failed, cancelled, reaped; any path,
-- any version), the row is freed in the same transaction: resting until the resource's cooldown
-- if one began (ended 3), else free now (ended 1). Lock waiters marked on the row are woken.
-- Fires only for gated attempts (the WHEN clause), after the ending statement has updated the
-- resources row, which it reads.
CREATE FUNCTION jobs_gate_end() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    marked boolean;
    cool timestamptz;
BEGIN
    SELECT waiters INTO marked FROM leases WHERE key = NEW.resource AND job_id = NEW.id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL; -- a lease took the row over after the attempt's lease expired
    END IF;
    SELECT cooldown_until INTO cool FROM resources WHERE key = NEW.resource AND cooldown_until > now();
    UPDATE leases SET job_id = 0, expires_at = least(expires_at, now()), available_at = coalesce(cool, now()),
        ended = CASE WHEN cool IS NOT NULL THEN 3 ELSE 1 END, waiters = false
    WHERE key = NEW.resource;
    IF marked THEN
        PERFORM pg_notify('{channel}', NEW.resource);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_gate_end AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state <> 'running' AND OLD.gated)
    EXECUTE FUNCTION jobs_gate_end();

-- The audit log records leases, not gates: a gate row's changes (job_id set before or after) and
-- the store's own rows (lease_id '') are the job's, which jobs_audit records.
CREATE OR REPLACE FUNCTION leases_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.job_id <> 0 OR NEW.lease_id = '' OR (TG_OP = 'UPDATE' AND OLD.job_id <> 0) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.lease_id <> OLD.lease_id THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, principal)
        VALUES (CASE WHEN NEW.took_over THEN 'expiry_takeover' ELSE 'acquire' END,
                NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner);
    ELSIF NEW.ended = 1 THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, principal)
        VALUES ('release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner);
    ELSE
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, principal)
        VALUES ('force_release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.end_actor, NEW.end_reason,
                NEW.end_principal);
    END IF;
    RETURN NULL;
END
$$;
