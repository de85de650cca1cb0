-- Jobs beyond one key (store/jobs_holds.go): a kind's mode and limit templates, and a job's
-- holds. jobs.beyond is NULL for a job that holds its resource only, exclusive (the claim
-- statement's jobs); else a JSON object {shared, resources, limits}, and its attempts are granted
-- through holds (lease ID "\x1fjob:" + id) like a lease that asks the same.
ALTER TABLE job_kinds ADD COLUMN mode TEXT NOT NULL DEFAULT '';
ALTER TABLE job_kinds ADD COLUMN limits TEXT NOT NULL DEFAULT '[]'; -- JSON array of templates
ALTER TABLE jobs ADD COLUMN beyond TEXT;
-- The claim's second pass: heads with holds, in claim order.
CREATE INDEX jobs_beyond_heads ON jobs (priority, seq)
    WHERE head AND beyond IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
