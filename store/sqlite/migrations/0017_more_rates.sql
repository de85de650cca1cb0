-- Rates of limits and of key prefixes (store/rate.go, store/rate_prefix.go). A limit's rate:
-- at most rate_max grants of its units in any window of rate_window_ns; rate_max = 0: none.
ALTER TABLE limits ADD COLUMN rate_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE limits ADD COLUMN rate_window_ns INTEGER NOT NULL DEFAULT 0;

-- The rated key prefixes: every grant of a key under one counts in rate_grants, scope
-- 'prefix:' || prefix, key ''. Prefixes never overlap (store.ValidateRatePrefixOverlap), so the
-- greatest one at or below a key is the only one it may be under (one probe of the primary key).
CREATE TABLE rate_prefixes (
    prefix         TEXT    NOT NULL PRIMARY KEY,
    rate_max       INTEGER NOT NULL,
    rate_window_ns INTEGER NOT NULL,
    set_at         INTEGER NOT NULL
) WITHOUT ROWID;
