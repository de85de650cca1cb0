package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The audit triggers. Audit is a property of the schema, not of one Store: once enabled, every
// writer's changes are recorded, whichever process makes them. The WHEN clause keeps renewals and
// waiter flags from even calling the function; on jobs, it lets through claims, completions and
// heartbeats (of which the function records the first per attempt) and jobs superseded by a
// replace submit, nothing else.
const auditTriggers = `
CREATE OR REPLACE TRIGGER leases_audit_insert AFTER INSERT ON leases
    FOR EACH ROW EXECUTE FUNCTION leases_audit();
CREATE OR REPLACE TRIGGER leases_audit_update AFTER UPDATE ON leases
    FOR EACH ROW WHEN (NEW.lease_id <> OLD.lease_id OR NEW.token <> OLD.token OR (OLD.ended = 0 AND NEW.ended <> 0))
    EXECUTE FUNCTION leases_audit();
CREATE OR REPLACE TRIGGER jobs_audit AFTER UPDATE ON jobs
    FOR EACH ROW WHEN ((NEW.state = 'running') <> (OLD.state = 'running')
        OR (NEW.state = 'superseded' AND OLD.state <> 'superseded')
        OR (NEW.state = 'running' AND NEW.token = OLD.token AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at))
    EXECUTE FUNCTION jobs_audit();
`

// auditTicketTriggers record the line's tickets (migration 0011 onwards; that migration creates
// them too in a schema that is audited already).
const auditTicketTriggers = `
CREATE OR REPLACE TRIGGER tickets_audit_insert AFTER INSERT ON tickets
    FOR EACH ROW EXECUTE FUNCTION tickets_audit();
CREATE OR REPLACE TRIGGER tickets_audit_update AFTER UPDATE ON tickets
    FOR EACH ROW WHEN (NEW.created_at <> OLD.created_at OR NEW.first <> OLD.first)
    EXECUTE FUNCTION tickets_audit();
`

// auditHoldTriggers record holds' grants and ends (migration 0012 onwards; that migration creates
// them too in a schema that is audited already).
const auditHoldTriggers = `
CREATE OR REPLACE TRIGGER holds_audit_insert AFTER INSERT ON holds
    FOR EACH ROW EXECUTE FUNCTION holds_audit();
CREATE OR REPLACE TRIGGER holds_audit_update AFTER UPDATE ON holds
    FOR EACH ROW WHEN (NEW.token <> OLD.token OR (OLD.ended = 0 AND NEW.ended <> 0))
    EXECUTE FUNCTION holds_audit();
`

// enableAudit creates the audit triggers unless they exist. It looks first, so that opening an
// audited schema takes no lock on the leases table.
func enableAudit(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	const count = `SELECT count(*) FILTER (WHERE t.tgname IN ('leases_audit_insert', 'leases_audit_update', 'jobs_audit',
			'tickets_audit_insert', 'tickets_audit_update', 'holds_audit_insert', 'holds_audit_update')),
		to_regclass(quote_ident($1) || '.tickets') IS NOT NULL, to_regclass(quote_ident($1) || '.holds') IS NOT NULL
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1`
	var n int
	var tickets, holds bool
	if err := pool.QueryRow(ctx, count, schema).Scan(&n, &tickets, &holds); err != nil {
		return err
	}
	want, sql := 3, auditTriggers
	if tickets {
		want, sql = 5, auditTriggers+auditTicketTriggers
	}
	if holds {
		want, sql = 7, sql+auditHoldTriggers
	}
	if n == want {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int, hashtext($2))", migrateLockClass, schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()+", pg_temp"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql)
		return err
	})
}
