import { BatonError, JobCancelledError, LeaseLostError, NotFoundError, NotHeldError, PermanentError, WorkerShutdownError } from './errors.js';
import { anySignal, grantedAfter, jitter, now, randomHex, retryInterval, sleep, validity } from './timing.js';

/** The default retry delay after attempt n failed: 1 s * 2^(n-1), capped at 1 h, jittered into [d/2, d]. */
export function defaultBackoff(attempt) {
  const d = Math.min(1000 * 2 ** Math.max(attempt - 1, 0), 3600000);
  return Math.floor(d / 2 + Math.random() * (d / 2));
}

/**
 * The worker loop (client.runWorker): claims jobs of kinds (the server waits for one, a
 * long-poll), runs handler(job, signal) for each, at most concurrency at once, and reports each
 * attempt with its fencing token. Each job lease follows the lease rule: its local deadline
 * counts from the claim request's start plus the server's waited_ms; heartbeats every TTL/3
 * move it; a heartbeat answered not_held, or no heartbeat before the deadline, aborts the
 * handler's signal with a LeaseLostError and the attempt is left to the server's reaper (never
 * reported: another worker may run it already). A cancel request aborts it with a
 * JobCancelledError. Resolves once signal has aborted and every handler has returned.
 *
 * Stopping (signal aborts) aborts the running handlers' signals with a WorkerShutdownError and
 * ends the claim in flight without abandoning it: when the server offers claim_stop (GET
 * /v1/info), each waiting claim names its wait (wait_id), and a stop ends that wait with POST
 * /v1/jobs/claim/stop and reads the claim's answer, so that a job the server claimed in that
 * instant comes back to this worker rather than staying running until its lease expires and
 * the reaper retries it as timed out. Such a job is handed back at once without running its
 * handler (failed as worker_shutdown, retried without delay), as a Go worker does with a job
 * whose handler's context ended before it started. Against a server without claim_stop the
 * claim is aborted, and a job claimed in that instant is left to the reaper.
 * @param {import('./client.js').BatonClient} client
 * @param {import('./index.js').WorkerOptions} opts
 */
export async function runWorker(client, opts) {
  const { kinds, handler, signal } = opts;
  const worker = opts.worker ?? `js-worker:${globalThis.process?.pid ?? 'browser'}`;
  const concurrency = opts.concurrency ?? 1;
  const ttlMs = opts.ttlMs ?? 30000;
  const backoff = opts.backoff ?? defaultBackoff;
  if (!Array.isArray(kinds) || kinds.length === 0) throw new TypeError('baton: runWorker needs kinds');
  if (typeof handler !== 'function') throw new TypeError('baton: runWorker needs a handler');
  const stop = new AbortController(); // aborts handlers at shutdown
  const onStop = () => stop.abort(new WorkerShutdownError());
  signal?.addEventListener('abort', onStop, { once: true });
  const running = new Set();
  let failures = 0;
  try {
    while (!signal?.aborted) {
      if (running.size >= concurrency) {
        await Promise.race(running);
        continue;
      }
      // The claim's wait counts into nothing: the lease runs from the claim on the server, and
      // waited_ms says when that was. Still, keep it well under the TTL.
      const want = Math.min(client.claimWaitMs, ttlMs / 3);
      const waitMs = Math.floor(want) || undefined;
      const waitId = waitMs && signal && (await claimStops(client, signal)) ? randomHex(16) : undefined;
      if (signal?.aborted) break;
      const start = now();
      let res;
      const claim = claimSignal(client, signal, waitId, start, ttlMs);
      try {
        res = await client.claimJobs({ worker, kinds, limit: concurrency - running.size, ttl_ms: ttlMs, wait_ms: waitMs, wait_id: waitId }, { signal: claim.signal });
        failures = 0;
      } catch (err) {
        if (signal?.aborted) break;
        if (!(err instanceof BatonError && err.retryable)) throw err;
        if (failures === 0) client.warn('claim failed; retrying', err);
        failures++;
        let pause = jitter(Math.min(100 * 2 ** Math.min(failures - 1, 10), client.pollIntervalMs));
        if (err.retryAfterMs > 0) pause = Math.max(pause, err.retryAfterMs + jitter(err.retryAfterMs) / 5);
        await sleep(pause, signal).catch(() => {});
        continue;
      } finally {
        await claim.done();
      }
      const grantedAt = grantedAfter(start, res.waited_ms, client.driftFactor);
      for (const job of res.jobs) {
        const p = runJob(client, job, handler, { ttlMs, grantedAt, backoff, stop: stop.signal, onJobEnd: opts.onJobEnd }).finally(() => running.delete(p));
        running.add(p);
      }
      if (res.jobs.length === 0 && now() - start < want / 2) {
        // Answered at once (a server shutting down): do not spin.
        await sleep(jitter(client.pollIntervalMs), signal).catch(() => {});
      }
    }
  } finally {
    signal?.removeEventListener('abort', onStop);
    if (signal?.aborted) onStop();
    await Promise.allSettled(running);
  }
}

// Whether the server ends a named claim's wait on request (GET /v1/info's claim_stop). Unknown
// (info failed, or the worker stopped while asking): no, and a stop aborts the claim.
async function claimStops(client, signal) {
  try {
    return (await client.info({ signal })).claim_stop === true;
  } catch {
    return false;
  }
}

// The signal of one claim, and done(), called once the claim has answered. When signal aborts,
// a claim whose wait is named (waitId) is not aborted: its wait is ended by POST
// /v1/jobs/claim/stop and the claim answers soon after with what the server claimed for it.
// Only if that answer has not come by the time its jobs' leases would have passed their local
// deadline anyway (a stop that reached another replica waits out the wait first; a connection
// that hangs would never answer) is the claim aborted. Without waitId a stop aborts the claim.
// The signal is new per claim: fetch leaves a listener on the signal of a failed request.
function claimSignal(client, signal, waitId, start, ttlMs) {
  const ac = new AbortController();
  let stopping = null;
  let guard = null;
  const stopReq = new AbortController();
  const onStop = () => {
    if (!waitId) {
      ac.abort(signal.reason);
      return;
    }
    const left = start + validity(ttlMs, client.driftFactor, client.safetyMarginMs) - now();
    guard = setTimeout(() => ac.abort(signal.reason), Math.max(0, left));
    // A stop that fails leaves the claim to wait out its wait; it is answered all the same.
    stopping = client.stopClaimWait(waitId, { signal: stopReq.signal }).catch(() => {});
  };
  signal?.addEventListener('abort', onStop, { once: true });
  return {
    signal: signal ? ac.signal : undefined,
    async done() {
      signal?.removeEventListener('abort', onStop);
      clearTimeout(guard);
      stopReq.abort(); // the claim has answered: a stop still on its way is moot
      await stopping;
    },
  };
}

async function runJob(client, job, handler, { ttlMs, grantedAt, backoff, stop, onJobEnd }) {
  const lease = new AbortController(); // aborts when the job lease is lost
  const h = new AbortController(); // the handler's signal
  const onStop = () => h.abort(stop.reason);
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) onStop();
  lease.signal.addEventListener('abort', () => h.abort(lease.signal.reason), { once: true });
  const v = validity(ttlMs, client.driftFactor, client.safetyMarginMs);
  let localEnd = grantedAt + v;
  let stopped = false;
  let reporting = false;
  let tick = null;
  const expire = () => {
    if (!stopped) lease.abort(new LeaseLostError(`job ${job.id}: no heartbeat succeeded before the worker's local deadline`));
  };
  let deadlineTimer = setTimeout(expire, localEnd - now());
  let hbTimer;
  let failing = false;
  const heartbeat = () => {
    if (stopped || lease.signal.aborted) return;
    const interval = ttlMs / 3;
    tick = (async () => {
      let next = interval;
      const start = now();
      try {
        const res = await client.heartbeatJob(job.id, { token: job.token, ttl_ms: ttlMs }, { signal: anySignal(lease.signal, AbortSignal.timeout(Math.ceil(interval))) });
        const end = start + v;
        if (!lease.signal.aborted && !stopped && end > localEnd) {
          localEnd = end;
          clearTimeout(deadlineTimer);
          deadlineTimer = setTimeout(expire, end - now());
        }
        failing = false;
        if (res.cancel_requested && !h.signal.aborted) h.abort(new JobCancelledError());
      } catch (err) {
        if ((err instanceof NotHeldError || err instanceof NotFoundError) && reporting) return;
        if (err instanceof NotHeldError || err instanceof NotFoundError) {
          client.warn(`job ${job.id}: lease lost`, err);
          lease.abort(new LeaseLostError(`job ${job.id}: lease lost: ${err.message}`, err));
          return;
        }
        if (lease.signal.aborted) return;
        if (!failing) client.warn(`job ${job.id}: heartbeat failed; retrying until the local deadline`, err);
        failing = true;
        next = retryInterval(ttlMs);
      } finally {
        tick = null;
      }
      if (!stopped) hbTimer = setTimeout(heartbeat, next);
    })();
  };
  hbTimer = setTimeout(heartbeat, ttlMs / 3);

  let err = null;
  let ok = true;
  try {
    if (stop.aborted) throw stop.reason; // claimed as the worker stopped: hand it back without running it
    await handler(job, h.signal);
  } catch (e) {
    ok = false;
    err = e;
  }
  let final = job;
  if (lease.signal.aborted) {
    client.warn(`job ${job.id}: lease lost; leaving the attempt to the reaper`, lease.signal.reason);
  } else {
    reporting = true;
    try {
      final = await report(client, job, ok, err, h.signal.reason, backoff, lease.signal, ttlMs);
    } catch (e) {
      client.warn(`job ${job.id}: reporting the attempt failed; the reaper will end it`, e);
    }
  }
  stopped = true;
  clearTimeout(deadlineTimer);
  clearTimeout(hbTimer);
  if (tick) await tick.catch(() => {});
  stop.removeEventListener('abort', onStop);
  onJobEnd?.(final, ok ? null : err);
}

// Completes or fails the attempt, retrying transient failures while the job lease lives (the
// heartbeats go on meanwhile), for at most one TTL.
async function report(client, job, ok, err, cause, backoff, leaseSignal, ttlMs) {
  const signal = anySignal(leaseSignal, AbortSignal.timeout(Math.ceil(ttlMs)));
  for (;;) {
    try {
      if (ok) return await client.completeJob(job.id, job.token, { signal });
      const req = { token: job.token, message: String(err?.message ?? err), code: 'handler_error' };
      if (cause instanceof JobCancelledError) req.code = 'cancelled';
      else if (err instanceof PermanentError) {
        req.code = 'permanent';
        req.permanent = true;
      } else if (cause instanceof WorkerShutdownError) req.code = 'worker_shutdown';
      else req.retry_after_ms = backoff(job.attempt);
      return await client.failJob(job.id, req, { signal });
    } catch (e) {
      if (!(e instanceof BatonError && e.retryable) || signal.aborted) throw e;
      await sleep(retryInterval(ttlMs), signal);
    }
  }
}
