"""Releases whose answer does not come, or comes as 503 overloaded, through a proxy in front of
a real baton serve."""

import unittest

import baton
from proxy import HoldRelease, Proxy, Shed
from server import BatonServer

SERVER = None


def setUpModule():
    global SERVER
    SERVER = BatonServer()
    SERVER.start()


def tearDownModule():
    SERVER.close()


def client(url, **kw):
    return baton.Client(url, on_warning=lambda m, e: None, **kw)


class ReleaseOutcomeUnknownTest(unittest.TestCase):
    """The Go Locker's ReleaseOutcomeUnknown case (store/storetest): a release that got no answer
    is applied after the same holder re-acquired the key. The server hands a live lease back to
    its holder, so without the client's rule the re-acquire returns the very lease the late
    release then ends, while another holder is granted the key."""

    def test_a_late_release_does_not_end_the_reacquired_lease(self):
        variants = {
            "try_acquire": lambda c, key, first: c.try_acquire(key, ttl=10, holder="deploy-worker-1"),
            "acquire": lambda c, key, first: c.acquire(key, ttl=10, holder="deploy-worker-1", wait=30),
            # The caller names the lease ID of the unsettled lease: a fresh grant under that ID
            # would be ended by the late release too.
            "same lease_id": lambda c, key, first: c.try_acquire(key, ttl=10, holder="deploy-worker-1",
                                                                 lease_id=first.lease_id),
        }
        for name, reacquire in variants.items():
            with self.subTest(name):
                self.check(f"py/unsettled/{name}", reacquire)

    def check(self, key, reacquire):
        proxy = Proxy(SERVER.url)
        held = HoldRelease(proxy)
        proxy.hook = held
        self.addCleanup(proxy.close)
        self.addCleanup(held.close)
        c = client(proxy.url)
        direct = client(SERVER.url)
        first = c.try_acquire(key, ttl=10, holder="deploy-worker-1")
        held.arm()
        with self.assertRaises(baton.BatonError) as cm:
            first.release(timeout=0.3)
        self.assertEqual(cm.exception.status, 0, "the held-back release got an answer")

        second = reacquire(c, key, first)
        status, out = held.deliver()
        self.assertIn(status, (200, 409), out)
        try:
            on_server = direct.get(key)
        except baton.NotFoundError:
            self.fail(f"the late release of lease {first.lease_id} ended the re-acquired lease {second.lease_id}")
        self.assertEqual(on_server["lease_id"], second.lease_id)
        self.assertNotEqual(second.lease_id, first.lease_id, "re-acquire handed back the lease whose release could still land")
        self.assertGreater(second.token, first.token, "the re-acquire must be a new grant")
        second.renew()
        with self.assertRaises(baton.LockHeldError):
            c.try_acquire(key, holder="deploy-worker-2")
        second.release()
        with self.assertRaises(baton.NotFoundError):
            direct.get(key)


class ReleaseOverloadedTest(unittest.TestCase):
    def test_release_waits_for_retry_after(self):
        shed = Shed("/v1/locks/release", times=1)
        proxy = Proxy(SERVER.url, shed)
        self.addCleanup(proxy.close)
        c = client(proxy.url)
        lease = c.try_acquire("py/shed-once", ttl=10)
        lease.release()  # the 503 is not the caller's to handle while the lease has time left
        self.assertEqual(len(shed.calls), 2)
        self.assertGreaterEqual(shed.calls[1] - shed.calls[0], 1.0, "retried before Retry-After")
        with self.assertRaises(baton.NotFoundError):
            client(SERVER.url).get("py/shed-once")
        self.assertFalse(c._unsettled.has(lease.lease_id))

    def test_release_shed_until_the_local_deadline_fails_and_is_not_handed_back(self):
        shed = Shed("/v1/locks/release", times=10**6, retry_after_ms=300)
        proxy = Proxy(SERVER.url, shed)
        self.addCleanup(proxy.close)
        c = client(proxy.url)
        lease = c.try_acquire("py/shed-always", ttl=3, holder="shed-holder", keepalive=False)
        with self.assertRaises(baton.BatonError) as cm:
            lease.release()
        self.assertEqual(cm.exception.status, 503)
        self.assertGreaterEqual(len(shed.calls), 2, "not retried")
        self.assertTrue(all(t < lease.deadline for t in shed.calls), "retried past the local deadline")
        self.assertGreater(shed.calls[-1], lease.deadline - 1.5, "gave up long before the local deadline")
        # Its outcome is not known to the client: the same holder does not get it back.
        self.assertTrue(c._unsettled.has(lease.lease_id))
        shed.times = 0
        again = c.try_acquire("py/shed-always", ttl=3, holder="shed-holder")
        self.assertNotEqual(again.lease_id, lease.lease_id)
        self.assertGreater(again.token, lease.token)
        again.release()


if __name__ == "__main__":
    unittest.main()
