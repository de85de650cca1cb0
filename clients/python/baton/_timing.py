"""The holder-side deadline rule of the Go client (docs/guarantees.md), shared by leases and job
attempts. Times are on this process's monotonic clock (time.monotonic(), in seconds), never
compared with the server's."""

from __future__ import annotations

import random
import time

now = time.monotonic


def jitter(d: float) -> float:
    """d spread by +-20%, so that many clients do not act in step."""
    return d * (0.8 + 0.4 * random.random())


def granted_after(start: float, waited_ms, drift_factor: float) -> float:
    """A lower bound of the instant the server granted a lease (or claimed a job) in a request
    sent at start: start plus what the server says it waited before the granting attempt
    (waited_ms), shortened by the drift bound, and never later than now."""
    if not waited_ms or waited_ms <= 0:
        return start
    return min(start + waited_ms / 1000 * (1 - drift_factor), now())


def validity(ttl: float, drift_factor: float, safety_margin: float) -> float:
    """How long after the start of a successful acquire or renew the lease is the holder's."""
    return ttl * (1 - drift_factor) - safety_margin


def retry_interval(ttl: float) -> float:
    """The interval between keepalive retries after a transient failure."""
    return jitter(min(max(ttl / 10, 0.05), 1.0))
