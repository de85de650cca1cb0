package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration files are named NNNN_description.sql; NNNN is the version recorded in
// <schema>.schema_migrations. Files are never edited once released: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations is sorted by version. A malformed embedded file is a build mistake, so it panics at
// init rather than at the first Open.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []migration {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		panic(err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		digits, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(digits)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(name, ".sql") {
			panic(fmt.Sprintf("postgres: migration file %q is not named NNNN_description.sql", name))
		}
		if other, dup := seen[v]; dup {
			panic(fmt.Sprintf("postgres: migrations %q and %q share version %d", other, name, v))
		}
		seen[v] = name
		body, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms
}

func latestVersion() int { return migrations[len(migrations)-1].version }

// migrateLockClass is the first key of the two-key advisory lock that serialises migrations; the
// second is hashtext(schema), so stores in different schemas migrate independently. The two-key
// form lives in a space apart from single-bigint advisory locks, which applications tend to use.
const migrateLockClass = 0x6261746f // "bato"

// Migrate brings schema (DefaultSchema if empty) up to the latest version, creating it if needed.
// It is safe to call concurrently from many processes and does nothing when the schema is current.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	schema, err := checkSchema(schema)
	if err != nil {
		return err
	}
	if pool == nil {
		return errNilPool
	}
	return migrate(ctx, pool, schema)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	v, err := schemaVersion(ctx, pool, schema)
	if err != nil {
		return err
	}
	// The common case takes no lock and runs no DDL, so a role without CREATE on the database can
	// open a schema that someone else migrated. A schema newer than this binary is accepted:
	// during a rolling upgrade old and new processes share it.
	if v >= latestVersion() {
		return nil
	}
	for _, m := range migrations {
		if m.version <= v {
			continue
		}
		if err := apply(ctx, pool, schema, m); err != nil {
			return fmt.Errorf("postgres: migrate schema %q to %s: %w", schema, m.name, err)
		}
	}
	return nil
}

// schemaVersion returns the highest applied migration, 0 if the schema or its table is missing.
func schemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	var v int
	err := pool.QueryRow(ctx,
		"SELECT coalesce(max(version), 0) FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined table / schema
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read schema version of %q: %w", schema, err)
	}
	return v, nil
}

// apply runs one migration and records its version in one transaction, so a migration is either
// applied and recorded or neither. The advisory lock makes concurrent openers queue; whoever comes
// second finds the version recorded and does nothing.
func apply(ctx context.Context, pool *pgxpool.Pool, schema string, m migration) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int, hashtext($2))", migrateLockClass, schema); err != nil {
			return err
		}
		ident := pgx.Identifier{schema}.Sanitize()
		versions := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
		// CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent create; under the lock it is.
		// pg_temp last: a temporary table must never capture an unqualified name.
		for _, stmt := range []string{
			"CREATE SCHEMA IF NOT EXISTS " + ident,
			"SET LOCAL search_path TO " + ident + ", pg_temp",
			"CREATE TABLE IF NOT EXISTS " + versions +
				" (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		var done bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+versions+" WHERE version = $1)", m.version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		// No arguments: pgx sends it with the simple protocol, which allows several statements.
		// {channel} is the schema's NOTIFY channel ([a-z0-9_], see channelName), for triggers
		// that wake waiters.
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{channel}", channelName(schema))); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+versions+" (version, applied_at) VALUES ($1, now())", m.version)
		return err
	})
}
