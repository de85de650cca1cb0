"""Releases of unknown outcome: the Go Locker's rule (unsettled.go at the repository root).

A release that timed out or lost its connection may still be applied later, by a server or a
database that had received it. The server hands a live lease back to the same holder on a
re-acquire (its lease ID too, whatever lease_id the request named), and that late release would
then end it under its new user while another holder is granted the key. So a Client never hands
out a lease it has an unsettled release for: it finishes the release first and takes the key
afresh (Client._grant).

An entry can be dropped once the lease has surely expired: nothing of this client renews it after
its release was sent, and after its expiry the server grants a new lease ID even to the same
holder.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional

from ._timing import now
from .errors import InvalidArgumentError, NotHeldError


class Unsettled:
    """Lease IDs whose release was sent without a known outcome, each until its lease has surely
    expired on the server."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._until: Dict[str, float] = {}  # lease ID -> monotonic instant it has surely expired

    def add(self, lease_id: str, ttl: float, drift_factor: float) -> None:
        with self._mu:
            t = now()
            for k in [k for k, end in self._until.items() if end <= t]:
                del self._until[k]
            # The server's clock may run slow by the drift bound; a second more for the request.
            self._until[lease_id] = t + ttl * (1 + drift_factor) + 1.0

    def has(self, lease_id: str) -> bool:
        with self._mu:
            end = self._until.get(lease_id)
            return end is not None and now() < end

    def remove(self, lease_id: str) -> None:
        with self._mu:
            self._until.pop(lease_id, None)


def settled(err: Optional[BaseException]) -> bool:
    """Whether a release's outcome is known: it was applied, or the server said the lease was not
    there (or refused the request as invalid, so nothing was done)."""
    return err is None or isinstance(err, (NotHeldError, InvalidArgumentError))
