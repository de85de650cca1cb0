#!/usr/bin/env bash
# Makes sure the database that a PostgreSQL DSN names exists: if the server answers but the
# database is missing (the usual first run: "database "test" does not exist"), it is created,
# connecting with the same DSN to the "postgres" database. Usage: scripts/pg-test-db.sh DSN
# (a URL, postgres://user@host:port/db?...). Exit 0 when the database exists or was created;
# 1, saying what to do, when it is missing and could not be created. Needs psql.
set -euo pipefail
dsn="$1"

if psql "$dsn" -Atqc 'SELECT 1' >/dev/null 2>&1; then
  exit 0
fi
# The database name is the URL's path; the maintenance DSN is the same URL on "postgres".
db=$(sed -E 's#^[a-z]+://[^/]*/([^?]*).*$#\1#' <<<"$dsn")
if [ -z "$db" ] || [ "$db" = "$dsn" ]; then
  echo "pg-test-db: cannot read a database name in the DSN $dsn" >&2
  exit 1
fi
admin=$(sed -E "s#^([a-z]+://[^/]*/)[^?]*#\\1postgres#" <<<"$dsn")
if ! psql "$admin" -Atqc "SELECT 1 FROM pg_database WHERE datname = '${db//\'/\'\'}'" 2>/dev/null | grep -q 1; then
  echo "pg-test-db: creating the database \"$db\" for the PostgreSQL tests" >&2
  psql "$admin" -qc "CREATE DATABASE \"${db//\"/\"\"}\"" >/dev/null 2>&1 || true
fi
if ! err=$(psql "$dsn" -Atqc 'SELECT 1' 2>&1 >/dev/null); then
  echo "pg-test-db: cannot use the database \"$db\" of $dsn: $err" >&2
  echo "pg-test-db: create it (e.g. createdb -h HOST -U USER $db) or set BATON_TEST_POSTGRES_DSN to a database you can use" >&2
  exit 1
fi
