"""One pod of a small service that changes resources on request, several of which run at once.

Usage: python3 pod.py POD_NAME APP_DB EXPECTED_JOBS

It does what the team's concurrency standards did by hand, with Baton (the Python client,
standard library only; BATON_URL names the server):

1. Idempotent API operations: every request is submitted as a job with an Idempotency-Key
   derived from the request. Every pod submits the same requests here (a client retrying on
   another pod, a message delivered twice): the server keeps one job per key and answers the
   others with it (existing=True).
2. Exclusive processing: the pods run job workers; the server hands out the jobs of one resource
   one at a time, in submission order, each under a lease that the worker renews.
3. Conditional update: the handler writes to the service's own database only with the job's
   fencing token, in one statement guarded by the token last written to the row
   ("... WHERE id = ? AND token < ?"). A pod that was paused past its lease has a lower token
   than the writer after it: its late write changes no row, and the handler stops.
4. Crash recovery: no timeout monitor. A pod that dies mid-job stops renewing; the server's
   reaper gives the job to another pod after the lease TTL.

APP_DB is the service's own database (SQLite here, standard library); it also records each run
(pod, job, token, start, end) so that check.py can verify what happened.
"""
import json
import os
import sqlite3
import sys
import threading
import time

import baton

REQUESTS = [(f"account/{a}", op) for a in ("alice", "bob", "carol", "dave") for op in ("open", "credit", "audit")]


def app_db(path):
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    return db


def fenced_update(db, resource, op, token):
    """Applies op to the resource row if token is newer than the last writer's; returns whether it did."""
    cur = db.execute(
        "UPDATE resources SET applied = applied || ? || ' ', token = ? WHERE id = ? AND token < ?",
        (op, token, resource, token))
    return cur.rowcount == 1


def main():
    pod, path, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = baton.Client(ttl=5, claim_wait=1, on_warning=lambda m, e: None)
    db = app_db(path)

    # 1. Every pod submits every request; the idempotency key makes it one job per request.
    for resource, op in REQUESTS:
        job, existing = client.submit_job("apply", resource, {"op": op}, idempotency_key=f"{resource}:{op}")
        db.execute("INSERT INTO submits (pod, idem_key, job_id, existing) VALUES (?, ?, ?, ?)",
                   (pod, f"{resource}:{op}", job["id"], int(existing)))

    # 2. and 3. Run jobs; each writes with its fencing token, guarded by the row's last token.
    def handle(run):
        job = run.job
        db = app_db(path)  # a connection per job: handlers run in threads of their own
        start = time.time()
        time.sleep(0.05)  # the work; a second pod on the same resource would overlap here
        if run.stop.is_set():
            raise run.reason
        if not fenced_update(db, job["resource"], job["args"]["op"], job["token"]):
            raise baton.PermanentError(f"stale fencing token {job['token']} for {job['resource']}")
        db.execute("INSERT INTO runs (pod, job_id, resource, op, token, start, end) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (pod, job["id"], job["resource"], job["args"]["op"], job["token"], start, time.time()))

    stop = threading.Event()

    def until_done():
        # The pods stop once every job has ended (a real service would run until shut down).
        while not stop.is_set():
            jobs = client.list_jobs(kind="apply", limit=1000)["jobs"]
            if len(jobs) >= expected and all(j["state"] in ("succeeded", "discarded", "cancelled") for j in jobs):
                stop.set()
            stop.wait(0.1)

    threading.Thread(target=until_done, daemon=True).start()
    def on_job_end(job, err):
        if err is not None:
            print(f"{pod}: job {job['id']} failed: {err!r}", file=sys.stderr)

    client.run_worker(["apply"], handle, worker=pod, concurrency=2, ttl=5, stop=stop, on_job_end=on_job_end)
    print(json.dumps({"pod": pod, "ran": db.execute("SELECT count(*) FROM runs WHERE pod = ?", (pod,)).fetchone()[0]}))


if __name__ == "__main__":
    main()
