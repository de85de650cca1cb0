"""Trees against a real baton serve: set, get, list, delete; a refusal by a related key names it;
a tree in use cannot change; odd prefixes round-trip."""

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


class TreesTest(unittest.TestCase):
    def test_tree_set_refusal_in_use_delete(self):
        c = client()
        with self.assertRaises(baton.InvalidArgumentError) as bad:
            c.set_tree("cluster")
        self.assertEqual(bad.exception.field, "prefix")
        t = c.set_tree("cluster/")
        self.assertEqual((t["prefix"], t["root"]), ("cluster/", "cluster"))
        self.assertEqual(c.set_tree("cluster/"), t)
        self.assertEqual(c.get_tree("cluster/"), t)
        with self.assertRaises(baton.InvalidArgumentError) as overlap:
            c.set_tree("cluster/eu/")
        self.assertEqual(overlap.exception.field, "prefix")
        self.assertIn("overlaps", overlap.exception.rule)

        parent = c.try_acquire("cluster/eu-1", holder="upgrade", keepalive=False)
        with self.assertRaises(baton.LockHeldError) as refused:
            c.try_acquire("cluster/eu-1/node/a", keepalive=False)
        e = refused.exception
        self.assertEqual((e.key, e.related, e.holder, e.token), ("cluster/eu-1/node/a", "cluster/eu-1", "upgrade", parent.token))
        with self.assertRaises(baton.TreeInUseError) as in_use:
            c.delete_tree("cluster/")
        e = in_use.exception
        self.assertEqual((e.prefix, e.key, e.what), ("cluster/", "cluster/eu-1", "lease"))
        parent.release()

        self.assertEqual(c.delete_tree("cluster/"), {"prefix": "cluster/", "deleted": True})
        with self.assertRaises(baton.NotFoundError):
            c.get_tree("cluster/")
        with self.assertRaises(baton.NotFoundError):
            c.delete_tree("cluster/")

    def test_odd_prefixes_round_trip_and_the_list_pages(self):
        c = client()
        odd = ["sp ace/q?u#e%ry/ü/../.bin/", "a/./", "z/"]
        for p in odd:
            self.assertEqual(c.set_tree(p)["prefix"], p)
        for p in odd:
            self.assertEqual(c.get_tree(p)["prefix"], p)
        first = c.list_trees(limit=2)
        self.assertEqual([t["prefix"] for t in first["trees"]], ["a/./", odd[0]])
        rest = c.list_trees(limit=2, cursor=first["next_cursor"])
        self.assertEqual([t["prefix"] for t in rest["trees"]], ["z/"])
        for p in odd:
            self.assertEqual(c.delete_tree(p), {"prefix": p, "deleted": True})
        self.assertEqual(c.list_trees()["trees"], [])


if __name__ == "__main__":
    unittest.main()
