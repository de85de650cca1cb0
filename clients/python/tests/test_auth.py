"""Bearer tokens against a real baton serve started with --auth-file."""

import hashlib
import os
import time
import unittest

import baton
from server import BatonServer

SERVER = None
TOKENS = {"reader": ("read", "py-read-token"), "deployer": ("write", "py-write-token"), "ops": ("admin", "py-admin-token")}


def setUpModule():
    global SERVER
    SERVER = BatonServer()
    path = os.path.join(SERVER.dir, "tokens")
    with open(path, "w") as f:
        f.write("# name role sha256-of-token\n")
        for name, (role, token) in TOKENS.items():
            f.write(f"{name} {role} {hashlib.sha256(token.encode()).hexdigest()}\n")
    SERVER.args += ["--auth-file", path]
    SERVER.start()


def tearDownModule():
    SERVER.close()


def client(token):
    return baton.Client(SERVER.url, token=token, on_warning=lambda m, e: None)


class AuthTest(unittest.TestCase):
    def test_missing_and_wrong_tokens_are_refused(self):
        for name, token in [("missing", ""), ("wrong", "py-not-a-token")]:
            with self.subTest(name):
                with self.assertRaises(baton.AuthError) as cm:
                    client(token).list()
                e = cm.exception
                self.assertEqual((e.status, e.code), (401, "unauthorized"))
                self.assertFalse(e.retryable)
                # A waiting acquire gives up at once: refused credentials do not change by waiting.
                start = time.monotonic()
                with self.assertRaises(baton.AuthError):
                    client(token).acquire("py/auth", wait=60)
                self.assertLess(time.monotonic() - start, 30)

    def test_roles(self):
        reader, writer, admin = client("py-read-token"), client("py-write-token"), client("py-admin-token")
        self.assertEqual(reader.list(prefix="py/")["leases"], [])
        with self.assertRaises(baton.AuthError) as cm:
            reader.try_acquire("py/auth-roles")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        lease = writer.try_acquire("py/auth-roles", holder="deployer-1", ttl=3)
        with self.assertRaises(baton.AuthError) as cm:
            writer.force_release("py/auth-roles", "a writer is not an admin")
        self.assertEqual(cm.exception.status, 403)
        self.assertEqual(reader.get("py/auth-roles")["holder"], "deployer-1", "a refused force-release changed nothing")
        self.assertEqual(admin.force_release("py/auth-roles", "test")["lease_id"], lease.lease_id)
        self.assertTrue(lease.lost.wait(30))  # keepalive's renew is answered not_held
        self.assertIsInstance(lease.reason.__cause__, baton.NotHeldError)


if __name__ == "__main__":
    unittest.main()
