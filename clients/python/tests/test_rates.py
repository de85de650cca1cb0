"""Rates of limits and of key prefixes against a real baton serve: set, list, delete; a lock
request over the rate is refused naming it; bad rates are 400s naming the field."""

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


class RatesTest(unittest.TestCase):
    def test_prefix_rate(self):
        c = client()
        r = c.set_prefix_rate("py-rated/", "1/1h")
        self.assertEqual((r["prefix"], r["rate"]), ("py-rated/", "1/1h"))
        self.assertEqual(c.get_prefix_rate("py-rated/"), r)
        self.assertIn(r, c.list_prefix_rates()["rates"])
        first = c.try_acquire("py-rated/a", keepalive=False)
        first.release()
        with self.assertRaises(baton.CooldownError) as refused:
            c.try_acquire("py-rated/b", keepalive=False)
        e = refused.exception
        self.assertEqual((e.reason, e.rate, e.prefix), ("rate", "1/1h", "py-rated/"))
        self.assertGreater(e.remaining, 3000)
        for bad, field in (("0/1m", "rate.max"), ("3/999ms", "rate.window"), ("3/31d", "rate.window")):
            with self.assertRaises(baton.InvalidArgumentError) as invalid:
                c.set_prefix_rate("py-other/", bad)
            self.assertEqual(invalid.exception.field, field)
        with self.assertRaises(baton.InvalidArgumentError) as overlap:
            c.set_prefix_rate("py-rated/x/", "1/1m")
        self.assertEqual(overlap.exception.field, "prefix")
        c.delete_prefix_rate("py-rated/")
        with self.assertRaises(baton.NotFoundError):
            c.get_prefix_rate("py-rated/")
        c.try_acquire("py-rated/b", keepalive=False).release()

    def test_limit_rate(self):
        c = client()
        lim = c.set_limit("py-api", 1000000, rate="1/1h")
        self.assertEqual(lim["rate"], "1/1h")
        c.try_acquire("py-api-1", limits=["py-api"], keepalive=False).release()
        with self.assertRaises(baton.CooldownError) as refused:
            c.try_acquire("py-api-2", limits=["py-api"], keepalive=False)
        self.assertEqual((refused.exception.reason, refused.exception.limit), ("rate", "py-api"))
        with self.assertRaises(baton.InvalidArgumentError) as invalid:
            c.set_limit("py-api", 5, rate="1000001/1m")
        self.assertEqual(invalid.exception.field, "rate.max")
        self.assertNotIn("rate", c.set_limit("py-api", 5))


if __name__ == "__main__":
    unittest.main()
