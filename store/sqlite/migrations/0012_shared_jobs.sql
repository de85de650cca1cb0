-- Shared jobs of one resource run together (store/jobs_holds.go): a resource's heads are its
-- oldest unfinished job and, if that one holds the resource shared, the shared jobs directly
-- behind it (jobs_heads.go). The last line of defence keeps one running job per resource, but
-- for shared jobs: a shared job's entry carries its ID, every other job's 0, so two jobs that do
-- not both hold the resource shared never run together. Readers of the running jobs of a
-- resource use the index as before (its first column is still the resource).
DROP INDEX jobs_one_running_per_resource;
CREATE UNIQUE INDEX jobs_one_running_per_resource
    ON jobs (resource, iif(beyond IS NOT NULL AND json_extract(beyond, '$.shared'), id, 0))
    WHERE state = 'running';
