import threading
import time
import unittest

import baton
from proxy import Proxy, Shed
from server import BatonServer

SERVER = None


def setUpModule():
    global SERVER
    SERVER = BatonServer()
    SERVER.start()


def tearDownModule():
    SERVER.close()


def client(**kw):
    return baton.Client(SERVER.url, on_warning=lambda m, e: None, **kw)


class Waiter(threading.Thread):
    """A waiting acquire in a thread of its own: join() returns its lease (or raises its error)."""

    def __init__(self, c, key, **kw):
        super().__init__(daemon=True)
        self._call = lambda: c.acquire(key, **kw)
        self._out = None
        self._err = None
        self.start()

    def run(self):
        try:
            self._out = self._call()
        except BaseException as e:  # noqa: BLE001 - handed to join()
            self._err = e

    def join(self, timeout=None):
        super().join(timeout)
        if self._err is not None:
            raise self._err
        return self._out


class LockTest(unittest.TestCase):
    def test_try_acquire_conflict_renew_release_tokens(self):
        c = client()
        a = c.try_acquire("py/basic", ttl=5, holder="job-7", metadata={"pipeline": "12"})
        self.assertEqual(a.holder, "job-7")
        self.assertEqual(a.metadata, {"pipeline": "12"})
        with self.assertRaises(baton.LockHeldError) as cm:
            c.try_acquire("py/basic", holder="job-8")
        self.assertEqual(cm.exception.holder, "job-7")
        self.assertEqual(cm.exception.token, a.token)
        self.assertIsNotNone(cm.exception.expires_at)
        before = a.deadline
        a.renew()
        self.assertGreater(a.deadline, before, "a renew moves the local deadline")
        self.assertEqual(c.get("py/basic")["lease_id"], a.lease_id)
        a.release()
        self.assertIsInstance(a.reason, baton.LeaseReleased)
        a.release()  # harmless twice
        with self.assertRaises(baton.NotFoundError):
            c.get("py/basic")
        with c.lock("py/basic", wait=0) as b:
            self.assertGreater(b.token, a.token)
        with self.assertRaises(baton.NotFoundError):
            c.get("py/basic")

    def test_bad_input_and_cooldown(self):
        c = client()
        with self.assertRaises(baton.InvalidArgumentError) as cm:
            c.try_acquire("py/bad", ttl=0.01)
        self.assertEqual(cm.exception.field, "ttl_ms")
        self.assertEqual(cm.exception.status, 400)
        c.try_acquire("py/cool", cooldown=60).release()
        with self.assertRaises(baton.CooldownError) as cm:
            c.try_acquire("py/cool")
        self.assertEqual(cm.exception.reason, "cooldown")
        self.assertGreater(cm.exception.remaining, 0)

    def test_keys_with_slashes_and_dots(self):
        c = client()
        for key in ["team/db", "a//b", "/lead", "x/./y", "p/..", "../q", ".", "..", "sp ace/ü", "end/", "pct%2F"]:
            lease = c.try_acquire(key)
            self.assertEqual(c.get(key)["key"], key, baton.key_path(key))
            lease.release()

    # A long wait: the waiter's single long-poll lasts longer than the TTL. Its lease must be
    # usable for a full TTL from the grant, not from the request's start (already past then).
    def test_wait_longer_than_ttl(self):
        c = client()
        ttl = 2.0
        a = c.try_acquire("py/long", ttl=ttl, holder="first")
        started = time.monotonic()
        waiter = Waiter(c, "py/long", ttl=ttl, holder="second")
        time.sleep(1.5 * ttl + 0.5)  # the holder keeps it past a TTL (keepalive)
        self.assertFalse(a.lost.is_set(), f"keepalive kept the first lease: {a.reason}")
        a.release()
        b = waiter.join()
        waited = time.monotonic() - started
        self.assertGreaterEqual(waited, ttl)
        self.assertGreater(b.token, a.token)
        self.assertFalse(b.lost.is_set())
        # Measured from the request's start the deadline would be over a second in the past.
        self.assertGreater(b.remaining(), 0, f"remaining {b.remaining()} s after a {waited} s wait")
        self.assertGreater(b.deadline, started + waited - 0.25, "deadline measured from the grant")
        time.sleep(ttl + 0.5)
        self.assertFalse(b.lost.is_set(), str(b.reason))
        b.release()

    def test_server_restart_during_a_hold(self):
        c = client()
        ttl = 6.0
        a = c.try_acquire("py/restart", ttl=ttl, holder="holder")
        waiter = Waiter(c, "py/restart", ttl=ttl, holder="waiter", wait=60)
        SERVER.stop("kill")
        before = a.expires_at
        SERVER.start()  # same port, same SQLite file
        while a.expires_at == before:  # a renew after the restart, bounded by the lease's own deadline
            self.assertFalse(a.lost.wait(0.05), f"lease lost across the restart: {a.reason}")
        on_server = c.get("py/restart")
        self.assertEqual(on_server["lease_id"], a.lease_id)
        self.assertEqual(on_server["token"], a.token)
        a.release()
        b = waiter.join()
        self.assertEqual(b.holder, "waiter")
        self.assertGreater(b.token, a.token)
        b.release()

    def test_lease_loss_sets_lost_and_calls_on_lost(self):
        c = client()
        called = []
        a = c.try_acquire("py/lost", ttl=1.5, on_lost=called.append)
        c.force_release("py/lost", "test: take it away")
        self.assertTrue(a.lost.wait(30))  # the next keepalive renew is refused
        self.assertIsInstance(a.reason, baton.LeaseLostError)
        self.assertIsInstance(a.reason.__cause__, baton.NotHeldError)
        self.assertEqual(called, [a.reason])
        with self.assertRaises(baton.LeaseLostError):
            a.check()
        with self.assertRaises(baton.NotHeldError):
            a.release()

        start = time.monotonic()
        b = c.try_acquire("py/deadline", ttl=1.0, keepalive=False)
        self.assertTrue(b.lost.wait(30))
        elapsed = time.monotonic() - start
        self.assertIsInstance(b.reason, baton.LeaseLostError)
        # start + TTL*(1-drift) - margin = 0.89 s: never later than the server's expiry.
        self.assertLessEqual(b.deadline - start, 1.0 * 0.99 - 0.1 + 0.001)
        self.assertGreaterEqual(elapsed, 1.0 * 0.99 - 0.1 - 0.001)
        b.release()  # nobody took it: the release still frees it

    def test_with_block_raises_the_loss(self):
        c = client()
        with self.assertRaises(baton.LeaseLostError):
            with c.lock("py/with", ttl=1.5) as lease:
                c.force_release("py/with", "test")
                self.assertTrue(lease.lost.wait(30))
        with self.assertRaises(baton.NotFoundError):
            c.get("py/with")

    def test_wait_that_runs_out_names_the_holder(self):
        c = client()
        a = c.try_acquire("py/timeout", holder="busy", ttl=10)
        t0 = time.monotonic()
        with self.assertRaises(baton.LockHeldError) as cm:
            c.acquire("py/timeout", wait=0.7)
        self.assertEqual(cm.exception.holder, "busy")
        self.assertGreaterEqual(time.monotonic() - t0, 0.6)
        a.release()

    def test_module_level_lock_uses_baton_url(self):
        import os

        os.environ["BATON_URL"] = SERVER.url
        baton._client._default = None
        with baton.lock("py/module", ttl=5) as lease:
            self.assertEqual(baton.default_client().get("py/module")["token"], lease.token)


class RetryAfterTest(unittest.TestCase):
    def test_waiting_acquire_honours_retry_after(self):
        # A proxy in front of the real server answers the first acquire 503 overloaded.
        shed = Shed("/v1/locks/acquire", times=1)
        proxy = Proxy(SERVER.url, shed)
        self.addCleanup(proxy.close)
        c = baton.Client(proxy.url, on_warning=lambda m, e: None)
        lease = c.acquire("py/overloaded", wait=10)
        calls = shed.calls
        self.assertGreaterEqual(len(calls), 2)
        self.assertGreaterEqual(calls[1] - calls[0], 1.0, f"retried after {calls[1] - calls[0]} s")
        lease.release()
        # Without a wait, a 503 is the caller's to handle.
        shed.calls, shed.times = [], 1
        with self.assertRaises(baton.BatonError) as cm:
            c.try_acquire("py/overloaded")
        self.assertEqual(cm.exception.status, 503)
        self.assertEqual(cm.exception.retry_after, 1.0)
        self.assertTrue(cm.exception.retryable)


if __name__ == "__main__":
    unittest.main()
