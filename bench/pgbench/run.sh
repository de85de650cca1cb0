#!/usr/bin/env bash
# Server-side cost of the PostgreSQL lock cycle, without Go in the loop: pgbench, 8 clients, each
# on its own key, comparing the raw INSERT ON CONFLICT DO NOTHING + DELETE pair with Baton's
# tombstone pair (upsert that takes over a released row + UPDATE that releases it). Used in
# docs/benchmarks.md to show where the PostgreSQL gap to the raw baseline comes from.
# Creates and drops the schema baton_pgbench in the target database.
set -euo pipefail
cd "$(dirname "$0")"
DB="${PGBENCH_DB:-test}"
PSQL=(psql -q -h 127.0.0.1 -U postgres -d "$DB" -v ON_ERROR_STOP=1)
"${PSQL[@]}" -c "DROP SCHEMA IF EXISTS baton_pgbench CASCADE" -c "CREATE SCHEMA baton_pgbench"
"${PSQL[@]}" -c "SET search_path = baton_pgbench" -f ../../store/postgres/migrations/0001_leases.sql \
  -c "CREATE TABLE raw_locks (key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL)"
trap '"${PSQL[@]}" -c "DROP SCHEMA IF EXISTS baton_pgbench CASCADE"' EXIT
for round in 1 2 3; do
  for f in raw tombstone; do
    printf '%s round %d: ' "$f" "$round"
    pgbench -n -h 127.0.0.1 -U postgres -c 8 -j 2 -T "${SECONDS_PER_RUN:-8}" -f "$f.sql" "$DB" 2>/dev/null | grep '^tps'
  done
done
