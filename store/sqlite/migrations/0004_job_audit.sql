-- Job events in the audit log: claims, the first renewal of each attempt and completions,
-- written by triggers on jobs (created with the lease triggers when a store opens with
-- Config.Audit, see audit.sql) in the statement that claims, renews or ends the attempt. Lease
-- events leave these columns empty.
ALTER TABLE events ADD COLUMN job_id   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN job_kind TEXT    NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN attempt  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN outcome  TEXT    NOT NULL DEFAULT '';

-- "Has this attempt (its token) been renewed before?": only the first heartbeat of each attempt
-- is recorded.
CREATE INDEX events_job_renew ON events (token) WHERE kind = 'job_renew';
