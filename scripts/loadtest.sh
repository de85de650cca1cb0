#!/usr/bin/env bash
# Bounded load test of `baton serve` on loopback (issue 18): leases held with keepalive, and
# waiters on shared keys, over SQLite and PostgreSQL. Each run stops within 60 s; the whole
# script within about 4 minutes. Not part of `make test`. Figures: docs/benchmarks.md.
#
#   HELD=20000 DURATION=20s ./scripts/loadtest.sh      # more leases
#   STORES=sqlite ./scripts/loadtest.sh                 # one store
set -euo pipefail
cd "$(dirname "$0")/.."
export BATON_TEST_POSTGRES_DSN="${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
HELD="${HELD:-10000}"
WAITERS="${WAITERS:-2000}"
DURATION="${DURATION:-20s}"
STORES="${STORES:-sqlite postgres}"
mkdir -p bin
go build -o bin/loadtest ./internal/loadtest
for st in $STORES; do
  if [ "$st" = postgres ] && ! pg_isready -q -d "$BATON_TEST_POSTGRES_DSN" 2>/dev/null; then
    echo "loadtest.sh: PostgreSQL unreachable at $BATON_TEST_POSTGRES_DSN; skipping it" >&2
    continue
  fi
  bin/loadtest -store "$st" -scenario held -held "$HELD" -duration "$DURATION" -limit 60s
  bin/loadtest -store "$st" -scenario waiters -waiters "$WAITERS" -keys 50 -duration "$DURATION" -limit 60s
done
