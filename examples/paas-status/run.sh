#!/usr/bin/env bash
# The PaaS status updater on Baton (docs/guides/paas-status.md): a reconciliation job every
# second configured in serve's --periodic-file, a status worker run by `baton worker`, and a
# deploy that is serialised with the reconciliations of its service. Runs against SQLite on a
# free port, checks what it shows, exits non-zero when a check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=../lib/serve.sh
. examples/lib/serve.sh
# 1. The server (baton serve on a free port, SQLite), with the reconciliation in its configuration.
start_server --periodic-file "$here/periodic.json"

# 2. The kinds, and the worker that runs status jobs.
baton kinds set status.reconcile --max-attempts 1 > /dev/null
baton kinds set status.deploy --max-attempts 3 > /dev/null
export STATE_DIR=$tmp/state
mkdir -p "$STATE_DIR/containers" "$STATE_DIR/status"
baton worker --kind status.reconcile --kind status.deploy --lease-ttl 6s --grace 2s \
	-- "$here/status-job.sh" > "$tmp/worker.log" 2>&1 &
pids+=($!)

echo "--- baton periodic list"
baton periodic list | tee "$tmp/periodic.txt"
grep -q 'reconcile-web  @every 1s  status.reconcile  service/web' "$tmp/periodic.txt" || fail "periodic list does not show reconcile-web"
grep -q '(in ' "$tmp/periodic.txt" || fail "periodic list shows no next run"

# 3. The service was never deployed: the reconciler records IDLE.
status() { cat "$STATE_DIR/status/web" 2>/dev/null; }
is() { [ "$(status)" = "$1" ]; }
waitfor "status IDLE" is IDLE
echo "status: $(status)"

# 4. A deploy (what the API submits): DEPLOYING, then RUNNING. Reconciliations that come due
#    while it runs are skipped (policy skip), so none can overwrite DEPLOYING halfway.
baton jobs submit --kind status.deploy --resource service/web > /dev/null
waitfor "status DEPLOYING" is DEPLOYING
echo "status: $(status)"
waitfor "status RUNNING" is RUNNING
echo "status: $(status)"

# 5. The container dies behind everyone's back: the next reconciliation corrects the status.
echo exited > "$STATE_DIR/containers/web"
waitfor "status STOPPED" is STOPPED
echo "status: $(status)"

echo "--- status writes (token, job, status)"
cat "$STATE_DIR/status.log"
grep -c . "$STATE_DIR/status.log" | grep -qx 4 || fail "want 4 status writes (IDLE, DEPLOYING, RUNNING, STOPPED)"
# Each job's writes carry a greater fencing token than the jobs' before it.
awk -F'[= ]' '{ if ($2 + 0 < prev || ($2 + 0 == prev && $4 != job)) exit 1; prev = $2 + 0; job = $4 }' \
	"$STATE_DIR/status.log" || fail "tokens do not increase from job to job"
# The deploy's two writes are one job's: one token.
[ "$(grep -c 'kind=status.deploy' "$STATE_DIR/status.log")" = 2 ] || fail "want two deploy writes"
[ "$(grep 'kind=status.deploy' "$STATE_DIR/status.log" | cut -d' ' -f1 | sort -u | wc -l)" = 1 ] || fail "the deploy's writes have different tokens"

# 6. One job per second, run or skipped; none failed.
echo "--- baton jobs list --resource service/web (the last few)"
baton jobs list --resource service/web -o json > "$tmp/jobs.json"
baton jobs list --resource service/web | tail -4
grep -q '"state": *"skipped"' "$tmp/jobs.json" || fail "no reconciliation was skipped during the deploy"
if grep -q '"state": *"discarded"' "$tmp/jobs.json"; then fail "a status job failed"; fi

# 7. The audit log has each job's claim and completion, with its token.
echo "--- baton events --key service/web (the last few)"
baton events --key service/web | tee "$tmp/events.txt" | tail -4
deploy_token=$(grep 'kind=status.deploy' "$STATE_DIR/status.log" | head -1 | sed 's/token=\([0-9]*\).*/\1/')
grep -Eq "job_claim +service/web +[^ ]+ +$deploy_token " "$tmp/events.txt" || fail "no job_claim with the deploy's token $deploy_token"
grep -Eq "job_complete +service/web +[^ ]+ +$deploy_token .*succeeded" "$tmp/events.txt" || fail "no job_complete with the deploy's token $deploy_token"
# 8. Latest wins: the status page (resource page/web) should show the newest status; publishing
#    one is slow. Five changes in a burst: with policy replace and a 1 s debounce they coalesce
#    into the newest, and an older one that had started is asked to stop.
baton kinds set status.publish --policy replace --debounce 1s --max-attempts 3 > /dev/null
baton worker --kind status.publish --lease-ttl 6s --grace 2s \
	-- "$here/status-job.sh" > "$tmp/publish.log" 2>&1 &
pids+=($!)
for s in DEPLOYING RUNNING CRASHING RUNNING STOPPED; do
	baton jobs submit --kind status.publish --resource page/web --args "{\"status\":\"$s\"}" > /dev/null
done
unfinished() { baton jobs list --resource page/web -o json | grep -Eq '"state": *"(scheduled|available|running|retryable)"'; }
waitfor "the status page's jobs to end" eval '! unfinished'
echo "--- baton jobs list --resource page/web"
baton jobs list --resource page/web | tee "$tmp/publish.txt"
[ "$(cat "$STATE_DIR/page/web")" = STOPPED ] || fail "the status page shows $(cat "$STATE_DIR/page/web"), not the newest status"
tail -1 "$tmp/publish.txt" | grep -q 'succeeded' || fail "the newest publish did not succeed"
grep -q 'superseded' "$tmp/publish.txt" || fail "no publish was superseded"
if grep -Eq 'discarded|cancelled' "$tmp/publish.txt"; then fail "a publish failed"; fi
echo "OK: paas-status"
