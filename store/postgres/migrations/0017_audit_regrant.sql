-- The audit log records a grant to the lease ID of a lease that ended (a retried acquire, whose
-- lease ID stays while its token is new): the function and, in an audited schema, the trigger
-- (audit.go) treat a new token as a grant.
CREATE OR REPLACE FUNCTION leases_audit() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.job_id <> 0 OR NEW.lease_id = '' OR (TG_OP = 'UPDATE' AND OLD.job_id <> 0) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.lease_id <> OLD.lease_id OR NEW.token <> OLD.token THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, principal)
        VALUES (CASE WHEN NEW.took_over THEN 'expiry_takeover' ELSE 'acquire' END,
                NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner);
    ELSIF NEW.ended = 1 THEN
        INSERT INTO events (kind, key, lease_id, holder, token, actor, principal)
        VALUES ('release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.holder, NEW.owner);
    ELSE
        INSERT INTO events (kind, key, lease_id, holder, token, actor, reason, principal)
        VALUES ('force_release', NEW.key, NEW.lease_id, NEW.holder, NEW.token, NEW.end_actor, NEW.end_reason,
                NEW.end_principal);
    END IF;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE t.tgname = 'leases_audit_update' AND c.relname = 'leases' AND n.nspname = current_schema()) THEN
        CREATE OR REPLACE TRIGGER leases_audit_update AFTER UPDATE ON leases
            FOR EACH ROW WHEN (NEW.lease_id <> OLD.lease_id OR NEW.token <> OLD.token OR (OLD.ended = 0 AND NEW.ended <> 0))
            EXECUTE FUNCTION leases_audit();
    END IF;
END
$$;
