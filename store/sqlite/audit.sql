-- The audit triggers, created when a store opens with Config.Audit. Audit is a property of the
-- database file: once enabled, every process's changes are recorded.
CREATE TRIGGER IF NOT EXISTS leases_audit_first_grant AFTER INSERT ON leases
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor)
    VALUES (NEW.acquired_at, 'acquire', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder);
END;
CREATE TRIGGER IF NOT EXISTS leases_audit_grant AFTER UPDATE OF lease_id ON leases
WHEN NEW.lease_id <> OLD.lease_id
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor)
    VALUES (NEW.acquired_at, iif(NEW.took_over, 'expiry_takeover', 'acquire'), NEW.key, NEW.lease_id, NEW.holder,
            NEW.token, NEW.holder);
END;
CREATE TRIGGER IF NOT EXISTS leases_audit_end AFTER UPDATE OF ended ON leases
WHEN OLD.ended = 0 AND NEW.ended <> 0
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason)
    VALUES (iif(NEW.ended = 1, NEW.available_at - NEW.cooldown_ns, NEW.available_at - NEW.lock_delay_ns),
            iif(NEW.ended = 1, 'release', 'force_release'), NEW.key, NEW.lease_id, NEW.holder, NEW.token,
            iif(NEW.ended = 1, NEW.holder, NEW.end_actor), iif(NEW.ended = 1, '', NEW.end_reason));
END;
-- ClearRest: the only update that sets end_actor without ending a live lease.
CREATE TRIGGER IF NOT EXISTS leases_audit_clear_rest AFTER UPDATE OF end_actor ON leases
WHEN OLD.ended = NEW.ended AND NEW.available_at < OLD.available_at
BEGIN
    INSERT INTO events (at, kind, key, lease_id, holder, token, actor, reason)
    VALUES (NEW.available_at, 'clear_rest', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.end_actor,
            NEW.end_reason);
END;
