"""Checks what the pods did: no duplicate job, no overlap on a resource, tokens increasing, every
operation applied once, and a stale token refused by the conditional update.

Usage: python3 check.py APP_DB
"""
import collections
import sys

import baton
from pod import REQUESTS, app_db, fenced_update

failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def main():
    db = app_db(sys.argv[1])
    client = baton.Client()
    jobs = client.list_jobs(kind="apply", limit=1000)["jobs"]

    # Idempotency: one job per request, whichever pod submitted it, and every pod got its ID.
    check(len(jobs) == len(REQUESTS), f"{len(jobs)} jobs for {len(REQUESTS)} requests submitted by every pod (idempotency keys)")
    per_key = collections.defaultdict(set)
    pods = set()
    for pod, key, job_id, existing in db.execute("SELECT pod, idem_key, job_id, existing FROM submits"):
        per_key[key].add(job_id)
        pods.add(pod)
    check(all(len(ids) == 1 for ids in per_key.values()) and len(per_key) == len(REQUESTS),
          f"each idempotency key named one job for all {len(pods)} pods")
    created = db.execute("SELECT count(*) FROM submits WHERE existing = 0").fetchone()[0]
    check(created == len(REQUESTS), f"{created} submits created a job; the other "
          f"{db.execute('SELECT count(*) FROM submits WHERE existing = 1').fetchone()[0]} got the existing one")
    check(all(j["state"] == "succeeded" for j in jobs), "every job succeeded")

    # One job per resource at a time: the runs of a resource do not overlap, in submission order.
    runs = collections.defaultdict(list)
    ran_by = collections.Counter()
    for pod, job_id, resource, op, token, start, end in db.execute(
            "SELECT pod, job_id, resource, op, token, start, end FROM runs ORDER BY start"):
        runs[resource].append((start, end, token, job_id, op))
        ran_by[pod] += 1
    overlaps = [(r, a[3], b[3]) for r, rs in runs.items() for a, b in zip(rs, rs[1:]) if b[0] < a[1]]
    check(not overlaps, f"no two runs on one resource overlapped ({sum(len(v) for v in runs.values())} runs "
          f"by {len(ran_by)} pods: {dict(sorted(ran_by.items()))}) {overlaps or ''}")
    check(all([x[2] for x in rs] == sorted(x[2] for x in rs) and len({x[2] for x in rs}) == len(rs) for rs in runs.values()),
          "fencing tokens strictly increase on each resource")
    check(all([x[3] for x in rs] == sorted(x[3] for x in rs) for rs in runs.values()),
          "each resource's jobs ran in submission order")
    applied = {r: a.split() for r, a in db.execute("SELECT id, applied FROM resources")}
    want = collections.defaultdict(list)
    for r, op in REQUESTS:
        want[r].append(op)
    check(applied == dict(want), f"every operation applied exactly once, in order: {applied}")

    # The conditional update refuses a late write with an older token (a pod paused past its lease).
    resource = REQUESTS[0][0]
    if not runs[resource]:
        check(False, f"no run on {resource} to take a stale token from")
        sys.exit(1)
    last = db.execute("SELECT token FROM resources WHERE id = ?", (resource,)).fetchone()[0]
    stale = runs[resource][0][2]
    wrote = fenced_update(db, resource, "late-write", stale)
    check(not wrote, f"a late write to {resource} with stale token {stale} changed nothing (last token {last})")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
