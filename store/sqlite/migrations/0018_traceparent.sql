-- The W3C traceparent of a job's submitter (store.Job.TraceParent): its attempts join that
-- trace. NULL when the submitter sent none.
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
