"""The API's routes beyond leases and the job lifecycle: batch submit, job counts, kinds,
periodic jobs, resources, clearing rests and cooldowns, fences; against a real baton serve."""

import json
import os
import unittest

import baton
from server import BatonServer

SERVER = None
C = None


def setUpModule():
    global SERVER, C
    SERVER = BatonServer()
    periodic = os.path.join(SERVER.dir, "periodic.json")
    with open(periodic, "w") as f:
        json.dump({"periodic": [{"name": "reconcile-web", "schedule": "@every 1h", "kind": "status.reconcile",
                                 "resource": "app/web", "args": {"app": "web"}, "policy": "skip"}]}, f)
    SERVER.args += ["--periodic-file", periodic]
    SERVER.start()
    C = baton.Client(SERVER.url, on_warning=lambda m, e: None)


def tearDownModule():
    SERVER.close()


def count(kind, state):
    return sum(c["count"] for c in C.job_counts() if c["kind"] == kind and c["state"] == state)


class JobRoutesTest(unittest.TestCase):
    def test_submit_many_all_or_nothing_counts_and_kinds(self):
        C.put_kind("batch.build", max_attempts=2)
        self.assertIn({"name": "batch.build", "max_attempts": 2},
                      [{k: v for k, v in kd.items() if k in ("name", "max_attempts")} for kd in C.list_kinds()])
        out = C.submit_many([{"kind": "batch.build", "resource": "repo/x", "args": {"n": 1}},
                             {"kind": "batch.build", "resource": "repo/x", "idempotency_key": "batch-x-2"},
                             {"kind": "batch.build", "resource": "repo/y"}])
        self.assertEqual([existing for _, existing in out], [False, False, False])
        jobs = [j for j, _ in out]
        self.assertEqual([j["resource"] for j in jobs], ["repo/x", "repo/x", "repo/y"], "results in submit order")
        self.assertEqual(jobs[0]["args"], {"n": 1})
        self.assertEqual(C.get_job(jobs[1]["id"])["idempotency_key"], "batch-x-2")
        self.assertEqual(count("batch.build", "available"), 3)

        again = C.submit_many([{"kind": "batch.build", "resource": "repo/x", "idempotency_key": "batch-x-2"}])
        self.assertEqual([(j["id"], e) for j, e in again], [(jobs[1]["id"], True)])
        # One bad job refuses the whole batch, naming it; nothing is written.
        with self.assertRaises(baton.InvalidArgumentError) as cm:
            C.submit_many([{"kind": "batch.build", "resource": "repo/z"}, {"kind": "batch.build"}])
        self.assertEqual(cm.exception.field, "jobs[1].resource")
        self.assertEqual(count("batch.build", "available"), 3)
        with self.assertRaises(baton.InvalidArgumentError) as cm:
            C.submit_many([])
        self.assertEqual(cm.exception.field, "jobs")

    def test_list_periodic(self):
        [p] = C.list_periodic()
        self.assertEqual((p["name"], p["schedule"], p["kind"], p["resource"], p["policy"]),
                         ("reconcile-web", "@every 1h", "status.reconcile", "app/web", "skip"))
        self.assertEqual(p["args"], {"app": "web"})
        self.assertTrue(p["next_run"].endswith("Z"), p)


class ResourceRoutesTest(unittest.TestCase):
    def test_state_compare_and_set(self):
        r = C.set_resource_state("env/cas", "PENDING")
        self.assertEqual((r["key"], r["state"]), ("env/cas", "PENDING"))
        r2 = C.set_resource_state("env/cas", "READY", if_version=r["version"])
        self.assertEqual(r2["version"], r["version"] + 1)
        with self.assertRaises(baton.VersionMismatchError) as cm:
            C.set_resource_state("env/cas", "FAILED", if_version=r["version"])
        e = cm.exception
        self.assertEqual((e.status, e.resource, e.if_version, e.current_version), (409, "env/cas", r["version"], r2["version"]))
        self.assertEqual(C.get_resource("env/cas")["state"], "READY", "a refused compare-and-set wrote nothing")
        with self.assertRaises(baton.NotFoundError):
            C.get_resource("env/never")
        with self.assertRaises(baton.InvalidArgumentError):
            C.set_resource_state("env/bad\x01", "READY")

    def test_keys_with_slashes_and_dots_and_paging(self):
        keys = ["res/team/db", "res/a//b", "res/end/", "res/x/./y", "res/p/..", ".", "..", "/res"]
        for k in keys:
            self.assertEqual(C.set_resource_state(k, "READY")["key"], k)
            self.assertEqual(C.get_resource(k)["key"], k)
        seen = []
        after = None
        while True:
            page = C.list_resources(prefix="res/", after=after, limit=2)
            seen += [r["key"] for r in page["resources"]]
            after = page.get("next_after")
            if not after:
                break
        self.assertEqual(seen, sorted(k for k in keys if k.startswith("res/")))

    def test_clear_resource_cooldown(self):
        C.put_kind("cool.deploy", resource_cooldown_ms=600_000)
        job, _ = C.submit_job("cool.deploy", "env/cool")
        [claimed] = C.claim_jobs("py-test", ["cool.deploy"], ttl=10)["jobs"]
        self.assertEqual(claimed["id"], job["id"])
        C.complete_job(claimed["id"], claimed["token"])
        cooling = C.get_resource("env/cool")["cooldown"]
        self.assertEqual(cooling["job"], job["id"])
        self.assertGreater(cooling["remaining_ms"], 0)
        cleared = C.clear_resource_cooldown("env/cool", "test: deploy again now")
        self.assertEqual((cleared["resource"], cleared["job"]), ("env/cool", job["id"]))
        self.assertNotIn("cooldown", C.get_resource("env/cool"))
        with self.assertRaises(baton.NotFoundError):
            C.clear_resource_cooldown("env/cool", "nothing to clear")

    def test_kind_rate(self):
        kind = C.put_kind("py.rated", rate="1/1h")
        self.assertEqual(kind["rate"], "1/1h")
        first, _ = C.submit_job("py.rated", "env/rated")
        second, _ = C.submit_job("py.rated", "env/rated")
        [claimed] = C.claim_jobs("py-test", ["py.rated"], ttl=10)["jobs"]
        self.assertEqual(claimed["id"], first["id"])
        C.complete_job(claimed["id"], claimed["token"])
        self.assertEqual(C.claim_jobs("py-test", ["py.rated"], ttl=10, wait=0)["jobs"], [])
        [rate] = C.get_resource("env/rated")["rates"]
        self.assertEqual((rate["kind"], rate["rate"]), ("py.rated", "1/1h"))
        reasons = C.explain_job(second["id"])["reasons"]
        self.assertIn("rate", [r["code"] for r in reasons])
        with self.assertRaises(baton.BatonError) as cm:
            C.put_kind("py.rated", rate="0/1h")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("rate.max", str(cm.exception))

    def test_clear_cooldown_of_keys_with_dot_segments(self):
        C.put_kind("cool.dots", resource_cooldown_ms=600_000)
        for key in ["victim", "evil/../victim", ".."]:
            C.submit_job("cool.dots", key)
            [claimed] = C.claim_jobs("py-test", ["cool.dots"], ttl=10)["jobs"]
            self.assertEqual(claimed["resource"], key)
            C.complete_job(claimed["id"], claimed["token"])
        self.assertEqual(C.clear_resource_cooldown("evil/../victim", "test")["resource"], "evil/../victim")
        self.assertNotIn("cooldown", C.get_resource("evil/../victim"))
        self.assertEqual(C.clear_resource_cooldown("..", "test")["resource"], "..")
        self.assertNotIn("cooldown", C.get_resource(".."))
        self.assertIn("cooldown", C.get_resource("victim"), "victim still cools down")


class LockAndFenceRoutesTest(unittest.TestCase):
    def test_clear_rest(self):
        C.try_acquire("py/rest", cooldown=60).release()
        with self.assertRaises(baton.CooldownError):
            C.try_acquire("py/rest")
        rest = C.clear_rest("py/rest", "test: take it now")
        self.assertEqual((rest["key"], rest["reason"]), ("py/rest", "cooldown"))
        self.assertGreater(rest["remaining_ms"], 0)
        lease = C.try_acquire("py/rest")
        with self.assertRaises(baton.NotFoundError):
            C.clear_rest("py/rest", "held, not resting")
        lease.release()

    def test_check_fence(self):
        # Tokens the store issued: a fence refuses any greater than the greatest issued.
        tokens = []
        for _ in range(2):
            lease = C.try_acquire("py/fence-tokens")
            tokens.append(lease.token)
            lease.release()
        older, newer = tokens
        self.assertEqual(C.check_fence("db/orders", older), {"resource": "db/orders", "token": older})
        self.assertEqual(C.check_fence("db/orders", newer)["token"], newer)
        self.assertEqual(C.check_fence("db/orders", newer)["token"], newer, "an equal token passes")
        with self.assertRaises(baton.StaleTokenError) as cm:
            C.check_fence("db/orders", older)
        e = cm.exception
        self.assertEqual((e.status, e.resource, e.token, e.current_token), (409, "db/orders", older, newer))
        with self.assertRaises(baton.InvalidArgumentError) as cm:
            C.check_fence("db/orders", newer + 1000)
        self.assertEqual(cm.exception.field, "token", "a token the store never issued is refused")
        with self.assertRaises(ValueError):
            C.check_fence("db/orders", 0)

    def test_reset_fence(self):
        # A fence that holds a newer token than any current holder (restored from a backup, say)
        # refuses everyone until an admin resets it; the reset answers the token it held.
        tokens = []
        for _ in range(2):
            lease = C.try_acquire("py/fence-reset-tokens")
            tokens.append(lease.token)
            lease.release()
        older, newer = tokens
        C.check_fence("db/restored", newer)
        with self.assertRaises(baton.StaleTokenError):
            C.check_fence("db/restored", older)
        self.assertEqual(C.reset_fence("db/restored", "restored from backup"), {"resource": "db/restored", "token": newer})
        self.assertEqual(C.check_fence("db/restored", older)["token"], older, "after the reset an older token passes")
        C.reset_fence("db/restored", "again")
        with self.assertRaises(baton.NotFoundError):
            C.reset_fence("db/restored", "no fence left")
        with self.assertRaises(ValueError):
            C.reset_fence("db/restored", "")


if __name__ == "__main__":
    unittest.main()


class ResourceLineTest(unittest.TestCase):
    def test_holder_rest_and_line_in_order(self):
        key = "line/py"
        with self.assertRaises(baton.NotFoundError):
            C.get_resource(key)
        C.put_kind("line.py")
        held = C.try_acquire(key, holder="ops", ttl=60, cooldown=3600)
        r = C.get_resource(key)
        self.assertEqual((r["state"], r["version"]), ("", 0), "a lock-only key is a resource while held")
        self.assertEqual((r["holder"]["holder"], r["holder"]["token"]), ("ops", held.token))
        self.assertEqual(r["line"], [])
        # A waiting request that gives up when its wait runs out keeps its ticket until the
        # ticket expires; made again if its wait ran out before its first attempt reached the
        # store.
        for _ in range(50):
            with self.assertRaises(baton.LockHeldError):
                C.acquire(key, holder="w1", lease_id="w1-lease", ttl=60, wait=0.5)
            if any(t["holder"] == "w1" for t in C.get_resource(key)["line"]):
                break
        else:
            self.fail("the ticket of w1 never appeared in the line")
        job, _ = C.submit_job("line.py", key)
        line = C.get_resource(key)["line"]
        self.assertEqual([(t["position"], t["type"], t["holder"]) for t in line],
                         [(1, "lock", "w1"), (2, "job", "job:%d" % job["id"])])
        self.assertEqual(line[0]["lease_id"], "w1-lease")
        self.assertIn("expires_at", line[0])
        self.assertEqual((line[1]["job"], line[1]["kind"]), (job["id"], "line.py"))
        self.assertNotIn("expires_at", line[1])
        self.assertEqual([t["holder"] for t in C.get_resource(key, line_limit=1)["line"]], ["w1"])
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            C.get_resource(key, line_limit=0)
        self.assertEqual(bad.exception.field, "line_limit")
        held.release()
        r = C.get_resource(key)
        self.assertNotIn("holder", r)
        self.assertEqual(r["rest"]["reason"], "cooldown")
        self.assertGreater(r["rest"]["remaining_ms"], 59 * 60 * 1000)


class ExplainTest(unittest.TestCase):
    def test_explain_job_and_resource(self):
        key = "explain/py"
        C.put_kind("explain.py")
        first, _ = C.submit_job("explain.py", key)
        [claimed] = C.claim_jobs("py-explain", ["explain.py"], ttl=60)["jobs"]
        self.assertEqual(claimed["id"], first["id"])
        second, _ = C.submit_job("explain.py", key)
        e = C.explain_job(second["id"])
        self.assertEqual((e["key"], e["job"], e["job_state"]), (key, second["id"], "available"))
        self.assertEqual((e["reasons"][0]["code"], e["reasons"][0]["holder"]), ("held", f"job:{first['id']}"))
        self.assertEqual(C.explain_job(first["id"])["reasons"], [], "a running job is not waiting")
        r = C.explain_resource(key)
        self.assertEqual([x["code"] for x in r["reasons"]], ["held", "ahead"])
        self.assertEqual(r["reasons"][1]["ahead"], 1)
        self.assertEqual(C.explain_resource("explain/free")["reasons"], [])
        with self.assertRaises(baton.NotFoundError):
            C.explain_job(999999)
