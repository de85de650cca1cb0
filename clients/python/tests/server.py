"""Starts a real `baton serve` (built from this repository unless BATON_BIN names a binary) on a
free loopback port with its own SQLite file, and restarts it on the same port and file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_built = None


def baton_binary() -> str:
    global _built
    if os.environ.get("BATON_BIN"):
        return os.environ["BATON_BIN"]
    if _built is None:
        d = tempfile.mkdtemp(prefix="baton-py-bin-")
        _built = os.path.join(d, "baton")
        subprocess.run(["go", "build", "-o", _built, "./cmd/baton"], cwd=REPO, check=True)
    return _built


class BatonServer:
    """args are more flags of `baton serve` (--auth-file F, --periodic-file F)."""

    def __init__(self, *args: str):
        self.dir = tempfile.mkdtemp(prefix="baton-py-")
        self.args = list(args)
        self.listen = "127.0.0.1:0"
        self.proc = None
        self.url = ""

    def start(self) -> str:
        args = [baton_binary(), "serve", "--listen", self.listen, "--store", f"sqlite://{self.dir}/b.db", *self.args]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found = threading.Event()
        log = []

        def read():
            for line in self.proc.stderr:
                log.append(line)
                m = re.search(r'baton serving"? url=(http://[0-9.:]+)', line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()  # exited

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        found.wait()
        if not self.url or self.proc.poll() is not None:
            raise RuntimeError("baton serve did not start:\n" + "".join(log))
        self.listen = self.url[len("http://"):]  # a restart takes the same port
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                time.sleep(0.02)

    def stop(self, sig: str = "kill") -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if sig == "kill":
            self.proc.kill()
        else:
            self.proc.terminate()
        self.proc.wait()
        self._reader.join()
        self.proc.stderr.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
