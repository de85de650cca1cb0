"""Errors of the Baton client.

Every error answer of the server is a BatonError carrying the problem document; the codes the
lease and job contracts name have classes of their own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional


class BatonError(Exception):
    """An error answer of the server (an RFC 9457 problem document), or a failure to reach it.

    status is 0 when the server could not be reached; code is the problem's stable code
    ("lock_held", ...); retry_after is when the server asked to be tried again, in seconds (0 if
    it did not say).
    """

    def __init__(self, message: str, status: int = 0, code: str = "", problem: Optional[dict] = None,
                 retry_after: float = 0.0):
        super().__init__(message)
        self.status = status
        self.code = code
        self.problem = problem or {}
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the answer may change by itself: unreachable, overloaded or failing server."""
        return self.status == 0 or self.status >= 500 or self.status in (408, 429)


def _time(v: Any) -> Optional[datetime]:
    if not isinstance(v, str):
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None


class LockHeldError(BatonError):
    """409 lock_held: the key is held; holder, token and expires_at (store clock) say by whom."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.key = self.problem.get("key", "")
        self.holder = self.problem.get("holder", "")
        self.token = self.problem.get("token", 0)
        self.expires_at = _time(self.problem.get("expires_at"))
        # Beyond one key: the resource that refused (held shared?), or a full limit.
        self.resource = self.problem.get("resource", "")
        self.shared = self.problem.get("shared", False)
        self.limit = self.problem.get("limit", "")
        self.in_use = self.problem.get("in_use", 0)
        self.capacity = self.problem.get("capacity", 0)
        # In a tree: the related key (an ancestor or a descendant) whose holder refused the
        # request; holder, token and expires_at are then its holder's.
        self.related = self.problem.get("related", "")


class LimitInUseError(BatonError):
    """409 limit_in_use: a limit that live leases hold (in_use) cannot be deleted."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.limit = self.problem.get("limit", "")
        self.in_use = self.problem.get("in_use", 0)


class TreeInUseError(BatonError):
    """409 tree_in_use: a tree cannot be set or deleted while a key of it is live: prefix, key, and
    what lives there ("lease", "ticket" or "job")."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.prefix = self.problem.get("prefix", "")
        self.key = self.problem.get("key", "")
        self.what = self.problem.get("what", "")


class CooldownError(BatonError):
    """423 cooldown: the key rests after a release ("cooldown"), an expiry ("lock-delay"), or a job
    whose kind has a resource cooldown ("resource-cooldown"); or a rate of a limit or of a key
    prefix is reached ("rate": rate, and limit or prefix, say which; remaining until the window
    frees)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.key = self.problem.get("key", "")
        self.reason = self.problem.get("reason", "")
        self.remaining = self.problem.get("remaining_ms", 0) / 1000
        self.rate = self.problem.get("rate", "")
        self.limit = self.problem.get("limit", "")
        self.prefix = self.problem.get("prefix", "")


class InvalidArgumentError(BatonError):
    """400 invalid_argument: field breaks rule. Nothing was written."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.field = self.problem.get("field", "")
        self.rule = self.problem.get("rule", "")


class NotHeldError(BatonError):
    """409 not_held: the lease (or job attempt) is no longer the live one: stop working."""


class NotFoundError(BatonError):
    """404 not_found."""


class AuthError(BatonError):
    """401 unauthorized or 403 forbidden."""


class ResourceBusyError(BatonError):
    """409 resource_busy: a submit under the reject policy to a busy resource."""


class JobStateError(BatonError):
    """409 job_state: the job's state forbids the operation."""


class VersionMismatchError(BatonError):
    """409 version_mismatch: a resource state compare-and-set (if_version) found current_version.
    Nothing was written."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.resource = self.problem.get("resource", "")
        self.if_version = self.problem.get("if_version", 0)
        self.current_version = self.problem.get("current_version", 0)


class StaleTokenError(BatonError):
    """409 stale_token: a fence check presented token, but current_token (greater) was presented
    before for resource: the holder of token has lost its lease. Nothing was written."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.resource = self.problem.get("resource", "")
        self.token = self.problem.get("token", 0)
        self.current_token = self.problem.get("current_token", 0)


class RedirectError(BatonError):
    """A 3xx answer, not followed: Baton's API never redirects, so a redirect comes from something
    else at the base URL, and following it would send the request, token included, where it points.
    location is where it pointed."""

    def __init__(self, *a, location: str = "", **kw):
        super().__init__(*a, **kw)
        self.location = location


class LeaseLostError(Exception):
    """The holder must stop: no renew succeeded before the local deadline, or the server said the
    lease is not held (__cause__ is then the NotHeldError)."""


class LeaseReleased(Exception):
    """The reason of a lease after release()."""


class JobCancelled(Exception):
    """The reason a job's stop event was set: someone cancelled the job."""


class WorkerShutdown(Exception):
    """The reason a job's stop event was set: the worker is stopping."""


class PermanentError(Exception):
    """Raise it (or raise from it) in a job handler to discard the job instead of retrying it."""


_BY_CODE = {
    "lock_held": LockHeldError,
    "cooldown": CooldownError,
    "invalid_argument": InvalidArgumentError,
    "not_held": NotHeldError,
    "not_found": NotFoundError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "resource_busy": ResourceBusyError,
    "job_state": JobStateError,
    "version_mismatch": VersionMismatchError,
    "stale_token": StaleTokenError,
    "limit_in_use": LimitInUseError,
    "tree_in_use": TreeInUseError,
}


def error_for(status: int, problem: Optional[dict], retry_after_header: Optional[str], what: str,
              body_start: str = "") -> BatonError:
    """The error of an error answer."""
    problem = problem if isinstance(problem, dict) else None
    code = (problem or {}).get("code", "") or ""
    retry_after = 0.0
    ms = (problem or {}).get("retry_after_ms")
    if isinstance(ms, (int, float)) and ms > 0:
        retry_after = ms / 1000
    elif retry_after_header:
        try:
            secs = int(retry_after_header.strip())
            if secs > 0:
                retry_after = float(min(secs, 3600))
        except ValueError:
            pass
    detail = (problem or {}).get("detail") or body_start
    message = f"baton: {what}: {status}" + (f" {code}" if code else "") + (f": {detail}" if detail else "")
    cls = _BY_CODE.get(code, BatonError)
    if not code and status in (401, 403):
        cls = AuthError
    return cls(message, status=status, code=code, problem=problem, retry_after=retry_after)
