#!/usr/bin/env bash
# Multi-pod services (docs/guides/multi-pod-services.md): three "pods" (processes) of a small
# Python service against one `baton serve` on SQLite. Every pod submits the same 12 requests
# with idempotency keys, then runs a job worker; each job writes to the service's own database
# with a conditional update guarded by its fencing token. check.py then shows no duplicate job,
# no overlap on a resource, increasing tokens, every operation applied once, and a stale token
# refused. Needs Go and Python 3.9+ (standard library).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/examples/multi-pod-services

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/baton" ./cmd/baton

# A free port: bind :0 in Python, print it, close it.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export BATON_SERVER="http://127.0.0.1:$port" BATON_URL="http://127.0.0.1:$port"
"$tmp/baton" serve --listen "127.0.0.1:$port" --store "sqlite://$tmp/baton.db" 2>"$tmp/serve.log" &
pids+=($!)
for _ in $(seq 1 200); do
  curl -fsS "$BATON_URL/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$BATON_URL/readyz" >/dev/null || { echo "baton serve did not start:"; cat "$tmp/serve.log"; exit 1; }

# The job kind: default policy (queue behind the resource's running job), 3 attempts.
"$tmp/baton" kinds set apply --max-attempts 3 >/dev/null

# The service's own database, with one row per account.
export PYTHONPATH="$root/clients/python:$here"
python3 - "$tmp/app.db" "$here/schema.sql" <<'PY'
import sys
from pod import REQUESTS, app_db
db = app_db(sys.argv[1])
db.executescript(open(sys.argv[2]).read())
for r in sorted({r for r, _ in REQUESTS}):
    db.execute("INSERT INTO resources (id) VALUES (?)", (r,))
PY

expected=$(python3 -c 'from pod import REQUESTS; print(len(REQUESTS))')
podpids=()
for pod in pod-a pod-b pod-c; do
  python3 "$here/pod.py" "$pod" "$tmp/app.db" "$expected" >"$tmp/$pod.out" 2>&1 &
  podpids+=($!)
  pids+=($!)
done
for p in "${podpids[@]}"; do
  wait "$p" || { echo "a pod failed:"; cat "$tmp"/pod-*.out; exit 1; }
done
cat "$tmp"/pod-*.out

python3 "$here/check.py" "$tmp/app.db"
echo "multi-pod-services: ok"
