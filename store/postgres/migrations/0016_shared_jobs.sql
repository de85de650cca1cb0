-- Shared jobs of one resource run together (store/jobs_holds.go): a resource's heads are its
-- oldest unfinished job and, if that one holds the resource shared, the shared jobs directly
-- behind it (the promote statement, jobs_sql.go). The two last lines of defence keep one running
-- job and one head per resource, but for shared jobs: a shared job's entry carries its ID, every
-- other job's 0, so two jobs that do not both hold the resource shared are never both heads, nor
-- both running. Their first column is still the resource, so the readers that probe a resource's
-- head or running job (or read every running job) use them as before.
DROP INDEX jobs_one_running_per_resource;
CREATE UNIQUE INDEX jobs_one_running_per_resource ON jobs (resource, (CASE WHEN shared THEN id ELSE 0 END))
    WHERE state = 'running';
DROP INDEX jobs_one_head_per_resource;
CREATE UNIQUE INDEX jobs_one_head_per_resource ON jobs (resource, (CASE WHEN shared THEN id ELSE 0 END))
    WHERE head;
