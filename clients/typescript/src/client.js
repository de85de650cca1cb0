import { BatonError, CooldownError, LockHeldError, NotFoundError, RedirectError, errorFor } from './errors.js';
import { Lease } from './lease.js';
import { Unsettled, settledRelease } from './unsettled.js';
import { anySignal, grantedAfter, jitter, now, randomHex, sleep } from './timing.js';
import { runWorker } from './worker.js';

/** The shortest server-side wait worth a long-poll; a shorter one is sent as no wait. */
const MIN_WAIT_MS = 100;

/**
 * A client of Baton's HTTP API (docs/http-api.md, server/openapi.json) with the Go client's
 * safety rules: a lease's local deadline is measured from a safe lower bound of the grant time,
 * keepalive renews every TTL/3, and a 503 with Retry-After is not retried before it says.
 */
export class BatonClient {
  #base;
  #token;
  #fetch;
  #info = null;
  #infoFailedAt = -Infinity;
  #unsettled = new Unsettled();
  #traceparent = '';

  /** @param {import('./index.js').ClientOptions} opts */
  constructor(opts) {
    const { baseUrl, token = '', fetch: f = globalThis.fetch } = opts ?? {};
    let u;
    try {
      u = new URL(baseUrl);
    } catch {
      throw new TypeError(`baton: baseUrl must be an http or https URL (got ${JSON.stringify(baseUrl)})`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`baton: baseUrl must be an http or https URL (got ${JSON.stringify(baseUrl)})`);
    if (u.username || u.password || u.search || u.hash) throw new TypeError('baton: baseUrl must not contain credentials, a query or a fragment');
    if (/[\s\x00-\x1f\x7f]/.test(token)) throw new TypeError('baton: token must not contain spaces or control characters');
    this.#traceparent = opts.traceparent ?? envTraceparent();
    if (opts.traceparent !== undefined && opts.traceparent !== '' && !validTraceparent(opts.traceparent)) {
      throw new TypeError(`baton: traceparent must be a W3C traceparent "00-<32 hex>-<16 hex>-<2 hex>" (got ${JSON.stringify(opts.traceparent)})`);
    }
    this.#base = (u.origin + u.pathname).replace(/\/+$/, '');
    this.#token = token;
    this.#fetch = f;
    this.ttlMs = opts.ttlMs ?? 15000;
    this.driftFactor = opts.driftFactor ?? 0.01;
    this.safetyMarginMs = opts.safetyMarginMs ?? 100;
    this.pollIntervalMs = opts.pollIntervalMs ?? 1000;
    this.maxWaitMs = opts.maxWaitMs ?? 25000;
    this.claimWaitMs = opts.claimWaitMs ?? 10000;
    this.onWarning = opts.onWarning ?? ((msg, err) => console.warn(`baton: ${msg}`, err ?? ''));
    if (!(this.driftFactor >= 0 && this.driftFactor < 0.5)) throw new RangeError('baton: driftFactor must be in [0, 0.5)');
    if (!(this.safetyMarginMs >= 0 && this.safetyMarginMs <= 250)) throw new RangeError('baton: safetyMarginMs must be in [0, 250]');
    if (!(this.pollIntervalMs >= 10)) throw new RangeError('baton: pollIntervalMs must be at least 10');
  }

  /** @internal */
  warn(msg, err) {
    this.onWarning(msg, err);
  }

  /**
   * Records the outcome of a release of leaseId: settled (applied, or the server said the lease
   * was not there) or unknown, in which case the release may still be applied later and the
   * lease must not be handed out again (see Unsettled).
   * @internal
   */
  releaseOutcome(leaseId, ttlMs, err) {
    if (settledRelease(err)) this.#unsettled.remove(leaseId);
    else this.#unsettled.add(leaseId, ttlMs, this.driftFactor);
  }

  /**
   * Sends one request and returns the decoded answer; an error answer rejects with a BatonError
   * (or its subclass for the code), a network failure with a BatonError of status 0.
   * @internal
   */
  async request(method, path, { query, body, headers = {}, signal, withStatus = false } = {}) {
    let url = this.#base + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
      const s = q.toString();
      if (s) url += `?${s}`;
    }
    const h = { Accept: 'application/json, application/problem+json', ...headers };
    // W3C trace context: the request joins the caller's trace (a submitted job keeps it).
    if (this.#traceparent && !('traceparent' in h)) h.traceparent = this.#traceparent;
    if (body !== undefined) h['Content-Type'] = 'application/json';
    if (this.#token) h.Authorization = `Bearer ${this.#token}`;
    const what = `${method} ${path}`;
    let resp;
    try {
      // Called as a plain function: a browser's fetch refuses any other `this` than the window
      // ("Illegal invocation"), and this.#fetch(...) would pass the client.
      const f = this.#fetch;
      // redirect 'manual': Baton's API never redirects, and fetch would follow a redirect to any
      // host the Location names, sending the request there again.
      resp = await f(url, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal, redirect: 'manual' });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new BatonError(`baton: ${what}: ${err?.cause?.code ?? err?.message ?? err}`, { cause: err });
    }
    // A browser hides a manual redirect's status and Location (an 'opaqueredirect' of status 0).
    if (resp.type === 'opaqueredirect' || (resp.status >= 300 && resp.status <= 399)) {
      const location = resp.headers.get('location');
      await resp.body?.cancel().catch(() => {});
      throw new RedirectError(`baton: ${what}: the server answered ${resp.status || 'a redirect'} redirecting to ` +
        `${location ?? '(a Location the browser does not show)'}: not followed, since Baton's API never redirects ` +
        '(is the base URL that of the Baton server?)', { status: resp.status, location });
    }
    let text;
    try {
      text = await resp.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new BatonError(`baton: ${what}: reading the answer: ${err?.message ?? err}`, { status: 0, cause: err });
    }
    const ct = resp.headers.get('content-type') ?? '';
    if (resp.status < 200 || resp.status > 299) {
      let problem = null;
      if (/json/.test(ct)) {
        try {
          problem = JSON.parse(text);
        } catch {
          problem = null;
        }
      }
      throw errorFor(resp.status, problem, resp.headers.get('retry-after'), what, problem?.code ? '' : text.slice(0, 200).trim());
    }
    let out;
    try {
      out = JSON.parse(text);
    } catch (err) {
      throw new BatonError(`baton: ${what}: decoding the ${resp.status} answer: ${err.message}`, { status: resp.status, cause: err });
    }
    return withStatus ? { status: resp.status, body: out, headers: resp.headers } : out;
  }

  /** GET /v1/info, cached once it succeeded (a failure is not retried for 10 s). */
  async info(opts = {}) {
    if (this.#info) return this.#info;
    if (now() - this.#infoFailedAt < 10000) throw new BatonError('baton: server info unavailable');
    try {
      this.#info = await this.request('GET', '/v1/info', { signal: opts.signal });
    } catch (err) {
      this.#infoFailedAt = now();
      throw err;
    }
    return this.#info;
  }

  // The server-side wait of one long-poll: wantMs, capped by the server's maximum when known,
  // and ending early enough before deadline for the answer to come back.
  async #waitFor(deadline, wantMs, signal) {
    let wait = wantMs;
    try {
      const info = await this.info({ signal });
      if (typeof info.max_wait_ms === 'number') wait = Math.min(wait, info.max_wait_ms);
    } catch {
      // Unknown: the server caps it anyway.
    }
    if (Number.isFinite(deadline)) {
      const remaining = deadline - now();
      const margin = Math.min(Math.max(remaining / 5, 20), 2000);
      wait = Math.min(wait, remaining - margin);
    }
    return wait < MIN_WAIT_MS ? 0 : Math.floor(wait);
  }

  #acquireBody(key, opts) {
    if (opts.leaseId !== undefined && this.#unsettled.has(opts.leaseId)) {
      // A late release of that lease would end the new one too.
      throw new TypeError(`baton: leaseId ${JSON.stringify(opts.leaseId)} has a release of unknown outcome; use another lease ID`);
    }
    const body = {
      key,
      holder: opts.holder ?? defaultHolder(),
      // Chosen here so that every attempt of one acquire names the same lease: an attempt whose
      // answer was lost is then found again (the same holder gets the same lease back).
      lease_id: opts.leaseId ?? randomHex(16),
      ttl_ms: opts.ttlMs ?? this.ttlMs,
    };
    if (opts.metadata !== undefined) body.metadata = opts.metadata;
    if (opts.cooldownMs) body.cooldown_ms = opts.cooldownMs;
    if (opts.lockDelayMs) body.lock_delay_ms = opts.lockDelayMs;
    if (opts.shared) body.shared = true;
    if (opts.resources?.length) body.resources = opts.resources;
    if (opts.limits?.length) body.limits = opts.limits;
    return body;
  }

  /**
   * Takes the key if it is free now, never waiting. Rejects with LockHeldError (holder, expiry),
   * CooldownError or InvalidArgumentError.
   * @param {string} key
   * @param {import('./index.js').AcquireOptions} [opts]
   */
  async tryAcquire(key, opts = {}) {
    const body = this.#acquireBody(key, opts);
    const { res, start } = await this.#grant(body, opts.signal);
    return new Lease(this, res.lease, body.ttl_ms, grantedAfter(start, res.lease.waited_ms, this.driftFactor), opts.keepalive ?? true);
  }

  /**
   * One acquire request that never returns a lease whose release this client sent without an
   * answer: the server hands a holder's live lease back to it (whatever lease_id it asks for),
   * and a late release would then end that lease under its new user while another holder takes
   * the key. So the release is finished first and the key taken afresh, with a new lease ID and
   * token (the Go Locker's grant, unsettled.go). Resolves with the answer and the start of the
   * request that granted.
   */
  async #grant(body, signal) {
    let start = now();
    let res = await this.request('POST', '/v1/locks/acquire', { body, signal });
    const id = res.lease.lease_id;
    if (!this.#unsettled.has(id)) return { res, start };
    try {
      await this.request('POST', '/v1/locks/release', { body: { key: res.lease.key, lease_id: id }, signal });
    } catch (err) {
      if (!settledRelease(err)) {
        // Still unknown, and the acquire just renewed the lease: it may live a TTL more.
        this.#unsettled.add(id, body.ttl_ms, this.driftFactor);
        throw err;
      }
    }
    this.#unsettled.remove(id);
    start = now();
    res = await this.request('POST', '/v1/locks/acquire', { body, signal });
    return { res, start };
  }

  /**
   * Waits until the key is granted, opts.signal aborts or opts.waitMs passes, through the
   * server's long-poll (woken by the store's push). Transient failures (the server unreachable
   * or restarting, 5xx, 429) are retried with backoff, never sooner than a Retry-After says.
   * When the wait ends unsuccessfully it leaves the key's line (POST /v1/locks/leave), then
   * rejects with the last refusal (a LockHeldError naming the holder) or the signal's reason.
   * However long it waited, the lease is fully usable: its local deadline counts from the
   * request's start plus the server's waited_ms.
   * @param {string} key
   * @param {import('./index.js').AcquireOptions & {waitMs?: number}} [opts]
   */
  async acquire(key, opts = {}) {
    const body = this.#acquireBody(key, opts);
    const deadline = opts.waitMs === undefined ? Infinity : now() + opts.waitMs;
    const timeout = Number.isFinite(deadline) ? AbortSignal.timeout(Math.ceil(Math.max(0, opts.waitMs))) : undefined;
    const signal = anySignal(opts.signal, timeout);
    let refusal = null;
    let failures = 0;
    let attempted = false; // then a ticket may wait in the key's line
    const gaveUp = async (err) => {
      if (attempted) await this.#leave(body);
      return err ?? refusal ?? signal?.reason ?? new BatonError(`baton: gave up waiting for ${JSON.stringify(key)}`);
    };
    for (;;) {
      if (signal?.aborted || now() >= deadline) throw await gaveUp();
      const wait = await this.#waitFor(deadline, this.maxWaitMs, signal);
      const start = now();
      try {
        // A signal per attempt: fetch leaves a listener on the signal of a failed request, and a
        // wait through a server restart makes many.
        const attempt = signal && AbortSignal.any([signal]);
        attempted = true;
        const granted = await this.#grant({ ...body, wait_ms: wait || undefined }, attempt);
        if (failures > 0) this.warn(`server reachable again; acquired "${key}"`);
        const res = granted.res;
        return new Lease(this, res.lease, body.ttl_ms, grantedAfter(granted.start, res.lease.waited_ms, this.driftFactor), opts.keepalive ?? true);
      } catch (err) {
        if (signal?.aborted) throw await gaveUp(refusal ?? err);
        let pause = jitter(this.pollIntervalMs);
        if (err instanceof LockHeldError || err instanceof CooldownError) {
          failures = 0;
          // The server already waited most of wait_ms: ask again at once. A server that answered
          // at once must not turn this loop into a spin.
          const hint = err instanceof CooldownError ? err.remainingMs : err.retryAfterMs;
          pause = wait > 0 && now() - start >= wait / 2 ? 0 : Math.min(pause, hint + 1);
        } else if (err instanceof BatonError && err.retryable) {
          if (failures === 0) this.warn(`acquire of "${key}" failed; retrying until the wait ends`, err);
          failures++;
          pause = jitter(Math.min((this.pollIntervalMs / 10) * 2 ** Math.min(failures - 1, 10), this.pollIntervalMs));
          // An overloaded server says when to come back: not before.
          if (err.retryAfterMs > 0) pause = Math.max(pause, err.retryAfterMs + jitter(err.retryAfterMs) / 5);
        } else {
          throw err;
        }
        refusal = err;
        try {
          await sleep(pause, signal);
        } catch {
          throw await gaveUp();
        }
      }
    }
  }

  /**
   * Gives up a waiting acquire (POST /v1/locks/leave): its long-poll on the server ends and its
   * ticket leaves the key's line, so that the next in line does not wait for it to expire (the
   * server keeps a ticket whose long-poll was only abandoned). Best effort, bounded: the ticket
   * expires within the acquire's TTL anyway, and an older server has no such route.
   */
  async #leave(body) {
    try {
      await this.request('POST', '/v1/locks/leave', {
        body: { key: body.key, lease_id: body.lease_id },
        signal: AbortSignal.timeout(Math.max(this.pollIntervalMs, 1000)),
      });
    } catch {
      // The ticket expires by itself.
    }
  }

  /**
   * Acquires key (waiting as acquire does), runs fn(signal, lease), and releases once fn has
   * settled. signal aborts at the lease's local deadline or when the server says it is not held:
   * stop the work then. If the lease was lost while fn ran, withLock rejects with fn's error or,
   * if fn succeeded, with the loss (LeaseLostError): the work may have overlapped with the next
   * holder's.
   * @template T
   * @param {string} key
   * @param {(signal: AbortSignal, lease: Lease) => Promise<T> | T} fn
   * @param {import('./index.js').AcquireOptions & {waitMs?: number}} [opts]
   * @returns {Promise<T>}
   */
  async withLock(key, fn, opts = {}) {
    const lease = await this.acquire(key, opts);
    let result;
    let fnErr;
    let failed = false;
    try {
      result = await fn(lease.signal, lease);
    } catch (err) {
      failed = true;
      fnErr = err;
    }
    const lost = lease.signal.aborted ? lease.signal.reason : null;
    let relErr;
    try {
      await lease.release({ signal: AbortSignal.timeout(Math.ceil(lease.ttlMs)) });
    } catch (err) {
      relErr = err;
    }
    if (failed) throw fnErr;
    if (lost) throw lost;
    if (relErr) throw relErr;
    return result;
  }

  /** The live lease on key (NotFoundError if none). */
  async get(key, opts = {}) {
    if (key === '.' || key === '..') {
      const page = await this.list({ prefix: key, limit: 1, signal: opts.signal });
      const l = page.leases[0];
      if (l?.key === key) return l;
      throw new NotFoundError(`baton: GET /v1/locks/${key}: 404 not_found: no live lease on the key`, { status: 404, code: 'not_found' });
    }
    return (await this.request('GET', `/v1/locks/${keyPath(key)}`, { signal: opts.signal })).lease;
  }

  /** One page of live leases: {leases, next_cursor?}. */
  async list({ prefix, holder, limit, cursor, signal } = {}) {
    return this.request('GET', '/v1/locks', { query: { prefix, holder, limit, cursor }, signal });
  }

  /** Ends whatever lease holds key (admin), audited with reason; returns the lease ended. */
  async forceRelease(key, reason, opts = {}) {
    return (await this.request('POST', '/v1/locks/force-release', { body: { key, reason }, signal: opts.signal })).lease;
  }

  /**
   * Ends the cooldown or lock-delay of a key that no live lease holds (admin), audited with
   * reason; returns the rest that was cleared ({key, reason, remaining_ms}). NotFoundError if
   * the key is free or held.
   */
  async clearRest(key, reason, opts = {}) {
    return (await this.request('POST', '/v1/locks/clear-rest', { body: { key, reason }, signal: opts.signal })).rest;
  }

  /**
   * Raises the resource's fence to token, or rejects with StaleTokenError (currentToken) if a
   * greater token was presented before: POST /v1/fences/check, for a resource that cannot
   * check fencing tokens itself. Equal tokens pass. Stores without fences answer 501.
   */
  async checkFence(resource, token, opts = {}) {
    return this.request('POST', '/v1/fences/check', { body: { resource, token }, signal: opts.signal });
  }

  /**
   * Deletes a resource's fence (admin), audited with reason, so that its next check accepts any
   * token the store has issued (docs/fencing.md, "Resetting a fence"). Resolves to the token
   * the fence held; NotFoundError if it has no fence.
   */
  async resetFence(resource, reason, opts = {}) {
    if (!reason) throw new TypeError('baton: reason is required to reset a fence');
    return this.request('DELETE', `/v1/fences/${keyPath(resource)}`, { query: { reason }, signal: opts.signal });
  }

  // Limits (SQLite and PostgreSQL stores; others answer 501 not_implemented).

  /** Creates the limit or changes its capacity (admin); resolves to the limit with its use. */
  async setLimit(name, capacity, opts = {}) {
    const body = { capacity };
    if (opts.rate !== undefined) body.rate = opts.rate;
    return (await this.request('PUT', `/v1/limits/${keyPath(name)}`, { body, signal: opts.signal })).limit;
  }

  /** The limit with its use, holders and waiting count; NotFoundError if there is none. */
  async getLimit(name, opts = {}) {
    return (await this.request('GET', `/v1/limits/${keyPath(name)}`, { signal: opts.signal })).limit;
  }

  /** One page of limits by name: {limits, next_cursor?}. */
  async listLimits({ limit, cursor, signal } = {}) {
    return this.request('GET', '/v1/limits', { query: { limit, cursor }, signal });
  }

  /** Deletes a limit no live lease holds (admin): LimitInUseError while one does, NotFoundError if there is none. */
  async deleteLimit(name, opts = {}) {
    return this.request('DELETE', `/v1/limits/${keyPath(name)}`, { signal: opts.signal });
  }

  // Trees: key prefixes under which "/" separates levels (SQLite and PostgreSQL stores; others
  // answer 501 not_implemented). A prefix ends with "/": setTree('cluster/').

  /** Makes the prefix a tree, or resolves to the tree it is already (admin); TreeInUseError while a key of it is live. */
  async setTree(prefix, opts = {}) {
    return (await this.request('PUT', `/v1/trees/${keyPath(prefix)}`, { signal: opts.signal })).tree;
  }

  /** The tree of the prefix; NotFoundError if it is none. */
  async getTree(prefix, opts = {}) {
    return (await this.request('GET', `/v1/trees/${keyPath(prefix)}`, { signal: opts.signal })).tree;
  }

  /** One page of trees by prefix: {trees, next_cursor?}. */
  async listTrees({ limit, cursor, signal } = {}) {
    return this.request('GET', '/v1/trees', { query: { limit, cursor }, signal });
  }

  /** Returns a tree's keys to flat keys (admin): TreeInUseError while a key of it is live, NotFoundError if it is none. */
  async deleteTree(prefix, opts = {}) {
    return this.request('DELETE', `/v1/trees/${keyPath(prefix)}`, { signal: opts.signal });
  }

  // Rates of key prefixes (SQLite and PostgreSQL stores; others answer 501 not_implemented):
  // every grant of a key that starts with the prefix counts against its rate.

  /** Sets or changes the rate ("MAX/WINDOW" such as "20/1m") of a key prefix (admin). */
  async setPrefixRate(prefix, rate, opts = {}) {
    return (await this.request('PUT', `/v1/rates/${keyPath(prefix)}`, { body: { rate }, signal: opts.signal })).prefix_rate;
  }

  /** The rate of the prefix; NotFoundError if it has none. */
  async getPrefixRate(prefix, opts = {}) {
    return (await this.request('GET', `/v1/rates/${keyPath(prefix)}`, { signal: opts.signal })).prefix_rate;
  }

  /** One page of rated prefixes: {rates, next_cursor?}. */
  async listPrefixRates({ limit, cursor, signal } = {}) {
    return this.request('GET', '/v1/rates', { query: { limit, cursor }, signal });
  }

  /** Removes the rate of the prefix (admin): NotFoundError if it has none. */
  async deletePrefixRate(prefix, opts = {}) {
    return this.request('DELETE', `/v1/rates/${keyPath(prefix)}`, { signal: opts.signal });
  }

  // Jobs.

  /** Creates or replaces a kind (admin). */
  async putKind(name, kind = {}, opts = {}) {
    return this.request('PUT', `/v1/kinds/${encodeURIComponent(name)}`, { body: kind, signal: opts.signal });
  }

  /** The registered kinds, by name. */
  async listKinds(opts = {}) {
    return (await this.request('GET', '/v1/kinds', { signal: opts.signal })).kinds;
  }

  /** The server's periodic jobs (baton serve --periodic-file), with the start of each one's next period. */
  async listPeriodic(opts = {}) {
    return (await this.request('GET', '/v1/periodic', { signal: opts.signal })).periodic;
  }

  /**
   * Submits a job. With an idempotency key, a submit that names an existing job returns that job
   * with existing: true and writes nothing.
   * @returns {Promise<{job: import('./api.js').Job, existing: boolean}>}
   */
  async submitJob(req, opts = {}) {
    const { idempotencyKey, traceparent, signal } = opts;
    const headers = idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {};
    if (traceparent) {
      if (!validTraceparent(traceparent)) {
        throw new TypeError(`baton: traceparent must be a W3C traceparent "00-<32 hex>-<16 hex>-<2 hex>" (got ${JSON.stringify(traceparent)})`);
      }
      headers.traceparent = traceparent;
    }
    const r = await this.request('POST', '/v1/jobs', { body: req, headers, signal, withStatus: true });
    return { job: r.body, existing: r.status !== 201 };
  }

  /**
   * Submits up to 10,000 jobs in one atomic step, as if one after the other in the array's
   * order (each one's idempotency key in its idempotency_key): all are written or none. Resolves
   * with one {job, existing} per job, in order.
   * @returns {Promise<Array<{job: import('./api.js').Job, existing: boolean}>>}
   */
  async submitJobs(reqs, opts = {}) {
    return (await this.request('POST', '/v1/jobs/batch', { body: { jobs: reqs }, signal: opts.signal })).results;
  }

  async getJob(id, opts = {}) {
    return this.request('GET', `/v1/jobs/${jobID(id)}`, { signal: opts.signal });
  }

  /**
   * Why a job does not run now: {key, job, job_state, reasons: [{code, message, ...}]}, each
   * reason that holds (held, resting, ahead, scheduled, backing_off, unknown_kind, guard,
   * no_worker); none for a running or finished job. A server whose store keeps no line answers
   * 501 (BatonError).
   */
  async explainJob(id, opts = {}) {
    return this.request('GET', `/v1/jobs/${jobID(id)}/explain`, { signal: opts.signal });
  }

  /** One page of jobs by ID: {jobs, next_after?}; pass next_after as after for the next page. */
  async listJobs({ state, kind, resource, after, limit, signal } = {}) {
    return this.request('GET', '/v1/jobs', { query: { state, kind, resource, after, limit }, signal });
  }

  /** Unfinished jobs by kind and state: [{kind, state, count}]. */
  async countJobs(opts = {}) {
    return (await this.request('GET', '/v1/jobs/counts', { signal: opts.signal })).counts;
  }

  async cancelJob(id, opts = {}) {
    return this.request('POST', `/v1/jobs/${jobID(id)}/cancel`, { body: {}, signal: opts.signal });
  }

  async retryJob(id, opts = {}) {
    return this.request('POST', `/v1/jobs/${jobID(id)}/retry`, { body: {}, signal: opts.signal });
  }

  /** POST /v1/jobs/claim: the worker loop's call. */
  async claimJobs(req, opts = {}) {
    return this.request('POST', '/v1/jobs/claim', { body: req, signal: opts.signal });
  }

  /**
   * POST /v1/jobs/claim/stop: ends the wait of this caller's claim named waitId (its wait_id), so
   * that the claim answers soon with what it claimed, maybe nothing. Resolves to whether such a
   * claim was waiting on this server (false: it answered already, waits on another replica, or
   * has not arrived yet, and then will not wait). Only for a server whose info says claim_stop.
   */
  async stopClaimWait(waitId, opts = {}) {
    return (await this.request('POST', '/v1/jobs/claim/stop', { body: { wait_id: waitId }, signal: opts.signal })).stopped;
  }

  async heartbeatJob(id, req, opts = {}) {
    return this.request('POST', `/v1/jobs/${jobID(id)}/heartbeat`, { body: req, signal: opts.signal });
  }

  async completeJob(id, token, opts = {}) {
    return this.request('POST', `/v1/jobs/${jobID(id)}/complete`, { body: { token }, signal: opts.signal });
  }

  async failJob(id, req, opts = {}) {
    return this.request('POST', `/v1/jobs/${jobID(id)}/fail`, { body: req, signal: opts.signal });
  }

  // Resources: what jobs run on, with the state kinds' guards check and set.

  /** One page of resources by key: {resources, next_after?}; pass next_after as after for the next page. */
  async listResources({ prefix, after, limit, signal } = {}) {
    return this.request('GET', '/v1/resources', { query: { prefix, after, limit }, signal });
  }

  /**
   * A resource; from a server whose store keeps one line per key (info's line), with who holds
   * it (holder), whether it rests (rest) and who waits for it in order (line, at most
   * opts.lineLimit tickets from the front, 1 to 1000, default 100). A key with no job or state
   * recorded is a resource (state "", version 0) while someone holds it, waits for it or it
   * rests. NotFoundError if there is nothing at all on the key.
   */
  async getResource(key, opts = {}) {
    if (key === '.' || key === '..') {
      // Not a path fetch keeps (see keyPath): found by listing, without its line.
      const page = await this.listResources({ prefix: key, limit: 1, signal: opts.signal });
      const r = page.resources[0];
      if (r?.key === key) return r;
      throw new NotFoundError(`baton: GET /v1/resources/${key}: 404 not_found: no resource ${JSON.stringify(key)}`, { status: 404, code: 'not_found' });
    }
    return this.request('GET', `/v1/resources/${keyPath(key)}`, { query: { line_limit: opts.lineLimit }, signal: opts.signal });
  }

  /**
   * Why key would not be granted to a new request now: {key, reasons: [{code, message, ...}]}
   * (held, resting, ahead); none if nothing holds it back.
   */
  async explainResource(key, opts = {}) {
    return this.request('GET', `/v1/resources/${keyPath(key)}/explain`, { signal: opts.signal });
  }

  /**
   * Sets a resource's state (admin: it overrides the kinds' guards) and returns the resource,
   * its version one more. With opts.ifVersion it is a compare-and-set: a resource at another
   * version rejects with VersionMismatchError (currentVersion) and nothing is written.
   */
  async setResourceState(key, state, opts = {}) {
    const body = { state };
    if (opts.ifVersion !== undefined) body.if_version = opts.ifVersion;
    // keyPath of the whole path, so that a key ending in "/" keeps its slash escaped.
    return this.request('PUT', `/v1/resources/${keyPath(`${key}/state`)}`, { body, signal: opts.signal });
  }

  /**
   * Ends a resource's cooldown early (admin), audited with reason; returns the cooldown that was
   * ended. NotFoundError if the resource is not cooling down.
   */
  async clearResourceCooldown(key, reason, opts = {}) {
    return this.request('POST', `/v1/resources/${keyPath(`${key}/clear-cooldown`)}`, { body: { reason }, signal: opts.signal });
  }

  /**
   * Runs a worker until opts.signal aborts: claims jobs of opts.kinds, calls the handler with
   * the job and a signal, heartbeats every TTL/3, and completes or fails each attempt with the
   * job's fencing token. See worker.js.
   */
  runWorker(opts) {
    return runWorker(this, opts);
  }
}

function jobID(id) {
  if (!Number.isSafeInteger(id) || id <= 0) throw new TypeError(`baton: job id must be a positive integer (got ${id})`);
  return String(id);
}

/** A holder unique to this process and acquisition, as the Go client's default. */
function defaultHolder() {
  const pid = globalThis.process?.pid;
  return `js:${pid ?? 'browser'}:${randomHex(6)}`;
}

/**
 * Escapes key for GET /v1/locks/{key}: each "/"-separated segment is escaped and the slashes
 * kept, so that "team/db" reads as /v1/locks/team/db. Where the server's router would clean a
 * literal slash away ("a//b", "/a") the slash is sent as %2F, as the Go client does; and a "." or
 * ".." segment is joined to its neighbour with %2F, since fetch's URL parser removes dot segments
 * even when escaped. A key that is only "." or ".." cannot be a path: get() lists it instead.
 */
export function keyPath(key) {
  const segs = key.split('/');
  const dot = (s) => s === '.' || s === '..';
  let out = '';
  segs.forEach((seg, i) => {
    if (i > 0) {
      const joined = segs[i - 1] === '' || (seg === '' && i < segs.length - 1) || dot(seg) || (i === 1 && dot(segs[0]));
      out += joined ? '%2F' : '/';
    }
    out += dot(seg) ? seg : encodeURIComponent(seg);
  });
  return out;
}

const traceparentRE = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Whether tp is a W3C traceparent of version 00 (lowercase hex, ids not all zeros). */
function validTraceparent(tp) {
  return typeof tp === 'string' && traceparentRE.test(tp);
}

/** The TRACEPARENT environment variable (Node), if it holds a valid traceparent; else ''. */
function envTraceparent() {
  const tp = globalThis.process?.env?.TRACEPARENT ?? '';
  return validTraceparent(tp) ? tp : '';
}
