-- Tokens across failovers (failover.go): the timelines the store's connections have seen, and
-- when each was first seen. A promoted replica runs on a new, greater timeline; a timeline first
-- seen after an earlier one starts a quarantine of grants.
CREATE TABLE token_epochs (
    timeline   integer     NOT NULL PRIMARY KEY,
    first_seen timestamptz NOT NULL
);
