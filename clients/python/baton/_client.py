from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading

import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Optional

from ._keypath import key_path
from ._lease import Lease, _ms
from ._resources import ResourceMethods
from ._timing import granted_after, jitter, now
from ._unsettled import Unsettled, settled
from .errors import BatonError, CooldownError, LockHeldError, NotFoundError, RedirectError, error_for

# The shortest server-side wait worth a long-poll (seconds); a shorter one is sent as no wait.
_MIN_WAIT = 0.1
# How long past a request's server-side wait its answer may take to come back.
_ANSWER_MARGIN = 10.0


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Leaves every 3xx answer unfollowed (urlopen then raises it as an HTTPError): Baton's API
    never redirects, and urllib would resend the request, bearer token included, to any host the
    Location names."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirects)

_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def valid_traceparent(tp: str) -> bool:
    """Whether tp is a W3C traceparent of version 00 (lowercase hex, ids not all zeros)."""
    return isinstance(tp, str) and _TRACEPARENT.fullmatch(tp) is not None


class Client(ResourceMethods):
    """A client of Baton's HTTP API (docs/http-api.md, server/openapi.json) with the Go client's
    safety rules: a lease's local deadline is measured from a safe lower bound of the grant time,
    keepalive renews every TTL/3, and a 503 with Retry-After is not retried before it says.

    Durations are seconds (floats); the wire's milliseconds are converted.
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, *, ttl: float = 15.0,
                 drift_factor: float = 0.01, safety_margin: float = 0.1, poll_interval: float = 1.0,
                 max_wait: float = 25.0, claim_wait: float = 10.0, timeout: float = 30.0,
                 on_warning: Optional[Callable[[str, Optional[BaseException]], None]] = None,
                 traceparent: Optional[str] = None):
        base_url = base_url or os.environ.get("BATON_URL", "http://127.0.0.1:7725")
        token = token if token is not None else os.environ.get("BATON_TOKEN", "")
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"baton: base_url must be an http or https URL (got {base_url!r})")
        if u.username or u.password or u.query or u.fragment:
            raise ValueError("baton: base_url must not contain credentials, a query or a fragment")
        if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
            raise ValueError("baton: token must not contain spaces or control characters")
        if not 0 <= drift_factor < 0.5:
            raise ValueError("baton: drift_factor must be in [0, 0.5)")
        if not 0 <= safety_margin <= 0.25:
            raise ValueError("baton: safety_margin must be in [0, 0.25] seconds")
        if poll_interval < 0.01:
            raise ValueError("baton: poll_interval must be at least 0.01 seconds")
        if traceparent is None:
            # The W3C trace context of the process, as tools that trace pass it on; a malformed
            # one is ignored, as W3C asks.
            env_tp = os.environ.get("TRACEPARENT", "")
            traceparent = env_tp if valid_traceparent(env_tp) else ""
        elif traceparent and not valid_traceparent(traceparent):
            raise ValueError(f"baton: traceparent must be a W3C traceparent \"00-<32 hex>-<16 hex>-<2 hex>\" (got {traceparent!r})")
        # Sent as the traceparent header of every request: the server's spans, and a submitted
        # job's attempts, join that trace.
        self.traceparent = traceparent
        self._base = f"{u.scheme}://{u.netloc}{u.path}".rstrip("/")
        self._token = token
        self.ttl = ttl
        self.drift_factor = drift_factor
        self.safety_margin = safety_margin
        self.poll_interval = poll_interval
        self.max_wait = max_wait
        self.claim_wait = claim_wait
        self.timeout = timeout
        self.on_warning = on_warning
        self._info: Optional[dict] = None
        self._info_failed = -1e18
        self._info_mu = threading.Lock()
        # Leases whose release was sent without a known outcome (see _unsettled and _grant).
        self._unsettled = Unsettled()

    def _warn(self, msg: str, err: Optional[BaseException] = None) -> None:
        if self.on_warning is not None:
            self.on_warning(msg, err)
        else:
            import logging

            logging.getLogger("baton").warning("%s%s", msg, f": {err}" if err else "")

    def _request(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None, body: Any = None,
                 headers: Optional[Dict[str, str]] = None, timeout: Optional[float] = None,
                 with_status: bool = False) -> Any:
        url = self._base + path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None and v != ""}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = {"Accept": "application/json, application/problem+json"}
        if self.traceparent:
            h["traceparent"] = self.traceparent
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if self._token:
            h["Authorization"] = f"Bearer {self._token}"
        what = f"{method} {path}"
        req = urllib.request.Request(url, data=data, headers=h, method=method)
        try:
            with _opener.open(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as e:
            raw = e.read()
            if 300 <= e.code <= 399:
                location = e.headers.get("Location") or ""
                raise RedirectError(f"baton: {what}: the server answered {e.code} redirecting to "
                                    f"{location or '(no Location)'}: not followed, since Baton's API never redirects "
                                    "(is the base URL that of the Baton server?)", status=e.code, location=location) from None
            problem = None
            if "json" in (e.headers.get("Content-Type") or ""):
                try:
                    problem = json.loads(raw)
                except ValueError:
                    problem = None
            start = "" if isinstance(problem, dict) and problem.get("code") else raw[:200].decode(errors="replace").strip()
            raise error_for(e.code, problem, e.headers.get("Retry-After"), what, start) from None
        except (urllib.error.URLError, OSError, socket.timeout) as e:
            reason = getattr(e, "reason", e)
            raise BatonError(f"baton: {what}: {reason}") from e
        try:
            out = json.loads(raw)
        except ValueError as e:
            raise BatonError(f"baton: {what}: decoding the {status} answer: {e}", status=status) from e
        return (status, out) if with_status else out

    def info(self) -> dict:
        """GET /v1/info, cached once it succeeded (a failure is not retried for 10 s)."""
        with self._info_mu:
            if self._info is not None:
                return self._info
            if now() - self._info_failed < 10:
                raise BatonError("baton: server info unavailable")
            try:
                self._info = self._request("GET", "/v1/info", timeout=5)
            except BatonError:
                self._info_failed = now()
                raise
            return self._info

    def _wait_for(self, deadline: float, want: float) -> float:
        """The server-side wait of one long-poll: want, capped by the server's maximum when known,
        ending early enough before deadline for the answer to come back."""
        wait = want
        try:
            mw = self.info().get("max_wait_ms")
            if isinstance(mw, (int, float)):
                wait = min(wait, mw / 1000)
        except BatonError:
            pass
        if deadline != float("inf"):
            remaining = deadline - now()
            wait = min(wait, remaining - min(max(remaining / 5, 0.02), 2.0))
        return 0.0 if wait < _MIN_WAIT else wait

    def _acquire_body(self, key: str, ttl: Optional[float], holder: Optional[str], lease_id: Optional[str],
                      metadata: Optional[dict], cooldown: float, lock_delay: float, shared: bool = False,
                      resources: Optional[list] = None, limits: Optional[list] = None) -> dict:
        body: Dict[str, Any] = {
            "key": key,
            "holder": holder or f"py:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}",
            # Chosen here so that every attempt of one acquire names the same lease: an attempt
            # whose answer was lost is found again (the same holder gets the same lease back).
            "lease_id": lease_id or secrets.token_hex(16),
            "ttl_ms": _ms(ttl if ttl is not None else self.ttl),
        }
        if metadata is not None:
            body["metadata"] = metadata
        if cooldown:
            body["cooldown_ms"] = _ms(cooldown)
        if lock_delay:
            body["lock_delay_ms"] = _ms(lock_delay)
        # Beyond one exclusive key (SQLite and PostgreSQL stores; others answer 501).
        if shared:
            body["shared"] = True
        if resources:
            body["resources"] = list(resources)
        if limits:
            body["limits"] = list(limits)
        return body

    def try_acquire(self, key: str, *, ttl: Optional[float] = None, holder: Optional[str] = None,
                    lease_id: Optional[str] = None, metadata: Optional[dict] = None, cooldown: float = 0,
                    lock_delay: float = 0, keepalive: bool = True,
                    on_lost: Optional[Callable[[BaseException], None]] = None, shared: bool = False,
                    resources: Optional[list] = None, limits: Optional[list] = None) -> Lease:
        """Takes the key if it is free now, never waiting. Raises LockHeldError (holder, expiry),
        CooldownError or InvalidArgumentError. shared holds the keys shared with other shared
        holders; resources are more keys held with key, all or nothing; limits are limits of which
        the grant takes one unit each."""
        body = self._acquire_body(key, ttl, holder, lease_id, metadata, cooldown, lock_delay, shared, resources, limits)
        res, start = self._grant(body, 0.0, None)
        return Lease(self, res["lease"], body["ttl_ms"] / 1000, granted_after(start, res["lease"].get("waited_ms"), self.drift_factor),
                     keepalive, on_lost)

    def acquire(self, key: str, *, wait: Optional[float] = None, ttl: Optional[float] = None,
                holder: Optional[str] = None, lease_id: Optional[str] = None, metadata: Optional[dict] = None,
                cooldown: float = 0, lock_delay: float = 0, keepalive: bool = True,
                on_lost: Optional[Callable[[BaseException], None]] = None,
                cancel: Optional[threading.Event] = None, shared: bool = False,
                resources: Optional[list] = None, limits: Optional[list] = None) -> Lease:
        """Waits until the key is granted, `wait` seconds pass (None: no limit) or `cancel` is set
        (seen between attempts: at most one long-poll of max_wait seconds late), through the
        server's long-poll (woken by the store's push). Transient failures (the server
        unreachable or restarting, 5xx, 429) are retried with backoff, never sooner than a
        Retry-After says. When the wait ends unsuccessfully it raises the last refusal (a
        LockHeldError naming the holder), or TimeoutError. However long it waited, the lease is
        fully usable: its local deadline counts from the request's start plus the server's
        waited_ms. shared, resources and limits are try_acquire's."""
        body = self._acquire_body(key, ttl, holder, lease_id, metadata, cooldown, lock_delay, shared, resources, limits)
        deadline = float("inf") if wait is None else now() + wait
        cancel = cancel or threading.Event()
        refusal: Optional[BaseException] = None
        failures = 0

        def gave_up() -> BaseException:
            return refusal or TimeoutError(f"baton: gave up waiting for {key!r}")

        while True:
            if cancel.is_set() or now() >= deadline:
                raise gave_up()
            server_wait = self._wait_for(deadline, self.max_wait)
            start = now()
            try:
                res, start = self._grant(body, server_wait, server_wait + _ANSWER_MARGIN)
                if failures:
                    self._warn(f"server reachable again; acquired {key!r}")
                return Lease(self, res["lease"], body["ttl_ms"] / 1000,
                             granted_after(start, res["lease"].get("waited_ms"), self.drift_factor), keepalive, on_lost)
            except (LockHeldError, CooldownError) as e:
                failures = 0
                # The server already waited most of wait_ms: ask again at once. A server that
                # answered at once must not turn this loop into a spin.
                hint = e.remaining if isinstance(e, CooldownError) else e.retry_after
                pause = 0.0 if server_wait > 0 and now() - start >= server_wait / 2 else min(jitter(self.poll_interval), hint + 0.001)
                refusal = e
            except BatonError as e:
                if not e.retryable:
                    raise
                if failures == 0:
                    self._warn(f"acquire of {key!r} failed; retrying until the wait ends", e)
                failures += 1
                pause = jitter(min(self.poll_interval / 10 * 2 ** min(failures - 1, 10), self.poll_interval))
                if e.retry_after > 0:
                    # An overloaded server says when to come back: not before.
                    pause = max(pause, e.retry_after + jitter(e.retry_after) / 5)
                refusal = e
            if cancel.wait(max(0.0, min(pause, deadline - now()))):
                raise gave_up()

    def _grant(self, body: dict, server_wait: float, timeout: Optional[float]) -> "tuple[dict, float]":
        """One POST /v1/locks/acquire (waiting server_wait seconds on the server) that never
        returns a lease with an unsettled release: if the server hands one back (the same holder
        re-acquiring), that release is finished now and the key taken afresh, with a new lease
        ID and token. Returns the answer and the start of the request that granted. A lease ID
        minted for a retry replaces body's, so later attempts of the same acquire name it."""

        def attempt() -> "tuple[dict, float]":
            b = dict(body)
            if server_wait > 0:
                b["wait_ms"] = int(server_wait * 1000)
            start = now()
            return self._request("POST", "/v1/locks/acquire", body=b, timeout=timeout), start

        res, start = attempt()
        got = res["lease"]["lease_id"]
        if not self._unsettled.has(got):
            return res, start
        try:
            self._request("POST", "/v1/locks/release", body={"key": body["key"], "lease_id": got})
        except BatonError as e:
            if not settled(e):
                raise  # still unknown: the lease stays unsettled and is not handed out
        self._unsettled.remove(got)
        if body["lease_id"] == got:
            # The caller named the unsettled lease's ID: a fresh grant under that ID could still
            # be ended by the late release.
            body["lease_id"] = secrets.token_hex(16)
        return attempt()

    def lock(self, key: str, *, ttl: Optional[float] = None, wait: Optional[float] = None, **kw) -> Lease:
        """`with client.lock("key", ttl=30) as lease:` acquires (waiting up to `wait` seconds;
        None: no limit, 0: not at all), keeps the lease alive, and releases on exit. Check
        `lease.lost` (an Event), call `lease.check()`, or pass `on_lost=` to stop the work at the
        local deadline or on loss; exiting the block after a loss raises LeaseLostError."""
        if wait == 0:
            return self.try_acquire(key, ttl=ttl, **kw)
        return self.acquire(key, ttl=ttl, wait=wait, **kw)

    def get(self, key: str) -> dict:
        """The live lease on key (NotFoundError if none)."""
        if key in (".", ".."):
            page = self.list(prefix=key, limit=1)
            if page["leases"] and page["leases"][0]["key"] == key:
                return page["leases"][0]
            raise NotFoundError(f"baton: GET /v1/locks/{key}: 404 not_found", status=404, code="not_found")
        return self._request("GET", "/v1/locks/" + key_path(key))["lease"]

    def list(self, *, prefix: Optional[str] = None, holder: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None) -> dict:
        """One page of live leases: {"leases": [...], "next_cursor"?}."""
        return self._request("GET", "/v1/locks", query={"prefix": prefix, "holder": holder, "limit": limit, "cursor": cursor})

    def force_release(self, key: str, reason: str) -> dict:
        """Ends whatever lease holds key (admin), audited with reason; returns the lease ended."""
        return self._request("POST", "/v1/locks/force-release", body={"key": key, "reason": reason})["lease"]

    def clear_rest(self, key: str, reason: str) -> dict:
        """Ends the cooldown or lock-delay of a key that no live lease holds (admin), audited with
        reason; returns what was cleared: {"key", "reason" ("cooldown" or "lock-delay"),
        "remaining_ms"}. NotFoundError if the key is free or held."""
        return self._request("POST", "/v1/locks/clear-rest", body={"key": key, "reason": reason})["rest"]

    # Limits (SQLite and PostgreSQL stores; others answer 501 not_implemented).

    def set_limit(self, name: str, capacity: int, *, rate: Optional[str] = None) -> dict:
        """Creates the limit or changes its capacity (admin); returns the limit with its use.
        rate ("MAX/WINDOW" such as "20/1m") bounds the grants of its units per sliding window;
        without it the limit has none. A bad one raises BatonError 400 naming rate.max or
        rate.window."""
        body: dict = {"capacity": capacity}
        if rate is not None:
            body["rate"] = rate
        return self._request("PUT", "/v1/limits/" + key_path(name), body=body)["limit"]

    def get_limit(self, name: str) -> dict:
        """The limit with its use, holders and waiting count (NotFoundError if none)."""
        return self._request("GET", "/v1/limits/" + key_path(name))["limit"]

    def list_limits(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> dict:
        """One page of limits by name: {"limits": [...], "next_cursor"?}."""
        return self._request("GET", "/v1/limits", query={"limit": limit, "cursor": cursor})

    def delete_limit(self, name: str) -> dict:
        """Deletes a limit no live lease holds (admin): LimitInUseError while one does,
        NotFoundError if there is none."""
        return self._request("DELETE", "/v1/limits/" + key_path(name))

    # Trees: key prefixes under which "/" separates levels (SQLite and PostgreSQL stores; others
    # answer 501 not_implemented). A prefix ends with "/": set_tree("cluster/").

    def set_tree(self, prefix: str) -> dict:
        """Makes the prefix a tree, or returns the tree it is already (admin): {"prefix", "root",
        "set_at"}. TreeInUseError while a key of it is live."""
        return self._request("PUT", "/v1/trees/" + key_path(prefix))["tree"]

    def get_tree(self, prefix: str) -> dict:
        """The tree of the prefix (NotFoundError if it is none)."""
        return self._request("GET", "/v1/trees/" + key_path(prefix))["tree"]

    def list_trees(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> dict:
        """One page of trees by prefix: {"trees": [...], "next_cursor"?}."""
        return self._request("GET", "/v1/trees", query={"limit": limit, "cursor": cursor})

    def delete_tree(self, prefix: str) -> dict:
        """Returns a tree's keys to flat keys (admin): TreeInUseError while a key of it is live,
        NotFoundError if it is none."""
        return self._request("DELETE", "/v1/trees/" + key_path(prefix))

    # Rates of key prefixes (SQLite and PostgreSQL stores; others answer 501 not_implemented):
    # every grant of a key that starts with the prefix counts against its rate.

    def set_prefix_rate(self, prefix: str, rate: str) -> dict:
        """Sets or changes the rate ("MAX/WINDOW" such as "20/1m") of a key prefix (admin):
        {"prefix", "rate", "set_at"}. BatonError 400 naming rate.max, rate.window or prefix (one
        overlapping another rated prefix)."""
        return self._request("PUT", "/v1/rates/" + key_path(prefix), body={"rate": rate})["prefix_rate"]

    def get_prefix_rate(self, prefix: str) -> dict:
        """The rate of the prefix (NotFoundError if it has none)."""
        return self._request("GET", "/v1/rates/" + key_path(prefix))["prefix_rate"]

    def list_prefix_rates(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> dict:
        """One page of rated prefixes: {"rates": [...], "next_cursor"?}."""
        return self._request("GET", "/v1/rates", query={"limit": limit, "cursor": cursor})

    def delete_prefix_rate(self, prefix: str) -> dict:
        """Removes the rate of the prefix (admin): NotFoundError if it has none."""
        return self._request("DELETE", "/v1/rates/" + key_path(prefix))

    # Jobs.

    def put_kind(self, name: str, **kind: Any) -> dict:
        """Creates or replaces a kind (admin): policy ("queue", "skip", "reject" or "replace":
        latest wins), debounce_ms (policy "replace" only), max_attempts, timeout_ms, ..., mode
        ("exclusive" or "shared"), limits (names or templates such as "zone/{args.zone}",
        filled from each job's args; SQLite stores only) and rate ("MAX/WINDOW" such as "3/1h":
        at most MAX attempts of the kind start on one resource in any sliding WINDOW; a bad one
        raises BatonError 400 naming rate.max or rate.window)."""
        return self._request("PUT", "/v1/kinds/" + urllib.parse.quote(name, safe=""), body=kind)

    def submit_job(self, kind: str, resource: str, args: Optional[dict] = None, *, idempotency_key: Optional[str] = None,
                   mode: Optional[str] = None, shared: bool = False, resources: Optional[list] = None,
                   limits: Optional[list] = None, traceparent: Optional[str] = None, **fields: Any) -> "tuple[dict, bool]":
        """Submits a job; returns (job, existing). With an idempotency key, a submit that names an
        existing job returns that job and writes nothing. Beyond one exclusive resource (SQLite
        stores; others raise BatonError 501): mode "exclusive" or "shared" (default: the kind's;
        shared=True is mode "shared"), resources are more resources each attempt holds with
        resource, all or nothing, and limits are limits of which each attempt takes one unit,
        besides the kind's. The job dict shows them as "shared", "resources" and "limits".
        policy="replace" (latest wins) supersedes the queued jobs of the kind on the resource
        (their state "superseded", "superseded_by" this job's ID) and asks a running one to stop;
        debounce_ms (policy "replace" only) starts the job no earlier than that long after the
        submit, so that a burst of submits runs once, the last. traceparent (W3C; default the
        client's) is the trace context the job keeps: its attempts join that trace."""
        body: Dict[str, Any] = {"kind": kind, "resource": resource, **fields}
        if args is not None:
            body["args"] = args
        if mode is not None:
            body["mode"] = mode
        if shared:
            body["shared"] = True
        if resources:
            body["resources"] = list(resources)
        if limits:
            body["limits"] = list(limits)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        if traceparent:
            if not valid_traceparent(traceparent):
                raise ValueError(f"baton: traceparent must be a W3C traceparent \"00-<32 hex>-<16 hex>-<2 hex>\" (got {traceparent!r})")
            headers["traceparent"] = traceparent
        status, job = self._request("POST", "/v1/jobs", body=body, headers=headers, with_status=True)
        return job, status != 201

    def submit_many(self, jobs: "list[dict]") -> "list[tuple[dict, bool]]":
        """Submits 1 to 10,000 jobs in one request, all or nothing; returns (job, existing) for
        each, in order. Each job is a dict of submit_job's fields: kind, resource, args, policy,
        max_attempts, priority, delay_ms, debounce_ms, scheduled_at, idempotency_key, mode, shared,
        resources, limits."""
        if not isinstance(jobs, (list, tuple)) or not all(isinstance(j, dict) for j in jobs):
            raise ValueError("baton: jobs must be a list of dicts (kind, resource, args, ...)")
        res = self._request("POST", "/v1/jobs/batch", body={"jobs": list(jobs)})["results"]
        if len(res) != len(jobs):
            raise BatonError(f"baton: POST /v1/jobs/batch: {len(res)} results for {len(jobs)} jobs")
        return [(r["job"], r["existing"]) for r in res]

    def job_counts(self) -> "list[dict]":
        """Unfinished jobs per kind and state: [{"kind", "state", "count"}, ...]."""
        return self._request("GET", "/v1/jobs/counts")["counts"]

    def list_kinds(self) -> "list[dict]":
        """The registered kinds, by name."""
        return self._request("GET", "/v1/kinds")["kinds"]

    def list_periodic(self) -> "list[dict]":
        """The server's periodic jobs (baton serve --periodic-file), each with next_run, the start
        of its next period on the server's clock (absent if it never fires again)."""
        return self._request("GET", "/v1/periodic")["periodic"]

    def get_job(self, job_id: int) -> dict:
        return self._request("GET", f"/v1/jobs/{_job_id(job_id)}")

    def explain_job(self, job_id: int) -> dict:
        """Why a job does not run now: {"key", "job", "job_state", "reasons": [{"code", "message",
        ...}]}, each reason that holds (held, resting, ahead, scheduled, backing_off, unknown_kind,
        guard, no_worker); none for a running or finished job."""
        return self._request("GET", f"/v1/jobs/{_job_id(job_id)}/explain")

    def list_jobs(self, *, state: Optional[str] = None, kind: Optional[str] = None, resource: Optional[str] = None,
                  after: Optional[int] = None, limit: Optional[int] = None) -> dict:
        """One page of jobs by ID: {"jobs": [...], "next_after"?}."""
        return self._request("GET", "/v1/jobs", query={"state": state, "kind": kind, "resource": resource, "after": after, "limit": limit})

    def cancel_job(self, job_id: int) -> dict:
        return self._request("POST", f"/v1/jobs/{_job_id(job_id)}/cancel", body={})

    def retry_job(self, job_id: int) -> dict:
        return self._request("POST", f"/v1/jobs/{_job_id(job_id)}/retry", body={})

    def claim_jobs(self, worker: str, kinds: list, *, limit: int = 1, ttl: float = 30.0, wait: float = 0.0) -> dict:
        body: Dict[str, Any] = {"worker": worker, "kinds": kinds, "limit": limit, "ttl_ms": _ms(ttl)}
        if wait > 0:
            body["wait_ms"] = int(wait * 1000)
        return self._request("POST", "/v1/jobs/claim", body=body, timeout=wait + _ANSWER_MARGIN)

    def heartbeat_job(self, job_id: int, token: int, ttl: float, timeout: Optional[float] = None) -> dict:
        return self._request("POST", f"/v1/jobs/{_job_id(job_id)}/heartbeat", body={"token": token, "ttl_ms": _ms(ttl)}, timeout=timeout)

    def complete_job(self, job_id: int, token: int) -> dict:
        return self._request("POST", f"/v1/jobs/{_job_id(job_id)}/complete", body={"token": token})

    def fail_job(self, job_id: int, token: int, *, message: str = "", code: Optional[str] = None,
                 permanent: bool = False, retry_after: float = 0) -> dict:
        body: Dict[str, Any] = {"token": token, "message": message}
        if code:
            body["code"] = code
        if permanent:
            body["permanent"] = True
        if retry_after > 0:
            body["retry_after_ms"] = _ms(retry_after)
        return self._request("POST", f"/v1/jobs/{_job_id(job_id)}/fail", body=body)

    def run_worker(self, kinds, handler, **kw) -> None:
        """Runs a worker until `stop` (an Event) is set; see baton.Worker."""
        from ._worker import Worker

        Worker(self, kinds, handler, **kw).run()


def _job_id(job_id: int) -> int:
    if not isinstance(job_id, int) or job_id <= 0:
        raise ValueError(f"baton: job id must be a positive integer (got {job_id!r})")
    return job_id


_default: Optional[Client] = None
_default_mu = threading.Lock()


def default_client() -> Client:
    """The client of the module-level functions: BATON_URL (default http://127.0.0.1:7725) and
    BATON_TOKEN."""
    global _default
    with _default_mu:
        if _default is None:
            _default = Client()
        return _default


def lock(key: str, *, ttl: Optional[float] = None, wait: Optional[float] = None, **kw) -> Lease:
    """`with baton.lock("key", ttl=30):` on the default client (see Client.lock)."""
    return default_client().lock(key, ttl=ttl, wait=wait, **kw)


