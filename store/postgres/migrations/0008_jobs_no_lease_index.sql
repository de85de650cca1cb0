-- One index entry fewer per claim, and heartbeats that can be HOT updates. jobs_running_by_lease
-- took an entry on every claim (the new row version is running) and on every heartbeat (it
-- changes lease_expires_at, its key), which made heartbeats rewrite every index of the row. Its
-- two readers, the reaper and the kind statistics, read the running jobs through
-- jobs_one_running_per_resource instead: a running job has a resource, and there are at most as
-- many running jobs as attempts in flight, so reading all of them costs what the lease-ordered
-- scan cost.
DROP INDEX IF EXISTS jobs_running_by_lease;
