-- One resource, one line: a waiting lock request is a ticket in its key's line, beside the key's
-- unfinished jobs. A ticket's place is its arrival (created_at, the store's clock when the
-- waiter was first refused); a break-glass ticket (first = 1) goes before every other ticket
-- and job. The waiter keeps it alive by retrying (each refused attempt moves expires_at on by
-- the lease TTL); a ticket whose expires_at passed is skipped by everyone, and the next refusal
-- of its waiter starts it again at the back. A grant to the ticket's lease ID deletes it.
CREATE TABLE tickets (
    key        TEXT    NOT NULL,
    lease_id   TEXT    NOT NULL,
    holder     TEXT    NOT NULL,
    owner      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    first      INTEGER NOT NULL DEFAULT 0 CHECK (first IN (0, 1)),
    actor      TEXT    NOT NULL DEFAULT '', -- of a break-glass ticket: who put it first
    reason     TEXT    NOT NULL DEFAULT '', -- and why
    -- Orders tickets of one arrival instant (a coarse or stopped clock) by when they were enqueued.
    seq        INTEGER NOT NULL,
    PRIMARY KEY (key, lease_id)
) WITHOUT ROWID;
CREATE INDEX tickets_line ON tickets (key, first DESC, created_at, seq);

CREATE TRIGGER leases_grant_ends_ticket_insert AFTER INSERT ON leases
BEGIN
    DELETE FROM tickets WHERE key = NEW.key AND lease_id = NEW.lease_id;
END;
CREATE TRIGGER leases_grant_ends_ticket_update AFTER UPDATE OF lease_id ON leases
BEGIN
    DELETE FROM tickets WHERE key = NEW.key AND lease_id = NEW.lease_id;
END;
