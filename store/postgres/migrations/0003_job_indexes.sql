-- Fewer index entries per job state change. No update of a job row is HOT (its state is in
-- index predicates), so each one adds an entry to every index whose predicate the new row
-- matches: the two unconditional listing indexes took two of the seven entries of a claim, two
-- of four of a completion and two of six of a promotion (a fifth of PostgreSQL's CPU per job and
-- of its WAL in the jobs benchmark, docs/benchmarks.md). Listings now read narrower indexes:
-- a resource's unfinished jobs from jobs_unfinished_by_resource, its finished ones from the
-- index below (one entry per job, written when it finishes), and the dead letters from
-- jobs_discarded; listing by another state reads jobs in ID order and keeps those in the state.
DROP INDEX jobs_by_state;
DROP INDEX jobs_by_resource;
CREATE INDEX jobs_finished_by_resource ON jobs (resource, id)
    WHERE state IN ('succeeded', 'cancelled', 'discarded', 'skipped');
CREATE INDEX jobs_discarded ON jobs (id) WHERE state = 'discarded';
