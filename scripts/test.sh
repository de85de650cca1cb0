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

# store/kubernetes's tests (below) need a kube-apiserver and etcd built from source by
# scripts/k8s-testenv.sh: ~15 min on 2 cores the first time, then cached under ~/.cache/baton.
# The build starts now, niced, beside lint and the core tests, instead of after them; a cached
# build returns at once.
tmp_out=$(mktemp -d)
trap 'rm -rf "$tmp_out"' EXIT
./scripts/k8s-testenv.sh >"$tmp_out/k8s-assets" 2>"$tmp_out/k8s-testenv.log" &
k8s_pid=$!

echo "== lint: gofmt, go vet, staticcheck, go mod tidy -diff (every module)"
scripts/lint.sh
# SQLite's engine, modernc.org/sqlite/lib (SQLite's C translated to Go), is compiled without the
# race detector's instrumentation; everything else keeps it: Baton's code, the SQLite driver's Go
# code, and modernc.org/libc beneath it, through which SQLite takes its mutexes. Instrumented, the
# translated C was most of the CPU of the tests on SQLite, the default store of most tests (the
# SQLite conformance suite took 72 CPU-seconds instead of 31), while it only looked for races
# inside SQLite's own engine. Leaving all of
# modernc.org/... uninstrumented, libc included, is not done: the race detector then reported
# races (between a worker's jobs, in encoding/json) that it does not report otherwise. GOFLAGS
# carries the flag to the -race builds of baton that the end-to-end tests make; in builds without
# -race it is the default, and only changes their cache key.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=modernc.org/sqlite/lib=-race=false"

echo "== go test -race"
# The timeout is a last hang guard per package: the tests' own guards (minutes, per wait) name
# what hung first. It leaves a loaded machine room: the slowest package, e2e/chaos, takes about
# seven minutes on two idle cores.
# -parallel 4 (the default is GOMAXPROCS, 2 on two cores): the tests that call t.Parallel mostly
# wait on real TTLs (the conformance cases after the heavy concurrency ones, the end-to-end tests
# of the binary), so four at a time in a package shorten the wait without starving the CPU; the
# tests that time short renewals or hammer a store run serially before them. e2e/chaos keeps its
# runs of one test over several stores, and its partition runs, at two at a time.
go test -race -count=1 -parallel 4 -timeout 30m ./...

# The remaining steps are independent of each other: each is its own Go module (or client) and
# starts what it needs (servers, databases, browsers) on free loopback ports in temporary
# directories. Most of their time is spent waiting on real TTLs, not on the CPU, so they run
# concurrently, each with its output in a file; the outputs are printed in this order as each
# step ends, and the script fails if any step failed. What each step needs is checked (and
# installed) first, here.

# store/kubernetes's tests run against a real kube-apiserver and etcd (built above, started by
# the tests themselves on free loopback ports). BATON_K8S_ASSETS also reaches cmd/baton-full's
# kubernetes:// test.
echo "== store/kubernetes: the test API server (built from source once, cached)"
if wait "$k8s_pid"; then
  cat "$tmp_out/k8s-testenv.log" >&2
  BATON_K8S_ASSETS="$(cat "$tmp_out/k8s-assets")"
  export BATON_K8S_ASSETS
elif [ -n "${CI:-}" ]; then
  cat "$tmp_out/k8s-testenv.log" >&2
  echo "test.sh: FATAL: could not build kube-apiserver and etcd for store/kubernetes and CI is set" >&2
  exit 1
else
  cat "$tmp_out/k8s-testenv.log" >&2
  echo "test.sh: WARNING: no kube-apiserver; store/kubernetes's API server tests will be skipped (they fail under CI)" >&2
fi

# The TypeScript and Python clients (clients/): their tests start real `baton serve` processes of
# a binary built here. TypeScript needs Node 20.3+ (and, from the npm registry into a cache
# outside the work tree, the TypeScript compiler to check the declarations); Python 3.9+, standard
# library only. Without them the clients' tests are skipped, except under CI, where that fails.
export BATON_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/baton"
mkdir -p "$BATON_CACHE/bin"
go build -o "$BATON_CACHE/bin/baton-clients-test" ./cmd/baton
export BATON_BIN="$BATON_CACHE/bin/baton-clients-test"
missing() {
  if [ -n "${CI:-}" ]; then echo "test.sh: FATAL: $1 is missing and CI is set" >&2; exit 1; fi
  echo "test.sh: WARNING: $1 is missing; skipping its client's tests (they fail under CI)" >&2
}
have_node=
if command -v node >/dev/null && command -v npm >/dev/null && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=3)?0:1)'; then
  have_node=1
else
  missing "Node.js 20.3+ with npm"
fi
have_python=
if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
  have_python=1
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

# step NAME COMMAND...: starts COMMAND in the background, its output in a file of its own.
steps=()
step_pids=()
step() {
  local name=$1 n=${#steps[@]}
  shift
  steps+=("$name")
  (
    start=$SECONDS
    rc=0
    "$@" || rc=$?
    echo "exit $rc after $((SECONDS - start)) s" >"$tmp_out/step$n.status"
    exit "$rc"
  ) >"$tmp_out/step$n.log" 2>&1 </dev/null &
  step_pids+=($!)
}

# store/etcd, store/kubernetes, cmd/baton-full (the binary with the backends of their own modules
# registered as store URLs: etcd://, kubernetes://, dynamodb://), e2e/dashboard, store/dynamodb
# and deploy/helm are each their own module: the root ./... above does not reach them (scripts/lint.sh vets
# them). store/etcd runs an embedded etcd of its own; store/dynamodb's tests and cmd/baton-full's
# dynamodb:// test run against dynalite.
step "store/etcd: go test -race" sh -c 'cd store/etcd && go test -race -count=1 -timeout 5m ./...'
step "store/kubernetes: go test -race" sh -c 'cd store/kubernetes && go test -race -count=1 -timeout 15m ./...'
step "cmd/baton-full: go test -race" sh -c 'cd cmd/baton-full && go test -race -count=1 -timeout 10m ./...'
step "e2e/dashboard: go test -race (chromium)" sh -c 'cd e2e/dashboard && go test -race -count=1 -timeout 10m ./...'
step "store/dynamodb: go test -race" sh -c 'cd store/dynamodb && go test -race -count=1 -timeout 10m ./...'
# deploy/helm renders the Helm chart with Helm's own Go module (its own module: Helm and the
# Kubernetes API types stay out of the core module) and strict-decodes every object.
step "deploy/helm: go test -race (the chart, rendered by Helm)" sh -c 'cd deploy/helm && go test -race -count=1 -timeout 5m ./...'
if [ -n "$have_node" ]; then
  step "clients/typescript: against a real baton serve" sh -c 'cd clients/typescript \
    && npm ci --prefer-offline --no-audit --no-fund --cache "$BATON_CACHE/npm" >/dev/null \
    && npm run --silent typecheck \
    && npm test'
fi
if [ -n "$have_python" ]; then
  step "clients/python: against a real baton serve" sh -c 'cd clients/python && python3 -m unittest discover -s tests -t tests'
fi

failed=()
for n in "${!steps[@]}"; do
  rc=0
  wait "${step_pids[$n]}" || rc=$?
  echo "== ${steps[$n]}"
  cat "$tmp_out/step$n.log"
  echo "-- ${steps[$n]}: $(cat "$tmp_out/step$n.status" 2>/dev/null || echo "exit $rc")"
  if [ "$rc" -ne 0 ]; then
    failed+=("${steps[$n]}")
  fi
done

# examples/<system>/run.sh: one runnable example per seed system (docs/guides/<system>.md takes
# its commands and code from them). Each builds what it needs from this checkout, runs against
# SQLite in a temporary directory (or the test PostgreSQL when it needs one), checks what it
# shows, and cleans up after itself.
echo "== examples"
for run in examples/*/run.sh; do
  [ -e "$run" ] || continue
  echo "-- $run"
  bash "$run" || failed+=("$run")
done

if [ "${#failed[@]}" -ne 0 ]; then
  echo "test.sh: FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
