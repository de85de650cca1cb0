-- Beyond one at a time (store/holds.go): shared holders, leases on several keys, limits of N.
--
-- A lease that asks for more than one exclusive key keeps one holds row per key it holds (mode
-- 'exclusive' or 'shared') and per limit it takes a unit of (mode 'unit', key: the limit's line
-- key, "\x1e" then its name, which no key can equal: keys hold no control characters). Each held
-- key's leases row sums its holds up with lease_id '': held (ended 0) until the latest expiry of
-- its holds, available after the latest expiry plus lock-delay, so that a plain acquire, a claim
-- and a fence see the key held without reading holds. The holds and the rows change in one
-- write transaction.
CREATE TABLE holds (
    lease_id      TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    mode          TEXT    NOT NULL CHECK (mode IN ('exclusive', 'shared', 'unit')),
    lease_key     TEXT    NOT NULL, -- the lease's first key (the one its holder renews and releases by)
    holder        TEXT    NOT NULL,
    owner         TEXT    NOT NULL DEFAULT '',
    token         INTEGER NOT NULL,
    acquired_at   INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    ended         INTEGER NOT NULL DEFAULT 0, -- 0 live until expires_at, 1 released, 2 force-released
    cooldown_ns   INTEGER NOT NULL,
    lock_delay_ns INTEGER NOT NULL,
    metadata      TEXT,
    PRIMARY KEY (lease_id, key)
) WITHOUT ROWID;
CREATE INDEX holds_by_key ON holds (key, ended, expires_at);

-- Limits: a named capacity (1..1,000,000), set by an admin.
CREATE TABLE limits (
    name       TEXT    NOT NULL PRIMARY KEY,
    capacity   INTEGER NOT NULL CHECK (capacity BETWEEN 1 AND 1000000),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A ticket's mode, and the first key of its request (its waiter subscribes by that key): a
-- request for several keys and limits has one ticket in each of their lines, all with the same
-- created_at and seq.
ALTER TABLE tickets ADD COLUMN mode TEXT NOT NULL DEFAULT 'exclusive';
ALTER TABLE tickets ADD COLUMN lease_key TEXT NOT NULL DEFAULT '';

-- The audit log names the limit of a unit's grant and end (its key is the lease's first key).
ALTER TABLE events ADD COLUMN limit_name TEXT NOT NULL DEFAULT '';

-- A waiter that gives up leaves every line of its request (LeaveLine) by its lease ID.
CREATE INDEX tickets_by_lease ON tickets (lease_id);
