#!/usr/bin/env bash
# The command runner on Baton (docs/guides/command-runner.md): `baton run --lock` around a
# terraform-like apply, from concurrent shells on one workspace key. They serialise, tokens
# increase, `baton locks list|status|force-release` inspect and break a wedged run, and
# `baton events` shows the history. Runs against SQLite on a free port; exits non-zero when a
# check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=../lib/serve.sh
. examples/lib/serve.sh
start_server
export WORKSPACE_DIR=$tmp/workspace
mkdir -p "$WORKSPACE_DIR"

# 1. Two shells apply the same workspace at once: the second waits for the first.
echo "--- two concurrent applies on workspace/prod"
baton run --lock workspace/prod --wait 1m --holder shell-1 -- "$here/apply.sh" > "$tmp/shell-1.log" 2>&1 &
s1=$!
baton run --lock workspace/prod --wait 1m --holder shell-2 -- "$here/apply.sh" > "$tmp/shell-2.log" 2>&1 &
s2=$!
wait "$s1" || fail "shell 1 failed"
wait "$s2" || fail "shell 2 failed"
cat "$tmp/shell-1.log" "$tmp/shell-2.log"
[ ! -e "$WORKSPACE_DIR/overlaps" ] || fail "the applies overlapped: $(cat "$WORKSPACE_DIR/overlaps")"
cat "$WORKSPACE_DIR/applies.log"
[ "$(wc -l < "$WORKSPACE_DIR/applies.log")" = 2 ] || fail "want two applies"
grep -q '^token=[0-9]* serial=2$' "$WORKSPACE_DIR/applies.log" || fail "the second apply did not see the first's state"
awk -F'[= ]' '{ if ($2 + 0 <= prev) exit 1; prev = $2 + 0 }' "$WORKSPACE_DIR/applies.log" || fail "tokens do not increase"

# 2. A wedged apply: inspect it, then force-release it. baton run stops the command (SIGTERM)
#    and exits 76 (lease lost); the apply writes nothing.
echo "--- a wedged apply, force-released"
APPLY_SECONDS=600 baton run --lock workspace/prod --wait 1m --holder shell-3 --grace 2s \
	-- "$here/apply.sh" > "$tmp/shell-3.log" 2>&1 &
s3=$!
pids+=($s3)
held() { baton locks status workspace/prod | grep -q shell-3; }
waitfor "shell 3 to hold workspace/prod" held
baton locks list --prefix workspace/ | tee "$tmp/list.txt"
grep -Eq '^workspace/prod +shell-3 ' "$tmp/list.txt" || fail "locks list does not show shell-3's lease"
baton locks status workspace/prod
baton locks force-release workspace/prod --reason "runner wedged" | tee "$tmp/forced.txt"
grep -Eq '^workspace/prod +shell-3 ' "$tmp/forced.txt" || fail "force-release does not show the lease it ended"
code=0
wait "$s3" || code=$?
echo "shell 3 exited with $code"
[ "$code" = 76 ] || fail "baton run exited $code after a force-release; want 76 (lease lost)"
[ "$(wc -l < "$WORKSPACE_DIR/applies.log")" = 2 ] || fail "the force-released apply wrote the state"
baton locks status workspace/prod | tee "$tmp/status.txt"
grep -q 'workspace/prod is free' "$tmp/status.txt" || fail "workspace/prod is not free after the force-release"

# 3. The next apply goes through, with a greater token than the wedged one's.
baton run --lock workspace/prod --wait 1m --holder shell-4 -- "$here/apply.sh" > "$tmp/shell-4.log" 2>&1 || fail "shell 4 failed"
cat "$tmp/shell-4.log"
grep -q 'serial=3$' "$WORKSPACE_DIR/applies.log" || fail "the last apply did not write serial 3"

# 4. The history.
echo "--- baton events --key workspace/prod --oldest-first"
baton events --key workspace/prod --oldest-first | tee "$tmp/events.txt"
# (The waiting shell's ticket joining the line is an event too: left out of this sequence.)
kinds=$(awk 'NR > 1 && $3 !~ /^ticket_/ { print $3 }' "$tmp/events.txt" | paste -sd, -)
[ "$kinds" = "acquire,release,acquire,release,acquire,force_release,acquire,release" ] || fail "events $kinds"
grep -Eq 'force_release +workspace/prod +shell-3 .*runner wedged' "$tmp/events.txt" || fail "the force-release does not name shell-3 and the reason"
# Grant tokens increase through the log.
awk 'NR > 1 && $3 == "acquire" { if ($6 + 0 <= prev) exit 1; prev = $6 + 0 }' "$tmp/events.txt" || fail "grant tokens do not increase"
echo "OK: command-runner"
