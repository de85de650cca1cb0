from __future__ import annotations

import os
import random
import socket
import threading
from typing import Callable, Optional

from ._timing import granted_after, jitter, now, retry_interval, validity
from .errors import (BatonError, JobCancelled, LeaseLostError, NotFoundError, NotHeldError, PermanentError,
                     WorkerShutdown)


def default_backoff(attempt: int) -> float:
    """Retry delay after attempt n failed: 1 s * 2^(n-1), capped at 1 h, jittered into [d/2, d]."""
    d = min(2.0 ** max(attempt - 1, 0), 3600.0)
    return d / 2 + random.random() * d / 2


class JobRun:
    """One claimed attempt, as the handler sees it: `job` (the job object), `stop` (an Event set
    when the handler must stop) and `reason` (LeaseLostError: the job lease is lost, do not touch
    the resource again; JobCancelled; WorkerShutdown)."""

    def __init__(self, worker: "Worker", job: dict, granted_at: float):
        self.job = job
        self.stop = threading.Event()
        self.reason: Optional[BaseException] = None
        self.lease_lost = threading.Event()
        self._w = worker
        self._c = worker.client
        self._mu = threading.Lock()
        self._stopped = threading.Event()  # heartbeats end
        self._reporting = False
        self._v = validity(worker.ttl, self._c.drift_factor, self._c.safety_margin)
        self._local_end = granted_at + self._v
        self._timer: Optional[threading.Timer] = None
        self._arm()
        self._hb = threading.Thread(target=self._heartbeats, name=f"baton-heartbeat {job['id']}", daemon=True)
        self._hb.start()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(max(0.0, self._local_end - now()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _halt(self, reason: BaseException) -> None:
        with self._mu:
            if self.reason is None:
                self.reason = reason
            self.stop.set()

    def _lose(self, reason: BaseException) -> None:
        with self._mu:
            if self.lease_lost.is_set():
                return
            self.lease_lost.set()
            self._stopped.set()
        self._halt(reason)

    def _expire(self) -> None:
        if not self._stopped.is_set():
            self._lose(LeaseLostError(f"job {self.job['id']}: no heartbeat succeeded before the worker's local deadline"))

    def _heartbeats(self) -> None:
        ttl = self._w.ttl
        interval = ttl / 3
        failing = False
        wait = interval
        while not self._stopped.wait(wait):
            wait = interval
            start = now()
            try:
                res = self._c.heartbeat_job(self.job["id"], self.job["token"], ttl,
                                            timeout=max(0.05, min(interval, self._local_end - now())))
            except (NotHeldError, NotFoundError) as e:
                if self._reporting:
                    return
                self._c._warn(f"job {self.job['id']}: lease lost", e)
                lost = LeaseLostError(f"job {self.job['id']}: lease lost: {e}")
                lost.__cause__ = e
                self._lose(lost)
                return
            except BatonError as e:
                if self._stopped.is_set():
                    return
                if not failing:
                    self._c._warn(f"job {self.job['id']}: heartbeat failed; retrying until the local deadline", e)
                failing = True
                wait = retry_interval(ttl)
                continue
            failing = False
            with self._mu:
                end = start + self._v
                if not self.lease_lost.is_set() and not self._stopped.is_set() and end > self._local_end:
                    self._local_end = end
                    self._arm()
            if res.get("cancel_requested"):
                self._halt(JobCancelled(f"job {self.job['id']} was cancelled"))

    def run(self) -> None:
        err: Optional[BaseException] = None
        if isinstance(self.reason, WorkerShutdown):
            err = self.reason  # claimed as the worker stopped: hand it back without running it
        else:
            try:
                self._w.handler(self)
            except Exception as e:  # noqa: BLE001 - the handler's failure is the attempt's outcome
                err = e
        final = self.job
        if self.lease_lost.is_set():
            # Another worker may run the job already: reporting could only be refused or record a
            # result for work that stopped half-way. The server's reaper ends the attempt.
            self._c._warn(f"job {self.job['id']}: lease lost; leaving the attempt to the reaper", self.reason)
        else:
            self._reporting = True
            try:
                final = self._report(err)
            except BatonError as e:
                self._c._warn(f"job {self.job['id']}: reporting the attempt failed; the reaper will end it", e)
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        self._hb.join()
        if self._w.on_job_end is not None:
            self._w.on_job_end(final, err)

    def _report(self, err: Optional[BaseException]) -> dict:
        job = self.job
        end = now() + self._w.ttl
        while True:
            try:
                if err is None:
                    return self._c.complete_job(job["id"], job["token"])
                if isinstance(self.reason, JobCancelled):
                    return self._c.fail_job(job["id"], job["token"], message=str(err), code="cancelled")
                if isinstance(err, PermanentError) or isinstance(err.__cause__, PermanentError):
                    return self._c.fail_job(job["id"], job["token"], message=str(err), code="permanent", permanent=True)
                if isinstance(self.reason, WorkerShutdown):
                    return self._c.fail_job(job["id"], job["token"], message=str(err), code="worker_shutdown")
                return self._c.fail_job(job["id"], job["token"], message=str(err) or type(err).__name__,
                                        retry_after=self._w.backoff(job["attempt"]))
            except BatonError as e:
                if not e.retryable or self.lease_lost.is_set() or now() >= end:
                    raise
                self.lease_lost.wait(retry_interval(self._w.ttl))


class Worker:
    """Claims jobs of `kinds` (the server waits for one, a long-poll), runs `handler(run)` for each
    in a thread, at most `concurrency` at once, and reports each attempt with its fencing token.
    Each job lease follows the lease rule: its local deadline counts from the claim request's
    start plus the server's waited_ms; heartbeats every TTL/3 move it; a heartbeat answered
    not_held, or no heartbeat before the deadline, sets `run.stop` with a LeaseLostError and the
    attempt is left to the server's reaper. A cancel request sets it with JobCancelled. run()
    returns once `stop` is set and every handler has returned; a claim in flight when `stop` is
    set (a long-poll of at most TTL/3) ends first, and the jobs it brings are handed back at once
    (failed as worker_shutdown, retried without delay)."""

    def __init__(self, client, kinds, handler: Callable[[JobRun], None], *, worker: Optional[str] = None,
                 concurrency: int = 1, ttl: float = 30.0, stop: Optional[threading.Event] = None,
                 backoff: Callable[[int], float] = default_backoff,
                 on_job_end: Optional[Callable[[dict, Optional[BaseException]], None]] = None):
        if not kinds:
            raise ValueError("baton: a worker needs kinds")
        self.client = client
        self.kinds = list(kinds)
        self.handler = handler
        self.name = worker or f"py-worker:{socket.gethostname()}:{os.getpid()}"
        self.concurrency = concurrency
        self.ttl = ttl
        self.stop = stop or threading.Event()
        self.backoff = backoff
        self.on_job_end = on_job_end
        self._runs: "set[JobRun]" = set()
        self._mu = threading.Condition()

    def run(self) -> None:
        c = self.client
        failures = 0
        threads = []
        try:
            while not self.stop.is_set():
                with self._mu:
                    while len(self._runs) >= self.concurrency and not self.stop.is_set():
                        self._mu.wait(0.5)
                    free = self.concurrency - len(self._runs)
                if self.stop.is_set():
                    break
                want = min(c.claim_wait, self.ttl / 3)
                start = now()
                try:
                    res = c.claim_jobs(self.name, self.kinds, limit=free, ttl=self.ttl, wait=want)
                    failures = 0
                except BatonError as e:
                    if not e.retryable:
                        raise
                    if failures == 0:
                        c._warn("claim failed; retrying", e)
                    failures += 1
                    pause = jitter(min(0.1 * 2 ** min(failures - 1, 10), c.poll_interval))
                    if e.retry_after > 0:
                        pause = max(pause, e.retry_after + jitter(e.retry_after) / 5)
                    self.stop.wait(pause)
                    continue
                granted_at = granted_after(start, res.get("waited_ms"), c.drift_factor)
                for job in res["jobs"]:
                    r = JobRun(self, job, granted_at)
                    with self._mu:
                        self._runs.add(r)
                    t = threading.Thread(target=self._run, args=(r,), name=f"baton-job {job['id']}", daemon=True)
                    t.start()
                    threads.append(t)
                if not res["jobs"] and now() - start < want / 2:
                    self.stop.wait(jitter(c.poll_interval))  # answered at once: do not spin
                threads = [t for t in threads if t.is_alive()]
        finally:
            with self._mu:
                for r in self._runs:
                    r._halt(WorkerShutdown("the worker is shutting down"))
            for t in threads:
                t.join()

    def _run(self, r: JobRun) -> None:
        try:
            if self.stop.is_set():
                r._halt(WorkerShutdown("the worker is shutting down"))
            r.run()
        finally:
            with self._mu:
                self._runs.discard(r)
                self._mu.notify_all()
