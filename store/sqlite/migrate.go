package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// auditSQL creates the audit triggers if they do not exist.
//
//go:embed audit.sql
var auditSQL string

// auditTriggers are the names of the triggers auditSQL creates.
var auditTriggers = func() []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^CREATE TRIGGER IF NOT EXISTS (\w+)`).FindAllStringSubmatch(auditSQL, -1) {
		names = append(names, m[1])
	}
	return names
}()

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("sqlite: migration %q: name must start with a version number", e.Name())
		}
		body, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			// A schema at that version would skip one of them: two branches took the same number.
			return nil, fmt.Errorf("sqlite: migrations %q and %q share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies every migration not yet recorded. Each migration runs in one write
// transaction together with the row that records it, so none is ever half-applied, and
// concurrent openers (other processes) serialise on SQLite's write lock.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", err)
	}
	for i, m := range ms {
		if err := applyOne(ctx, db, m, i == len(ms)-1); err != nil {
			return err
		}
	}
	return nil
}

// The transaction of the latest migration also re-creates the audit triggers of an audited file
// from auditSQL (see refreshAudit), so the file records what this version's triggers record.
func applyOne(ctx context.Context, db *sql.DB, m migration, latest bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	before, err := triggers(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
	}
	if latest {
		if err := refreshAudit(ctx, tx); err != nil {
			return fmt.Errorf("sqlite: migration %s: re-create the audit triggers: %w", m.name, err)
		}
	} else if err := restoreAudit(ctx, tx, before); err != nil {
		return fmt.Errorf("sqlite: migration %s: restore the audit triggers: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.version, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// refreshAudit replaces the audit triggers of an audited file (one that has them: audit is a
// property of the file, whichever process opens it) with auditSQL's. auditSQL creates only
// triggers that do not exist, so without this a file audited by an older version would keep
// triggers that record less than this version's (migration 0007: the principal). It runs in the
// transaction of the latest migration, so no change to the file goes unrecorded in between, and
// an older file reaches the latest version only through that transaction: a change to audit.sql
// comes with a migration (an empty one will do).
func refreshAudit(ctx context.Context, tx *sql.Tx) error {
	var audited bool
	if err := tx.QueryRowContext(ctx, auditedSQL).Scan(&audited); err != nil || !audited {
		return err
	}
	for _, name := range auditTriggers {
		if _, err := tx.ExecContext(ctx, `DROP TRIGGER IF EXISTS `+name); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, auditSQL)
	return err
}

// auditTriggerSQL maps each trigger auditSQL creates to its CREATE statement.
var auditTriggerSQL = func() map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?ms)^CREATE TRIGGER IF NOT EXISTS (\w+).*?^END;`).FindAllStringSubmatch(auditSQL, -1) {
		out[m[1]] = m[0]
	}
	return out
}()

// triggers lists the names of the file's triggers.
func triggers(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out[name] = true
	}
	return out, rows.Err()
}

// restoreAudit creates again the audit triggers of before (the file's triggers before a
// migration that is not the latest) that the migration dropped with a table it rebuilt
// (migration 0015 rebuilds jobs), so that an audited file is never audited in part between two
// migrations' transactions. It creates no trigger the file did not have: a newer one may name a
// column that a later migration adds. The latest migration refreshes them all (refreshAudit).
func restoreAudit(ctx context.Context, tx *sql.Tx, before map[string]bool) error {
	after, err := triggers(ctx, tx)
	if err != nil {
		return err
	}
	for _, name := range auditTriggers {
		if before[name] && !after[name] {
			if _, err := tx.ExecContext(ctx, auditTriggerSQL[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// auditedSQL tells whether the file is audited (its audit triggers exist).
const auditedSQL = `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'leases_audit_end')`
