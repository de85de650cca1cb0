import threading
import unittest

import baton
from server import BatonServer

SERVER = None
C = None


def setUpModule():
    global SERVER, C
    SERVER = BatonServer()
    SERVER.start()
    C = baton.Client(SERVER.url, on_warning=lambda m, e: None)
    C.put_kind("build", max_attempts=3)
    C.put_kind("deploy", policy="reject", max_attempts=1)


def tearDownModule():
    SERVER.close()


class JobsTest(unittest.TestCase):
    def test_submit_idempotency_get_list_cancel_retry(self):
        job, existing = C.submit_job("build", "repo/a", {"ref": "main"}, idempotency_key="build-a-1")
        self.assertFalse(existing)
        self.assertEqual(job["state"], "available")
        again, existing = C.submit_job("build", "repo/a", {"ref": "other"}, idempotency_key="build-a-1")
        self.assertTrue(existing)
        self.assertEqual(again["id"], job["id"])
        self.assertEqual(C.get_job(job["id"])["args"], {"ref": "main"})
        self.assertEqual([j["id"] for j in C.list_jobs(kind="build", resource="repo/a")["jobs"]], [job["id"]])
        self.assertEqual(C.cancel_job(job["id"])["state"], "cancelled")
        with self.assertRaises(baton.JobStateError):
            C.cancel_job(job["id"])
        self.assertEqual(C.retry_job(job["id"])["state"], "available")
        C.cancel_job(job["id"])
        with self.assertRaises(baton.NotFoundError):
            C.get_job(999999)
        C.submit_job("deploy", "env/busy")
        with self.assertRaises(baton.ResourceBusyError):
            C.submit_job("deploy", "env/busy")

    def test_job_with_limits_resources_and_mode(self):
        C.set_limit("py/global", 2)
        C.set_limit("py/zone/eu", 2)
        kind = C.put_kind("py.drain", mode="shared", limits=["py/zone/{args.zone}"])
        self.assertEqual((kind["mode"], kind["limits"]), ("shared", ["py/zone/{args.zone}"]))
        self.assertIn("py/zone/{args.zone}", [l for k in C.list_kinds() if k["name"] == "py.drain" for l in k["limits"]])
        job, _ = C.submit_job("py.drain", "py/node/1", {"zone": "eu"}, resources=["py/rack/1"], limits=["py/global"])
        want = (True, ["py/rack/1"], ["py/global", "py/zone/eu"])
        self.assertEqual((job.get("shared"), job.get("resources"), job.get("limits")), want)
        got = C.get_job(job["id"])
        self.assertEqual((got.get("shared"), got.get("resources"), got.get("limits")), want)
        plain, _ = C.submit_job("build", "py/node/2", shared=True, limits=["py/global"])
        self.assertEqual((plain.get("shared"), plain.get("limits")), (True, ["py/global"]))
        many = C.submit_many([{"kind": "build", "resource": "py/node/3", "mode": "exclusive", "limits": ["py/global"]}])
        self.assertEqual((many[0][0].get("shared"), many[0][0]["limits"]), (None, ["py/global"]))
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            C.submit_job("build", "py/node/4", limits=["py/no-such"])
        self.assertEqual(bad.exception.field, "limits")
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            C.submit_job("build", "py/node/4", shared=True, mode="exclusive")
        self.assertEqual(bad.exception.field, "mode")
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            C.submit_job("py.drain", "py/node/4")
        self.assertEqual(bad.exception.field, "args.zone")

    def test_worker_one_at_a_time_per_resource_with_fencing_tokens(self):
        ids = [C.submit_job("build", "repo/w", {"n": i})[0]["id"] for i in range(4)]
        failing = C.submit_job("build", "repo/perm", {"fail": True})[0]["id"]
        stop = threading.Event()
        mu = threading.Lock()
        running = [0]
        overlap = []
        seen = []
        ended = set()

        def handler(run):
            if run.job["args"].get("fail"):
                raise baton.PermanentError("cannot build this")
            if run.job["resource"] == "repo/w":
                with mu:
                    running[0] += 1
                    if running[0] > 1:
                        overlap.append(run.job["id"])
                    seen.append((run.job["args"]["n"], run.job["token"]))
                stop.wait(0.03)
                with mu:
                    running[0] -= 1

        def on_end(job, err):
            with mu:
                ended.add(job["id"])
                if all(i in ended for i in ids + [failing]):
                    stop.set()

        C.run_worker(["build"], handler, concurrency=3, ttl=3, stop=stop, on_job_end=on_end)
        self.assertEqual(overlap, [], "two jobs of one resource ran at once")
        self.assertEqual([n for n, _ in seen], [0, 1, 2, 3], "in submission order")
        tokens = [t for _, t in seen]
        self.assertEqual(tokens, sorted(set(tokens)), "tokens increase")
        for i in ids:
            self.assertEqual(C.get_job(i)["state"], "succeeded")
        dead = C.get_job(failing)
        self.assertEqual(dead["state"], "discarded")
        self.assertEqual(dead["errors"][-1]["code"], "permanent")

    def test_cancel_and_lease_loss_stop_the_handler(self):
        job, _ = C.submit_job("build", "repo/cancel")
        stop = threading.Event()
        reasons = []

        def cancelled(run):
            C.cancel_job(run.job["id"])  # running: only asked to stop; the next heartbeat says so
            self.assertTrue(run.stop.wait(30))
            reasons.append(run.reason)
            raise run.reason

        C.run_worker(["build"], cancelled, ttl=1.5, stop=stop, on_job_end=lambda j, e: stop.set())
        self.assertIsInstance(reasons[0], baton.JobCancelled)
        self.assertEqual(C.get_job(job["id"])["state"], "cancelled")

        # Lease loss: the server is killed while the handler runs and comes back only after the
        # job lease's local deadline, so no heartbeat can succeed in time.
        lost, _ = C.submit_job("build", "repo/lost")
        stop2 = threading.Event()
        seen = {}

        def loses(run):
            seen["token"] = run.job["token"]
            SERVER.stop("kill")
            self.assertTrue(run.stop.wait(30))
            seen["reason"] = run.reason
            seen["lease_lost"] = run.lease_lost.is_set()

        C.run_worker(["build"], loses, ttl=1.5, stop=stop2, on_job_end=lambda j, e: stop2.set())
        SERVER.start()
        self.assertIsInstance(seen["reason"], baton.LeaseLostError)
        self.assertTrue(seen["lease_lost"])
        after = C.get_job(lost["id"])
        self.assertIn(after["state"], ("running", "retryable", "available"))
        self.assertEqual(after["errors"], [], "the lost attempt was not reported")
        self.assertEqual(after["token"], seen["token"])


if __name__ == "__main__":
    unittest.main()
