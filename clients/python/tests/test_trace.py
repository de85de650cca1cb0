import os
import unittest
from unittest import mock

import baton
from server import BatonServer

SERVER = None


def setUpModule():
    global SERVER
    SERVER = BatonServer()
    SERVER.start()
    baton.Client(SERVER.url, on_warning=lambda m, e: None).put_kind("traced")


def tearDownModule():
    SERVER.close()


def tp(n):
    return f"00-{n:032x}-{n + 1:016x}-01"


class TraceTest(unittest.TestCase):
    def test_job_keeps_the_traceparent_sent(self):
        c = baton.Client(SERVER.url, traceparent=tp(0xA1), on_warning=lambda m, e: None)
        job, _ = c.submit_job("traced", "trace/opt")
        self.assertEqual(job["traceparent"], tp(0xA1))
        own, _ = c.submit_job("traced", "trace/own", traceparent=tp(0xB2))
        self.assertEqual(own["traceparent"], tp(0xB2))
        self.assertEqual(c.get_job(own["id"])["traceparent"], tp(0xB2))
        with mock.patch.dict(os.environ, {"TRACEPARENT": tp(0xC3)}):
            env = baton.Client(SERVER.url, on_warning=lambda m, e: None)
            self.assertEqual(env.submit_job("traced", "trace/env")[0]["traceparent"], tp(0xC3))
        with mock.patch.dict(os.environ, {"TRACEPARENT": "not-a-traceparent"}):
            bad = baton.Client(SERVER.url, on_warning=lambda m, e: None)
            self.assertNotIn("traceparent", bad.submit_job("traced", "trace/bad-env")[0])
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("TRACEPARENT", None)
            none = baton.Client(SERVER.url, on_warning=lambda m, e: None)
            self.assertNotIn("traceparent", none.submit_job("traced", "trace/none")[0])
        with self.assertRaisesRegex(ValueError, "traceparent must be a W3C traceparent"):
            baton.Client(SERVER.url, traceparent="00-abc")
        with self.assertRaisesRegex(ValueError, "traceparent must be a W3C traceparent"):
            c.submit_job("traced", "trace/x", traceparent="nope")


if __name__ == "__main__":
    unittest.main()
