"""Baton's official Python client: standard library only.

    import baton

    with baton.lock("deploy/api", ttl=30) as lease:   # BATON_URL, BATON_TOKEN
        for step in steps:
            lease.check()              # raises LeaseLostError once the lease is lost
            step(fencing_token=lease.token)

Leases keep the Go client's safety rules: the local deadline counts from a safe lower bound of
the grant time (the request's start plus the server's waited_ms, shortened by the drift bound),
keepalive renews every TTL/3, and a 503 with Retry-After is not retried before it says.
"""

from ._client import Client, default_client, key_path, lock
from ._lease import Lease
from ._worker import JobRun, Worker, default_backoff
from .errors import (AuthError, BatonError, CooldownError, InvalidArgumentError, JobCancelled, JobStateError,
                     LeaseLostError, LimitInUseError, LeaseReleased, LockHeldError, NotFoundError, NotHeldError, PermanentError,
                     RedirectError, ResourceBusyError, StaleTokenError, TreeInUseError, VersionMismatchError,
                     WorkerShutdown)

__version__ = "0.1.0"

__all__ = [
    "AuthError", "BatonError", "Client", "CooldownError", "InvalidArgumentError", "JobCancelled", "JobRun",
    "JobStateError", "Lease", "LeaseLostError", "LeaseReleased", "LimitInUseError", "LockHeldError", "NotFoundError", "NotHeldError",
    "PermanentError", "RedirectError", "ResourceBusyError", "StaleTokenError", "TreeInUseError", "VersionMismatchError", "Worker", "WorkerShutdown", "default_backoff",
    "default_client", "key_path", "lock",
]
