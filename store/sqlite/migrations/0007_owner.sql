-- Owners (store.AcquireParams.Owner, store.ClaimParams.Owner): a lease and a job attempt belong
-- to the principal a server with authentication took them as; library callers have none (''),
-- which is also what every lease and attempt of an older file belongs to. The statements that
-- renew, release, heartbeat and end them compare it in their WHERE clause.
ALTER TABLE leases ADD COLUMN owner TEXT NOT NULL DEFAULT '';
-- Who force-released the lease or cleared its rest, as authenticated (ForceReleaseParams.Principal),
-- beside end_actor (what the caller said): the audit triggers record it.
ALTER TABLE leases ADD COLUMN end_principal TEXT NOT NULL DEFAULT '';
-- The latest attempt's owner, next to its worker.
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
-- Whether the reaper ended the latest attempt (the store's own change, which the audit log
-- records with no principal) rather than its owner; set when an attempt starts or ends.
ALTER TABLE jobs ADD COLUMN reaped INTEGER NOT NULL DEFAULT 0 CHECK (reaped IN (0, 1));
-- The authenticated principal of each change (store.Event.Principal).
ALTER TABLE events ADD COLUMN principal TEXT NOT NULL DEFAULT '';
-- An audited file's triggers are re-created from audit.sql in this migration's transaction (see
-- migrate.go), so that they record the principal from the first change after it.
