from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from ._timing import jitter, now, retry_interval, validity
from ._unsettled import settled
from .errors import BatonError, LeaseLostError, LeaseReleased, NotHeldError


class Lease:
    """One acquisition of a key.

    `lost` is set, and `on_lost(reason)` called once, at the holder's local deadline (the grant's
    safe lower bound + TTL*(1-drift) - margin on the monotonic clock) unless a renew succeeded
    first, or at once when the server says the lease is not held: stop the work under it then,
    before the server could give the key to anyone else. Keepalive renews every TTL/3 in a daemon
    thread and retries transient failures quickly until the local deadline.

    Used as a context manager it releases on exit; if the lease was lost while the block ran and
    the block raised nothing, exit raises the LeaseLostError (the work may have overlapped with
    the next holder's).
    """

    def __init__(self, client, rec: dict, ttl: float, granted_at: float, keepalive: bool,
                 on_lost: Optional[Callable[[BaseException], None]] = None):
        self._client = client
        self.ttl = ttl
        self.key: str = rec["key"]
        self.lease_id: str = rec["lease_id"]
        self.holder: str = rec["holder"]
        self.token: int = rec["token"]
        self.acquired_at: str = rec["acquired_at"]
        self.expires_at: str = rec["expires_at"]
        self.metadata = rec.get("metadata")
        self.took_over: bool = rec.get("took_over", False)
        self.shared: bool = rec.get("shared", False)
        self.resources: list = rec.get("resources", [])
        self.limits: list = rec.get("limits", [])
        # The slot of each unit held, by limit name (0..N-1): fence a slot as the key "name#slot".
        self.slots: dict = rec.get("slots", {})
        self.lost = threading.Event()
        self.reason: Optional[BaseException] = None
        self.on_lost = on_lost
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._released = False
        self._local_end = granted_at + self._validity()
        self._deadline_timer: Optional[threading.Timer] = None
        self._arm_deadline()
        self._thread: Optional[threading.Thread] = None
        if keepalive:
            self._thread = threading.Thread(target=self._keepalive, name=f"baton-keepalive {self.key}", daemon=True)
            self._thread.start()

    def _validity(self) -> float:
        c = self._client
        return validity(self.ttl, c.drift_factor, c.safety_margin)

    def _arm_deadline(self) -> None:
        # Under _mu or in __init__.
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        t = threading.Timer(max(0.0, self._local_end - now()), self._expire_locally)
        t.daemon = True
        t.start()
        self._deadline_timer = t

    @property
    def deadline(self) -> float:
        """The local deadline, on time.monotonic()'s clock."""
        with self._mu:
            return self._local_end

    def remaining(self) -> float:
        """Seconds left before the local deadline (negative once past)."""
        return self.deadline - now()

    def check(self) -> None:
        """Raises the reason if the lease is lost or released."""
        if self.lost.is_set():
            raise self.reason  # type: ignore[misc]

    def _lose(self, reason: BaseException) -> None:
        with self._mu:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
            self._stop.set()
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
        cb = self.on_lost
        if cb is not None and not isinstance(reason, LeaseReleased):
            try:
                cb(reason)
            except Exception as e:  # noqa: BLE001 - a callback's failure must not stop the client
                self._client._warn(f"on_lost callback of lease on {self.key!r} failed", e)

    # The local deadline passed without a renew. The lease is not released: the work under it may
    # still be stopping, and a release would let the next holder start beside it.
    def _expire_locally(self) -> None:
        self._lose(LeaseLostError(f"lease on {self.key!r} lost: no renew succeeded before the holder's local deadline"))

    def renew(self, timeout: Optional[float] = None) -> None:
        """Extends the lease by its TTL from now. Keepalive does this; call it yourself when
        keepalive is off. NotHeldError means the lease is gone (and `lost` is set)."""
        self.check()
        start = now()
        try:
            res = self._client._request("POST", "/v1/locks/renew",
                                        body={"key": self.key, "lease_id": self.lease_id, "ttl_ms": _ms(self.ttl)},
                                        timeout=timeout)
        except NotHeldError as e:
            lost = LeaseLostError(f"lease on {self.key!r} lost: {e}")
            lost.__cause__ = e
            self._lose(lost)
            raise
        with self._mu:
            if self.lost.is_set():
                # The local deadline passed while the renew was in flight: the lease stays lost
                # for this holder even though the server renewed it. release() frees it.
                raise self.reason  # type: ignore[misc]
            self.expires_at = res["lease"]["expires_at"]
            end = start + self._validity()
            if end > self._local_end:
                self._local_end = end
                self._arm_deadline()

    def _keepalive(self) -> None:
        interval = self.ttl / 3
        failing = False
        wait = interval
        while not self._stop.wait(wait):
            wait = interval
            try:
                # The renew ends by the local deadline at the latest.
                self.renew(timeout=max(0.05, min(interval, self.remaining())))
                if failing:
                    self._client._warn(f"lease renew on {self.key!r} recovered")
                failing = False
            except NotHeldError as e:
                self._client._warn(f"lease on {self.key!r} lost: the server says it is not held", e)
                return
            except (LeaseLostError, LeaseReleased):
                return
            except BatonError as e:
                if self._stop.is_set():
                    return
                if not failing:
                    self._client._warn(f"lease renew on {self.key!r} failed; retrying until the local deadline", e)
                failing = True
                wait = retry_interval(self.ttl)

    def release(self, timeout: Optional[float] = None) -> None:
        """Stops keepalive, sets `lost` (reason LeaseReleased unless already lost) and frees the
        key. Releasing again is harmless. A lease that was lost raises NotHeldError unless nobody
        took the key yet. `timeout` bounds each request.

        An overloaded server's answer (503 or 429 with Retry-After) is retried after the time it
        asks for, as long as that is before the lease's local deadline. A release that fails
        otherwise (no answer, a broken connection, a 5xx) may still be applied later: until the
        lease has surely expired, this client will not hand the same lease out again (an
        acquire by the same holder that gets it back releases it and grants afresh)."""
        with self._mu:
            if self._released:
                return
            self._stop.set()
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()  # a renew in flight ends first
        self._lose(LeaseReleased(f"lease on {self.key!r} released"))
        c = self._client
        shed = 0
        while True:
            try:
                c._request("POST", "/v1/locks/release", body={"key": self.key, "lease_id": self.lease_id}, timeout=timeout)
                break
            except BatonError as e:
                if settled(e):
                    c._unsettled.remove(self.lease_id)
                    raise
                # An overloaded server says when to come back: then, if the lease still has time.
                pause = e.retry_after + jitter(e.retry_after) / 5 if e.retryable and e.retry_after > 0 else -1.0
                if pause >= 0 and now() + pause < self.deadline:
                    if shed == 0:
                        c._warn(f"release of lease on {self.key!r} refused by an overloaded server; retrying after its Retry-After", e)
                    shed += 1
                    time.sleep(pause)
                    continue
                # It may still be applied later: this client must not hand the lease out again.
                c._unsettled.add(self.lease_id, self.ttl, c.drift_factor)
                raise
        c._unsettled.remove(self.lease_id)
        with self._mu:
            self._released = True

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        lost = self.reason if self.lost.is_set() else None
        try:
            self.release(timeout=self.ttl)
        except BatonError as e:
            if exc is None and lost is None:
                raise
            if exc is None and not isinstance(e, NotHeldError):
                self._client._warn(f"release of lease on {self.key!r} failed", e)
        if exc is None and lost is not None:
            raise lost

    def __repr__(self) -> str:
        return f"Lease(key={self.key!r}, holder={self.holder!r}, token={self.token}, lost={self.lost.is_set()})"


def _ms(seconds: float) -> int:
    """Seconds in whole milliseconds, rounded up (a TTL is never shorter than asked)."""
    return int(-(-round(seconds * 1e6) // 1000))
