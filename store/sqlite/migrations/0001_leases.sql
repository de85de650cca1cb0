-- Leases are never deleted on release: the row stays as a tombstone that remembers the cooldown
-- or lock-delay. Times are Unix nanoseconds on the clock of the process that owns the database.
CREATE TABLE leases (
    key           TEXT    NOT NULL PRIMARY KEY,
    lease_id      TEXT    NOT NULL,
    holder        TEXT    NOT NULL,
    token         INTEGER NOT NULL,
    acquired_at   INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    ended         INTEGER NOT NULL DEFAULT 0, -- 0 live until expires_at, 1 released, 2 force-released
    available_at  INTEGER NOT NULL,           -- the key may be granted again at or after this
    cooldown_ns   INTEGER NOT NULL,
    lock_delay_ns INTEGER NOT NULL,
    metadata      TEXT,
    took_over     INTEGER NOT NULL DEFAULT 0, -- this grant took over an expired, unreleased lease
    end_actor     TEXT    NOT NULL DEFAULT '', -- who force-released it
    end_reason    TEXT    NOT NULL DEFAULT ''  -- and why
) WITHOUT ROWID;

-- The store-wide fencing sequence. Drawn only inside the write transaction that grants a lease.
CREATE TABLE counters (
    name  TEXT    NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('token', 0);

-- The counter follows every token granted, in the same statement as the grant (SQLite runs one
-- writer at a time, so reading value + 1 and writing it back cannot interleave with another grant).
CREATE TRIGGER leases_token_on_insert AFTER INSERT ON leases
WHEN NEW.token > (SELECT value FROM counters WHERE name = 'token')
BEGIN
    UPDATE counters SET value = NEW.token WHERE name = 'token';
END;
CREATE TRIGGER leases_token_on_update AFTER UPDATE OF token ON leases
WHEN NEW.token > (SELECT value FROM counters WHERE name = 'token')
BEGIN
    UPDATE counters SET value = NEW.token WHERE name = 'token';
END;

-- The audit log: written by triggers (created when a store opens with Config.Audit, see
-- audit.sql), in the transaction of the change itself, so no path that changes a lease can skip
-- it. Times are the store's (the grant's acquired_at, the release's now). No AUTOINCREMENT: it
-- would cost a write to sqlite_sequence per event; rows are never deleted, so rowids only grow.
CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    key      TEXT    NOT NULL,
    lease_id TEXT    NOT NULL,
    holder   TEXT    NOT NULL,
    token    INTEGER NOT NULL,
    actor    TEXT    NOT NULL,
    reason   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX events_by_key ON events (key, id);
