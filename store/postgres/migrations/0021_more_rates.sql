-- Rates of limits and of key prefixes (store/rate.go, store/rate_prefix.go, rates.go). A limit's
-- rate: at most rate_max grants of its units in any window of rate_window_ms; rate_max = 0: none.
ALTER TABLE limits ADD COLUMN rate_max integer NOT NULL DEFAULT 0,
    ADD COLUMN rate_window_ms bigint NOT NULL DEFAULT 0;

-- The rated key prefixes: every grant of a key under one counts in rate_grants, scope
-- 'prefix:' || prefix, key ''. Prefixes never overlap, so the greatest one at or below a key is
-- the only one it may be under (one probe of the primary key). As the trees table, it is read
-- by every grant (the plain acquire statement probes it and grants no key under a rated prefix;
-- such keys, and jobs on them, go the way of holds, which count the rate); a change takes
-- ACCESS EXCLUSIVE on it, so it waits for every grant in flight and every grant after it sees it.
CREATE TABLE rate_prefixes (
    prefix         text COLLATE "C" PRIMARY KEY,
    rate_max       integer NOT NULL,
    rate_window_ms bigint NOT NULL,
    set_at         timestamptz NOT NULL
);
