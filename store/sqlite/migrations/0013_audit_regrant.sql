-- The audit log records a grant to the lease ID of a lease that ended (a retried acquire): its
-- trigger (audit.sql) now fires on a new token too. An audited file gets the triggers anew with
-- this migration (refreshAudit).
SELECT 1;
