#!/usr/bin/env bash
# Runs Baton's whole test suite with the race detector, against a real PostgreSQL.
# PostgreSQL: BATON_TEST_POSTGRES_DSN (default: the local server, database "test"). If it is
# installed but stopped, this script starts it. With CI set, an unreachable PostgreSQL fails the
# run instead of skipping the PostgreSQL tests.
set -euo pipefail
cd "$(dirname "$0")/.."

export BATON_TEST_POSTGRES_DSN="${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

pg_up() { pg_isready -q -d "$BATON_TEST_POSTGRES_DSN" 2>/dev/null; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "test.sh: PostgreSQL not reachable; starting the local cluster" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  fi
fi
if ! pg_up; then
  if [ -n "${CI:-}" ]; then
    echo "test.sh: FATAL: PostgreSQL at $BATON_TEST_POSTGRES_DSN is unreachable and CI is set" >&2
    exit 1
  fi
  echo "test.sh: WARNING: PostgreSQL unreachable; its tests will be skipped (they fail under CI)" >&2
fi

# The end-to-end tests run the curl examples of docs/http-api.md, which use jq.
if ! command -v jq >/dev/null; then
  echo "test.sh: installing jq for the documentation examples" >&2
  (apt-get install -y -q jq >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q jq >/dev/null 2>&1)) \
    || { echo "test.sh: FATAL: jq is missing and could not be installed" >&2; exit 1; }
fi

# store/redis starts redis-server processes of its own, on ports of its own.
if ! command -v redis-server >/dev/null; then
  echo "test.sh: installing redis-server for the Redis backend's tests" >&2
  (apt-get install -y -q redis-server >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q redis-server >/dev/null 2>&1)) \
    || { echo "test.sh: FATAL: redis-server is missing and could not be installed" >&2; exit 1; }
fi

echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 -timeout 15m ./...

# store/etcd is its own module (its go.mod replaces github.com/batonhq/baton with ../..), so the
# root ./... does not reach it: vet and test it here, against an embedded etcd it starts itself.
echo "== store/etcd: go vet, go test -race"
(cd store/etcd && go vet ./... && go test -race -count=1 -timeout 5m ./...)
