"""An HTTP proxy on a free loopback port in front of a real `baton serve`, for the faults a
server does not make on demand: an overloaded answer, a release whose answer never comes."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, Dict, Optional, Tuple

# The headers a client's request keeps on its way to the server.
_FORWARDED = ("content-type", "accept", "authorization")


class Request:
    def __init__(self, method: str, path: str, headers: Dict[str, str], body: Optional[bytes]):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body

    def json(self) -> dict:
        return json.loads(self.body or b"{}")


class Proxy:
    """Forwards every request to target, unless hook(request, handler) returns True: the hook
    then answered it itself (Proxy.answer), or left its client without an answer."""

    def __init__(self, target: str, hook: Optional[Callable[[Request, http.server.BaseHTTPRequestHandler], bool]] = None):
        self.target = target
        self.hook = hook
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                proxy._handle(self)

            do_POST = do_PUT = do_DELETE = do_GET

        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0)) or None
        req = Request(h.command, h.path, {k: v for k, v in h.headers.items() if k.lower() in _FORWARDED}, body)
        hook = self.hook
        if hook is not None and hook(req, h):
            return
        status, ctype, out = self.forward(req)
        self.answer(h, status, out, ctype)

    def forward(self, req: Request) -> Tuple[int, str, bytes]:
        """Sends req to the server: (status, content type, body)."""
        r = urllib.request.Request(self.target + req.path, data=req.body, method=req.method, headers=req.headers)
        try:
            with urllib.request.urlopen(r, timeout=60) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read()

    @staticmethod
    def answer(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, ctype: str = "application/json",
               headers: Optional[Dict[str, str]] = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype or "application/json")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


def overloaded(h: http.server.BaseHTTPRequestHandler, retry_after_ms: int = 1000) -> None:
    """Answers as an overloaded server does: 503 overloaded with Retry-After."""
    out = json.dumps({"type": "https://baton.dev/problems/overloaded", "title": "Server overloaded", "status": 503,
                      "code": "overloaded", "retry_after_ms": retry_after_ms}).encode()
    Proxy.answer(h, 503, out, "application/problem+json", {"Retry-After": str(max(1, retry_after_ms // 1000))})


class Shed:
    """A hook that answers the first `times` requests to path 503 overloaded, and records when
    each request to path came (time.monotonic())."""

    def __init__(self, path: str, times: int, retry_after_ms: int = 1000):
        self.path = path
        self.times = times
        self.retry_after_ms = retry_after_ms
        self.calls = []
        self._mu = threading.Lock()

    def __call__(self, req: Request, h) -> bool:
        if req.path != self.path:
            return False
        with self._mu:
            self.calls.append(time.monotonic())
            shed = len(self.calls) <= self.times
        if shed:
            overloaded(h, self.retry_after_ms)
        return shed


class HoldRelease:
    """A hook that holds back the next release once armed, as a stalled network or a queued
    statement does: its client gets no answer (its request times out), but deliver() still
    forwards it to the server later, as a server that had received it would apply it."""

    def __init__(self, proxy: Proxy):
        self._proxy = proxy
        self._mu = threading.Lock()
        self._armed = False
        self._go = threading.Event()
        self._done = threading.Event()
        self.result: Optional[Tuple[int, str, bytes]] = None

    def arm(self) -> None:
        with self._mu:
            self._armed = True

    def __call__(self, req: Request, h) -> bool:
        if req.path != "/v1/locks/release":
            return False
        with self._mu:
            armed, self._armed = self._armed, False
        if not armed:
            return False
        # Bounded, so that a test that fails before deliver() does not leave the thread behind.
        if self._go.wait(120):
            self.result = self._proxy.forward(req)
        self._done.set()
        return True  # no answer: the client gave up long ago

    def close(self) -> None:
        """Lets a release still held back go, so that its thread ends."""
        self._go.set()

    def deliver(self) -> Tuple[int, dict]:
        """Forwards the held-back release now; returns the server's status and answer to it."""
        self._go.set()
        if not self._done.wait(60) or self.result is None:
            raise AssertionError("no release was held back")
        status, _, out = self.result
        return status, json.loads(out)
