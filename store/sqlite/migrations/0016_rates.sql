-- Rates (store/rate.go): a kind may carry a rate, at most rate_max attempt starts per resource in
-- any window of rate_window_ns. rate_max = 0: no rate.
ALTER TABLE job_kinds ADD COLUMN rate_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_kinds ADD COLUMN rate_window_ns INTEGER NOT NULL DEFAULT 0;

-- The grants a rate counts: one row per grant, written in the grant's own transaction, by scope
-- ('kind:' || the kind) and key (the resource), at the store's clock. A grant deletes its key's
-- rows that left the window; CleanJobs deletes those older than the longest window.
CREATE TABLE rate_grants (
    scope TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    at    INTEGER NOT NULL
);
CREATE INDEX rate_grants_by_key ON rate_grants (scope, key, at);
CREATE INDEX rate_grants_by_at ON rate_grants (at);
