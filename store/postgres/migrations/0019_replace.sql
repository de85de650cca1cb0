-- Latest wins (store.PolicyReplace, store/jobs_replace.go): a policy "replace", a kind's debounce,
-- a final job state "superseded" and the job that superseded a job (jobs.superseded_by; 0 for
-- none). The state check is added NOT VALID and then validated, which scans the table without
-- blocking its writers; the indexes of finished jobs take superseded ones too.
ALTER TABLE job_kinds DROP CONSTRAINT job_kinds_policy_check;
ALTER TABLE job_kinds ADD CONSTRAINT job_kinds_policy_check CHECK (policy IN ('queue', 'skip', 'reject', 'replace'));
ALTER TABLE job_kinds ADD COLUMN debounce_ms bigint NOT NULL DEFAULT 0;

ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('scheduled', 'available', 'running', 'retryable',
    'succeeded', 'cancelled', 'discarded', 'skipped', 'superseded')) NOT VALID;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD COLUMN superseded_by bigint NOT NULL DEFAULT 0;

DROP INDEX jobs_finished;
CREATE INDEX jobs_finished ON jobs (finished_at)
    WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded');
DROP INDEX jobs_finished_by_resource;
CREATE INDEX jobs_finished_by_resource ON jobs (resource, id)
    WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped', 'superseded');

-- The audit log records a job that was not running and was superseded (job_superseded; its reason
-- names the replacement). A running one's end is its job_complete, outcome superseded.
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
    ELSIF NEW.state = 'superseded' THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, job_id, job_kind, attempt, outcome,
                            principal)
        VALUES ('job_superseded', NEW.resource, '', '', 0, '', 'superseded by job ' || NEW.superseded_by,
                NEW.id, NEW.kind, NEW.attempt, 'superseded', '');
    ELSIF NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'job_renew' AND e.token = NEW.token) THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt, principal)
        VALUES ('job_renew', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt,
                NEW.owner);
    END IF;
    RETURN NULL;
END
$$;

-- An audited schema's trigger lets superseded jobs through too (as audit.go creates it).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'jobs_audit' AND tgrelid = 'jobs'::regclass) THEN
        CREATE OR REPLACE TRIGGER jobs_audit AFTER UPDATE ON jobs
            FOR EACH ROW WHEN ((NEW.state = 'running') <> (OLD.state = 'running')
                OR (NEW.state = 'superseded' AND OLD.state <> 'superseded')
                OR (NEW.state = 'running' AND NEW.token = OLD.token AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at))
            EXECUTE FUNCTION jobs_audit();
    END IF;
END
$$;
