-- Jobs beyond one key (store/jobs_holds.go): a job may hold its resource shared, hold extra
-- resources and take a unit of limits. Such a job's attempt is granted like a lease that asks the
-- same (holds.go), under the lease ID store.JobLeaseID(id): its exclusion is through holds rows
-- and the keys' summary rows, not through a gate.

-- A kind's mode ('' or 'exclusive': exclusive; 'shared') and limit templates.
ALTER TABLE job_kinds
    ADD COLUMN mode   text   NOT NULL DEFAULT '',
    ADD COLUMN limits text[] NOT NULL DEFAULT '{}';

-- A job's resolved mode, extra resources and limits (NULL or empty when none), and whether its
-- attempts are granted through holds (shared, or resources, or limits): the plain claim leaves
-- those jobs to the holds claim (jobs_beyond.go).
ALTER TABLE jobs
    ADD COLUMN shared    boolean NOT NULL DEFAULT false,
    ADD COLUMN resources text[],
    ADD COLUMN limits    text[],
    ADD COLUMN holds     boolean NOT NULL DEFAULT false;

-- The claimable heads granted through holds, in claim order per kind (usually none).
CREATE INDEX jobs_claimable_holds ON jobs (kind, priority, seq)
    WHERE holds AND head AND state IN ('scheduled', 'available', 'retryable');
