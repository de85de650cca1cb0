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
# The server answers but the database may be missing (the first run on a fresh PostgreSQL):
# create it, or stop here saying what to do (its tests would fail, not skip).
if pg_up && ! scripts/pg-test-db.sh "$BATON_TEST_POSTGRES_DSN"; then
  echo "test.sh: FATAL: the PostgreSQL test database is missing and could not be created" >&2
  exit 1
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

# e2e/chaos's partition and clock runs make network namespaces and cut their links with ip and
# tc (iproute2), and step PostgreSQL's clock with libfaketime (Debian: faketime; it cannot reach
# a Go program's clock, which the runs skew through a chaosclock build of baton instead).
# Without them, or without root, those tests skip, except under CI, where they fail.
for pkg in iproute2:tc faketime:faketime; do
  if ! command -v "${pkg#*:}" >/dev/null; then
    echo "test.sh: installing ${pkg%:*} for the fault harness's partition and clock runs" >&2
    (apt-get install -y -q "${pkg%:*}" >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${pkg%:*}" >/dev/null 2>&1)) \
      || { if [ -n "${CI:-}" ]; then echo "test.sh: FATAL: ${pkg%:*} is missing and could not be installed" >&2; exit 1; fi
           echo "test.sh: WARNING: ${pkg%:*} could not be installed; some partition or clock fault runs will be skipped" >&2; }
  fi
done

# e2e's completion test types into a real interactive bash under tmux, with and without the
# bash-completion package.
if ! command -v tmux >/dev/null; then
  echo "test.sh: installing tmux for the shell completion test" >&2
  (apt-get install -y -q tmux >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q tmux >/dev/null 2>&1)) \
    || { echo "test.sh: FATAL: tmux is missing and could not be installed" >&2; exit 1; }
fi
if [ ! -e /usr/share/bash-completion/bash_completion ]; then
  echo "test.sh: installing bash-completion for the shell completion test" >&2
  (apt-get install -y -q bash-completion >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bash-completion >/dev/null 2>&1)) \
    || { echo "test.sh: FATAL: bash-completion is missing and could not be installed" >&2; exit 1; }
fi

# store/dynamodb's tests and cmd/baton-full's dynamodb:// test start dynalite, a
# DynamoDB-compatible server installed from npm into the cache by scripts/dynalite.sh. Under CI a
# failed install fails the run; otherwise those tests skip.
if BATON_DYNALITE="$(scripts/dynalite.sh)"; then
  export BATON_DYNALITE
elif [ -n "${CI:-}" ]; then
  echo "test.sh: FATAL: dynalite could not be installed and CI is set" >&2
  exit 1
else
  echo "test.sh: WARNING: dynalite could not be installed; the DynamoDB tests will be skipped (they fail under CI)" >&2
fi

echo "== lint: gofmt, go vet, staticcheck, go mod tidy -diff (every module)"
scripts/lint.sh
echo "== go test -race"
# The timeout is a last hang guard per package: the tests' own guards (minutes, per wait) name
# what hung first. It leaves a loaded machine room: the slowest package, e2e, takes about five
# minutes on two idle cores.
go test -race -count=1 -timeout 30m ./...

# store/etcd is its own module (its go.mod replaces github.com/batonhq/baton with ../..), so the
# root ./... does not reach it: test it here (scripts/lint.sh vets it), against an embedded etcd it starts itself.
echo "== store/etcd: go test -race"
(cd store/etcd && go test -race -count=1 -timeout 5m ./...)

# store/kubernetes is its own module too. Its tests run against a real kube-apiserver and etcd,
# built from source once by scripts/k8s-testenv.sh (~15 min on 2 cores the first time, then
# cached under ~/.cache/baton) and started by the tests themselves on free loopback ports.
# BATON_K8S_ASSETS also reaches cmd/baton-full's kubernetes:// test below.
echo "== store/kubernetes: build the test API server (cached), go test -race"
if assets=$(./scripts/k8s-testenv.sh); then
  export BATON_K8S_ASSETS="$assets"
elif [ -n "${CI:-}" ]; then
  echo "test.sh: FATAL: could not build kube-apiserver and etcd for store/kubernetes and CI is set" >&2
  exit 1
else
  echo "test.sh: WARNING: no kube-apiserver; store/kubernetes's API server tests will be skipped (they fail under CI)" >&2
fi
(cd store/kubernetes && go test -race -count=1 -timeout 15m ./...)

# cmd/baton-full is the binary with the backends of their own modules registered as store URLs
# (etcd://); it is its own module too.
echo "== cmd/baton-full: go test -race"
(cd cmd/baton-full && go test -race -count=1 -timeout 10m ./...)

# The TypeScript and Python clients (clients/): their tests start real `baton serve` processes of
# a binary built here. TypeScript needs Node 20.3+ (and, from the npm registry into a cache
# outside the work tree, the TypeScript compiler to check the declarations); Python 3.9+, standard
# library only. Without them the clients' tests are skipped, except under CI, where that fails.
echo "== clients: TypeScript and Python against a real baton serve"
BATON_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/baton"
mkdir -p "$BATON_CACHE/bin"
go build -o "$BATON_CACHE/bin/baton-clients-test" ./cmd/baton
export BATON_BIN="$BATON_CACHE/bin/baton-clients-test"
missing() {
  if [ -n "${CI:-}" ]; then echo "test.sh: FATAL: $1 is missing and CI is set" >&2; exit 1; fi
  echo "test.sh: WARNING: $1 is missing; skipping its client's tests (they fail under CI)" >&2
}
if command -v node >/dev/null && command -v npm >/dev/null && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=3)?0:1)'; then
  (cd clients/typescript \
    && npm ci --prefer-offline --no-audit --no-fund --cache "$BATON_CACHE/npm" >/dev/null \
    && npm run --silent typecheck \
    && npm test)
else
  missing "Node.js 20.3+ with npm"
fi
if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
  (cd clients/python && python3 -m unittest discover -s tests -t tests)
else
  missing "Python 3.9+"
fi

# e2e/dashboard drives the web dashboard in Debian's chromium (its own module, so that chromedp
# stays out of the core module). Without chromium its tests skip, except under CI, where a
# browser that cannot be installed fails the run.
if ! command -v chromium >/dev/null; then
  echo "test.sh: installing chromium for the dashboard's browser tests" >&2
  (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1)) \
    || { if [ -n "${CI:-}" ]; then echo "test.sh: FATAL: chromium is missing and could not be installed" >&2; exit 1; fi
         echo "test.sh: WARNING: chromium could not be installed; the dashboard's browser tests will be skipped" >&2; }
fi
echo "== e2e/dashboard: go test -race (chromium)"
(cd e2e/dashboard && go test -race -count=1 -timeout 10m ./...)

# store/dynamodb is its own module too (aws-sdk-go-v2); its tests run against dynalite.
echo "== store/dynamodb: go test -race"
(cd store/dynamodb && go test -race -count=1 -timeout 10m ./...)

# examples/<system>/run.sh: one runnable example per seed system (docs/guides/<system>.md takes
# its commands and code from them). Each builds what it needs from this checkout, runs against
# SQLite in a temporary directory (or the test PostgreSQL when it needs one), checks what it
# shows, and cleans up after itself.
echo "== examples"
for run in examples/*/run.sh; do
  [ -e "$run" ] || continue
  echo "-- $run"
  bash "$run"
done
