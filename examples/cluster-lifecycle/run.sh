#!/usr/bin/env bash
# The cluster lifecycle example (docs/guides/cluster-lifecycle.md) on the test PostgreSQL:
# cluster rows and their jobs in one database/sql transaction, a worker with state guards, two
# dead letters; then `baton serve` on the same schema shows them to the CLI and in /metrics.
set -euo pipefail
cd "$(dirname "$0")/../.."
dsn=${BATON_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
tmp=$(mktemp -d)
schema="cluster_example_$$_$RANDOM"
serve_pid=
pg_ok=
cleanup() {
	if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
	if [ -n "$pg_ok" ]; then "$tmp/cluster-lifecycle" -dsn "$dsn" -schema "$schema" -drop || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

go build -o "$tmp/cluster-lifecycle" ./examples/cluster-lifecycle
go build -o "$tmp/baton" ./cmd/baton
if ! "$tmp/cluster-lifecycle" -dsn "$dsn" -ping; then
	[ -z "${CI:-}" ] || fail "PostgreSQL at $dsn is unreachable and CI is set"
	echo "SKIP: cluster lifecycle example: PostgreSQL at $dsn is unreachable (set BATON_TEST_POSTGRES_DSN)"
	exit 0
fi
pg_ok=1

echo "== the control plane (schema $schema)"
"$tmp/cluster-lifecycle" -dsn "$dsn" -schema "$schema" | tee "$tmp/out"
grep -q '^rolled back: cluster c0 has 0 rows and 0 jobs$' "$tmp/out" || fail "a rolled-back transaction left a row or a job"
[ "$(grep -c '^committed: cluster c[123] row with jobs' "$tmp/out")" = 3 ] || fail "three clusters committed with their jobs"
grep -q '^overlapping jobs on one cluster: 0$' "$tmp/out" || fail "two jobs ran at once on one cluster"
grep -q '^cluster/c1: scale to 5 (attempt 1): cloud API throttled, will retry$' "$tmp/out" || fail "no transient failure"
grep -q '^cluster/c1: scale to 5 (attempt 2, fencing token' "$tmp/out" || fail "the throttled scale was not retried"
grep -q '^cluster c1: READY, 5 workers$' "$tmp/out" || fail "c1 not READY with 5 workers"
grep -q '^cluster c2: READY, 4 workers$' "$tmp/out" || fail "c2 not READY with 4 workers"
grep -q '^cluster c3: FAILED, 3 workers$' "$tmp/out" || fail "c3 not FAILED with its 3 workers"
grep -q 'cluster.scale cluster/c3 after 1 attempt(s): permanent: invalid worker count -1$' "$tmp/out" || fail "no permanent-failure dead letter"
grep -q 'cluster.scale cluster/c3 after 0 attempt(s): invalid_resource_state: ' "$tmp/out" || fail "no guard-refused dead letter"
# Fencing tokens of one cluster's jobs increase.
c1_tokens=$(sed -n 's/^cluster\/c1: .*fencing token \([0-9]*\))$/\1/p' "$tmp/out")
[ "$(echo "$c1_tokens" | wc -l)" = 2 ] && [ "$(echo "$c1_tokens" | sort -n)" = "$c1_tokens" ] || fail "c1's tokens: $c1_tokens"

echo "== baton serve on the same schema"
store="$dsn&baton_schema=$schema"
case "$dsn" in *\?*) ;; *) store="$dsn?baton_schema=$schema" ;; esac
"$tmp/baton" serve --listen 127.0.0.1:0 --store "$store" --dead-letter-retention 336h > "$tmp/serve.log" 2>&1 &
serve_pid=$!
url=
for _ in $(seq 1 300); do
	url=$(sed -n 's/.*msg="baton serving" url=\([^ ]*\).*/\1/p' "$tmp/serve.log")
	[ -n "$url" ] && break
	kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.log"; fail "baton serve exited"; }
	sleep 0.1
done
[ -n "$url" ] || fail "baton serve did not start: $(cat "$tmp/serve.log")"
"$tmp/baton" --server "$url" dlq list | tee "$tmp/dlq"
[ "$(grep -c 'cluster.scale' "$tmp/dlq")" = 2 ] || fail "dlq list does not show the two dead letters"
curl -sf "$url/metrics" | grep '^baton_job_dead_letter_depth\|^baton_jobs_oldest_running_age_seconds' | tee "$tmp/metrics"
grep -q '^baton_job_dead_letter_depth{kind="cluster.scale"} 2$' "$tmp/metrics" || fail "dead-letter depth of cluster.scale is not 2"
grep -q '^baton_jobs_oldest_running_age_seconds{kind="cluster.scale"} 0$' "$tmp/metrics" || fail "a job still runs"
echo "== a cluster and its nodes: the tree cluster/"
b() { "$tmp/baton" --server "$url" "$@"; }
b resources set-tree cluster/
# An upgrade of c1 holds the whole cluster while it runs (until the script says it is done).
b run --lock cluster/c1 --holder upgrade-c1 -- sh -c "touch '$tmp/up'; while [ ! -e '$tmp/up-done' ]; do sleep 0.1; done" &
up_pid=$!
for _ in $(seq 1 600); do [ -e "$tmp/up" ] && break; kill -0 "$up_pid" 2>/dev/null || fail "the upgrade did not start"; sleep 0.1; done
[ -e "$tmp/up" ] || fail "the upgrade did not start"
# A remediation of a node of c1 is refused, naming the cluster; one of c2's nodes goes.
set +e
b run --no-wait --lock cluster/c1/node/a --holder remediate-c1-a -- true 2> "$tmp/refused"
code=$?
set -e
cat "$tmp/refused"
[ "$code" = 75 ] && grep -q 'cluster/c1' "$tmp/refused" || fail "a node of the cluster being upgraded: exit $code"
b run --no-wait --lock cluster/c2/node/a --holder remediate-c2-a -- echo "remediated cluster/c2/node/a" | tee "$tmp/c2"
grep -q '^remediated cluster/c2/node/a$' "$tmp/c2" || fail "a node of another cluster did not run"
b explain cluster/c1/node/a | tee "$tmp/why"
grep -q '"cluster/c1" (an ancestor) held exclusive by upgrade-c1' "$tmp/why" || fail "explain does not name the upgrade"
touch "$tmp/up-done"
wait "$up_pid" || fail "the upgrade failed"
b run --no-wait --lock cluster/c1/node/a --holder remediate-c1-a -- echo "remediated cluster/c1/node/a" | tee "$tmp/c1"
grep -q '^remediated cluster/c1/node/a$' "$tmp/c1" || fail "the node did not run after the upgrade"
echo "ok: cluster lifecycle example"
