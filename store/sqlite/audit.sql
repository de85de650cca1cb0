-- The audit triggers, created when a store opens with Config.Audit. Audit is a property of the
-- database file: once enabled, every process's changes are recorded. A change to these triggers
-- comes with a migration (an empty one will do): an audited file gets them anew in the
-- transaction that brings it to the latest version (refreshAudit in migrate.go).
--
-- principal is the authenticated principal of the change: the lease's owner for its grant and
-- release, the admin's (end_principal) for a force-release or a cleared rest.
-- A key's summary row of its holds (lease_id '', see migrations/0009_holds.sql) records nothing:
-- the holds' own triggers below do.
CREATE TRIGGER IF NOT EXISTS leases_audit_first_grant AFTER INSERT ON leases
WHEN NEW.lease_id <> ''
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal)
    VALUES (NEW.acquired_at, 'acquire', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner);
END;
-- A grant changes the lease ID, or, when a client asks again with the lease ID of a lease that
-- ended (a retried acquire), the token.
CREATE TRIGGER IF NOT EXISTS leases_audit_grant AFTER UPDATE OF lease_id, token ON leases
WHEN (NEW.lease_id <> OLD.lease_id OR NEW.token <> OLD.token) AND NEW.lease_id <> ''
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal)
    VALUES (NEW.acquired_at, iif(NEW.took_over, 'expiry_takeover', 'acquire'), NEW.key, NEW.lease_id, NEW.holder,
            NEW.token, NEW.holder, NEW.owner);
END;
CREATE TRIGGER IF NOT EXISTS leases_audit_end AFTER UPDATE OF ended ON leases
WHEN OLD.ended = 0 AND NEW.ended <> 0 AND NEW.lease_id <> ''
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal)
    VALUES (iif(NEW.ended = 1, NEW.available_at - NEW.cooldown_ns, NEW.available_at - NEW.lock_delay_ns),
            iif(NEW.ended = 1, 'release', 'force_release'), NEW.key, NEW.lease_id, NEW.holder, NEW.token,
            iif(NEW.ended = 1, NEW.holder, NEW.end_actor), iif(NEW.ended = 1, '', NEW.end_reason),
            iif(NEW.ended = 1, NEW.owner, NEW.end_principal));
END;

-- Jobs: the claim, the first renewal of each attempt (heartbeats come every TTL/3; one row per
-- attempt shows the worker was alive without flooding the log) and the completion, whose
-- outcome is the state the attempt ended in and whose reason is that attempt's error code.
-- key is the resource, holder and actor the worker, token the attempt's fencing token,
-- principal the attempt's owner (none for an attempt the reaper ended: the store's own change).
CREATE TRIGGER IF NOT EXISTS jobs_audit_claim AFTER UPDATE OF state ON jobs
WHEN NEW.state = 'running' AND OLD.state <> 'running'
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt, principal)
    VALUES (NEW.attempted_at, 'job_claim', NEW.resource, '', NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind,
            NEW.attempt, NEW.owner);
END;
CREATE TRIGGER IF NOT EXISTS jobs_audit_renew AFTER UPDATE OF lease_expires_at ON jobs
WHEN NEW.state = 'running' AND OLD.state = 'running' AND NEW.token = OLD.token
    AND NEW.lease_expires_at IS NOT OLD.lease_expires_at
    AND NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'job_renew' AND e.token = NEW.token)
BEGIN
    -- The heartbeat statement does not keep the time it was made; the wall clock stands in.
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, job_id, job_kind, attempt, principal)
    VALUES (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) * 1000000, 'job_renew', NEW.resource, '',
            NEW.worker, NEW.token, NEW.worker, NEW.id, NEW.kind, NEW.attempt, NEW.owner);
END;
CREATE TRIGGER IF NOT EXISTS jobs_audit_complete AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'running' AND NEW.state <> 'running'
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, job_id, job_kind, attempt, outcome,
                        principal)
    VALUES (coalesce(NEW.finished_at, json_extract(NEW.errors, '$[#-1].at'), OLD.attempted_at), 'job_complete',
            NEW.resource, '', OLD.worker, OLD.token, OLD.worker,
            iif(NEW.state <> 'succeeded' AND json_extract(NEW.errors, '$[#-1].attempt') = OLD.attempt,
                coalesce(json_extract(NEW.errors, '$[#-1].code'), ''), ''),
            NEW.id, NEW.kind, OLD.attempt, NEW.state, iif(NEW.reaped, '', OLD.owner));
END;

-- A replace submit (store.PolicyReplace) superseded a job that was not running: its reason names
-- the job that replaced it. (A running job it asked to stop ends through jobs_audit_complete.)
CREATE TRIGGER IF NOT EXISTS jobs_audit_supersede AFTER UPDATE OF state ON jobs
WHEN NEW.state = 'superseded' AND OLD.state <> 'running'
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, job_id, job_kind, attempt, outcome,
                        principal)
    VALUES (NEW.finished_at, 'job_superseded', NEW.resource, '', '', 0, '', 'superseded by job ' || NEW.superseded_by,
            NEW.id, NEW.kind, NEW.attempt, 'superseded', '');
END;

-- ClearRest: the only update that sets end_actor without ending a live lease.
CREATE TRIGGER IF NOT EXISTS leases_audit_clear_rest AFTER UPDATE OF end_actor ON leases
WHEN OLD.ended = NEW.ended AND NEW.available_at < OLD.available_at
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal)
    VALUES (NEW.available_at, 'clear_rest', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.end_actor,
            NEW.end_reason, NEW.end_principal);
END;

-- Tickets (the line): a ticket joining the line (ticket_enqueue; ticket_first for a break-glass
-- request, with its reason), and rejoining after it expired or being moved to the front. Its
-- grant is the lease's acquire. token is 0: a ticket has none.
CREATE TRIGGER IF NOT EXISTS tickets_audit_enqueue AFTER INSERT ON tickets
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal, limit_name)
    VALUES (NEW.created_at, iif(NEW.first, 'ticket_first', 'ticket_enqueue'),
            iif(NEW.key GLOB char(30) || '*', NEW.lease_key, NEW.key), NEW.lease_id, NEW.holder, 0,
            iif(NEW.first, NEW.actor, NEW.holder), NEW.reason, NEW.owner,
            iif(NEW.key GLOB char(30) || '*', substr(NEW.key, 2), ''));
END;
CREATE TRIGGER IF NOT EXISTS tickets_audit_requeue AFTER UPDATE OF created_at, first ON tickets
WHEN NEW.created_at <> OLD.created_at OR NEW.first <> OLD.first
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason, principal, limit_name)
    VALUES (NEW.created_at, iif(NEW.first, 'ticket_first', 'ticket_enqueue'),
            iif(NEW.key GLOB char(30) || '*', NEW.lease_key, NEW.key), NEW.lease_id, NEW.holder, 0,
            iif(NEW.first, NEW.actor, NEW.holder), NEW.reason, NEW.owner,
            iif(NEW.key GLOB char(30) || '*', substr(NEW.key, 2), ''));
END;

-- Holds (store/holds.go): the grant of each key and limit unit a lease holds beyond one exclusive
-- key, and its end. A unit's event names the lease's first key and the limit. A hold that expires
-- records nothing, as a lease that expires does not.
CREATE TRIGGER IF NOT EXISTS holds_audit_grant AFTER INSERT ON holds
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal, limit_name)
    VALUES (NEW.acquired_at, 'acquire', iif(NEW.mode = 'unit', NEW.lease_key, NEW.key), NEW.lease_id, NEW.holder,
            NEW.token, NEW.holder, NEW.owner, iif(NEW.mode = 'unit', substr(NEW.key, 2), ''));
END;
CREATE TRIGGER IF NOT EXISTS holds_audit_end AFTER UPDATE OF ended ON holds
WHEN OLD.ended = 0 AND NEW.ended <> 0
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, principal, limit_name)
    VALUES (NEW.expires_at, iif(NEW.ended = 1, 'release', 'force_release'), iif(NEW.mode = 'unit', NEW.lease_key, NEW.key),
            NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner, iif(NEW.mode = 'unit', substr(NEW.key, 2), ''));
END;
