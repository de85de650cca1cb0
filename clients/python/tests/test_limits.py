import unittest

import baton
from server import BatonServer

SERVER = None


def setUpModule():
    global SERVER
    SERVER = BatonServer()
    SERVER.start()


def tearDownModule():
    SERVER.close()


def client():
    return baton.Client(SERVER.url, on_warning=lambda m, e: None)


class LimitsTest(unittest.TestCase):
    def test_limit_set_full_list_delete(self):
        c = client()
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            c.set_limit("gpu/pool", 0)
        self.assertEqual(bad.exception.field, "capacity")
        self.assertEqual(c.set_limit("gpu/pool", 1)["capacity"], 1)
        a = c.try_acquire("gpu/pool", shared=True, limits=["gpu/pool"], keepalive=False)
        self.assertTrue(a.shared)
        self.assertEqual(a.limits, ["gpu/pool"])
        self.assertEqual(a.slots, {"gpu/pool": 0})
        with self.assertRaises(baton.LockHeldError) as full:
            c.try_acquire("gpu/pool", shared=True, limits=["gpu/pool"], keepalive=False)
        self.assertEqual((full.exception.limit, full.exception.in_use, full.exception.capacity), ("gpu/pool", 1, 1))
        self.assertEqual(c.get_limit("gpu/pool")["in_use"], 1)
        self.assertEqual([(l["name"], l["in_use"]) for l in c.list_limits()["limits"]], [("gpu/pool", 1)])
        with self.assertRaises(baton.LimitInUseError) as in_use:
            c.delete_limit("gpu/pool")
        self.assertEqual(in_use.exception.in_use, 1)
        a.release()
        self.assertEqual(c.delete_limit("gpu/pool"), {"name": "gpu/pool", "deleted": True})
        with self.assertRaises(baton.NotFoundError):
            c.get_limit("gpu/pool")

    def test_several_keys_all_or_nothing(self):
        c = client()
        b = c.try_acquire("db/b", holder="b", keepalive=False)
        with self.assertRaises(baton.LockHeldError) as refused:
            c.try_acquire("db/a", resources=["db/b"], keepalive=False)
        self.assertEqual((refused.exception.resource, refused.exception.holder), ("db/b", "b"))
        with self.assertRaises(baton.NotFoundError):
            c.get("db/a")
        b.release()
        both = c.try_acquire("db/a", resources=["db/b"], keepalive=False)
        self.assertEqual(both.resources, ["db/b"])
        both.release()
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            c.try_acquire("bad", limits=["no-such"])
        self.assertEqual(bad.exception.field, "limits")


if __name__ == "__main__":
    unittest.main()
