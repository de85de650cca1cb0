"""The client never follows a redirect: Baton's API does not redirect, and following one would send
the bearer token (and the request) to whatever the Location names."""

import http.server
import json
import threading
import unittest

import baton


class _Server:
    """A local HTTP server on a free loopback port, answering every request with handle(h)."""

    def __init__(self, handle):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.requests.append((self.command, self.path, self.headers.get("Authorization")))
                handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *a):
                pass

        self.requests = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class RedirectTest(unittest.TestCase):
    def setUp(self):
        # The other host records what reaches it, and answers as a Baton server would, so that a
        # client that followed the redirect would succeed quietly.
        def answer(h):
            body = json.dumps({"lease": {"key": "k", "lease_id": "x", "holder": "h", "token": 1,
                                         "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-01T00:00:15Z",
                                         "ttl_left_ms": 15000}}).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)

        self.other = _Server(answer)
        self.addCleanup(self.other.close)
        self.status = 307

        def redirect(h):
            h.send_response(self.status)
            h.send_header("Location", self.other.url + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

        self.redirector = _Server(redirect)
        self.addCleanup(self.redirector.close)

    def test_a_redirect_is_an_error_naming_the_location_and_the_token_stays_home(self):
        c = baton.Client(self.redirector.url, token="py-secret-token", on_warning=lambda m, e: None)
        calls = {
            "GET": lambda: c.get("team/db"),
            "POST": lambda: c.force_release("team/db", "redirect test"),
        }
        for status in (301, 302, 303, 307, 308):
            for method, call in calls.items():
                with self.subTest(status=status, method=method):
                    self.status = status
                    with self.assertRaises(baton.RedirectError) as cm:
                        call()
                    e = cm.exception
                    self.assertEqual(e.status, status)
                    path = "/v1/locks/team/db" if method == "GET" else "/v1/locks/force-release"
                    self.assertEqual(e.location, self.other.url + path)
                    self.assertFalse(e.retryable)
                    self.assertIn(self.other.url, str(e), "the error names the Location")
                    self.assertIn("redirect", str(e))
        self.assertEqual(len(self.redirector.requests), 10)
        self.assertEqual(self.other.requests, [], "the client followed a redirect to another host")


if __name__ == "__main__":
    unittest.main()
