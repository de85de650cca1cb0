#!/usr/bin/env bash
# Bounded load test of `baton serve` on loopback, over SQLite and PostgreSQL: leases
# held with keepalive, waiters on shared keys, uncontended cycles over HTTP against in process,
# and 5,000 clients hammering acquire/release. Each run stops within LIMIT; the whole script
# within about 6 minutes with the defaults. Not part of `make test`. Figures: docs/benchmarks.md.
#
#   HELD=50000 LIMIT=400s SCENARIOS=held STORES=sqlite ./scripts/loadtest.sh    # the capacity runs
#   HELD=100000 LIMIT=400s SCENARIOS=held STORES=postgres ./scripts/loadtest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BATON_TEST_POSTGRES_DSN="${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
HELD="${HELD:-10000}"
WAITERS="${WAITERS:-2000}"
DURATION="${DURATION:-20s}"
LIMIT="${LIMIT:-90s}"
STORES="${STORES:-sqlite postgres}"
SCENARIOS="${SCENARIOS:-held waiters cycles hammer}"
mkdir -p bin
go build -o bin/loadtest ./internal/loadtest
for st in $STORES; do
  if [ "$st" = postgres ] && ! pg_isready -q -d "$BATON_TEST_POSTGRES_DSN" 2>/dev/null; then
    echo "loadtest.sh: PostgreSQL unreachable at $BATON_TEST_POSTGRES_DSN; skipping it" >&2
    continue
  fi
  for sc in $SCENARIOS; do
    case "$sc" in
      held) bin/loadtest -store "$st" -scenario held -held "$HELD" -duration "$DURATION" -limit "$LIMIT" ;;
      waiters) bin/loadtest -store "$st" -scenario waiters -waiters "$WAITERS" -keys 50 -duration "$DURATION" -limit "$LIMIT" ;;
      cycles) bin/loadtest -store "$st" -scenario cycles -clients 64 -duration 10s -limit "$LIMIT" ;;
      hammer) bin/loadtest -store "$st" -scenario hammer -clients 5000 -duration "$DURATION" -limit "$LIMIT" ;;
      *) echo "loadtest.sh: unknown scenario $sc" >&2; exit 2 ;;
    esac
  done
done
