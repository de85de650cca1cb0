-- Rates (store/rate.go): a kind may carry a rate, at most rate_max attempt starts per resource in
-- any window of rate_window_ms. rate_max = 0: no rate (the claim statement takes only those).
ALTER TABLE job_kinds ADD COLUMN rate_max integer NOT NULL DEFAULT 0,
    ADD COLUMN rate_window_ms bigint NOT NULL DEFAULT 0;

-- The grants a rate counts, one row per grant, written in the grant's transaction under a
-- transaction-scoped advisory lock on (scope, key) (rates.go), by scope ('kind:' || the kind)
-- and key (the resource). A grant deletes its key's rows that left the window; CleanJobs deletes
-- those older than the longest window.
CREATE TABLE rate_grants (
    scope text COLLATE "C" NOT NULL,
    key   text COLLATE "C" NOT NULL,
    at    timestamptz NOT NULL
);
CREATE INDEX rate_grants_by_key ON rate_grants (scope, key, at);
CREATE INDEX rate_grants_by_at ON rate_grants (at);
