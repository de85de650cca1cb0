-- Owners (store.AcquireParams.Owner, store.ClaimParams.Owner): a lease and a job attempt belong
-- to the principal a server with authentication took them as; library callers have none (''),
-- which is also what every lease and attempt of an older schema belongs to. The statements that
-- renew, release, heartbeat and end them compare it in their WHERE clause. A column with a
-- constant default is added without rewriting the table.
ALTER TABLE leases
    ADD COLUMN owner         text NOT NULL DEFAULT '',
    -- Who force-released the lease or cleared its rest, as authenticated
    -- (ForceReleaseParams.Principal), beside end_actor (what the caller said).
    ADD COLUMN end_principal text NOT NULL DEFAULT '';
ALTER TABLE jobs
    -- The latest attempt's owner, next to its worker.
    ADD COLUMN owner  text    NOT NULL DEFAULT '',
    -- Whether the reaper ended the latest attempt (the store's own change, which the audit log
    -- records with no principal) rather than its owner; set when an attempt starts or ends.
    ADD COLUMN reaped boolean NOT NULL DEFAULT false;
-- The authenticated principal of each change (store.Event.Principal): the owner of the lease or
-- attempt, the admin of a force-release, a cleared rest or a cleared resource cooldown.
ALTER TABLE events ADD COLUMN principal text NOT NULL DEFAULT '';

-- The audit functions of 0001 and 0005, recording the principal. The triggers that call them
-- (audit.go) stay as they are.
CREATE OR REPLACE FUNCTION leases_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
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

CREATE OR REPLACE FUNCTION jobs_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.state = 'running' AND OLD.state <> 'running' THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt, principal)
        VALUES ('job_claim', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt,
                NEW.owner);
    ELSIF OLD.state = 'running' AND NEW.state <> 'running' THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, job_id, job_kind, attempt, outcome,
                            principal)
        VALUES ('job_complete', NEW.resource, '', OLD.worker, OLD.token, OLD.worker,
                CASE WHEN NEW.state <> 'succeeded' AND (NEW.errors -> -1 ->> 'attempt')::int = OLD.attempt
                     THEN coalesce(NEW.errors -> -1 ->> 'code', '') ELSE '' END,
                NEW.id, NEW.kind, OLD.attempt, NEW.state, CASE WHEN NEW.reaped THEN '' ELSE OLD.owner END);
    ELSIF NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'job_renew' AND e.token = NEW.token) THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt, principal)
        VALUES ('job_renew', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt,
                NEW.owner);
    END IF;
    RETURN NULL;
END
$$;
