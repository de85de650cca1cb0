-- Job events in the audit log: claims, the first renewal of each attempt and completions,
-- written by a trigger on jobs (created with the lease triggers when a store opens with
-- Config.Audit, see audit.go) in the statement that claims, renews or ends the attempt, so no
-- path can skip them and none costs a round trip. Lease events leave these columns empty.
ALTER TABLE events
    ADD COLUMN job_id   bigint NOT NULL DEFAULT 0,
    ADD COLUMN job_kind text   NOT NULL DEFAULT '',
    ADD COLUMN attempt  int    NOT NULL DEFAULT 0,
    ADD COLUMN outcome  text   NOT NULL DEFAULT '';

-- "Has this attempt (its token) been renewed before?": heartbeats come every TTL/3, and only the
-- first of each attempt is recorded, so that the log shows the worker was alive without one row
-- per heartbeat.
CREATE INDEX events_job_renew ON events (token) WHERE kind = 'job_renew';

-- key is the job's resource, holder and actor its worker, token the attempt's fencing token.
-- A completion's outcome is the state the attempt ended in; its reason, the error code of that
-- attempt (worker_timeout when the reaper ended it), if it failed.
CREATE FUNCTION jobs_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.state = 'running' AND OLD.state <> 'running' THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt)
        VALUES ('job_claim', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt);
    ELSIF OLD.state = 'running' AND NEW.state <> 'running' THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, job_id, job_kind, attempt, outcome)
        VALUES ('job_complete', NEW.resource, '', OLD.worker, OLD.token, OLD.worker,
                CASE WHEN NEW.state <> 'succeeded' AND (NEW.errors -> -1 ->> 'attempt')::int = OLD.attempt
                     THEN coalesce(NEW.errors -> -1 ->> 'code', '') ELSE '' END,
                NEW.id, NEW.kind, OLD.attempt, NEW.state);
    ELSIF NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'job_renew' AND e.token = NEW.token) THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt)
        VALUES ('job_renew', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt);
    END IF;
    RETURN NULL;
END
$$;
