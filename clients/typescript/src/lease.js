import { BatonError, LeaseLostError, LeaseReleasedError, NotHeldError } from './errors.js';
import { settledRelease } from './unsettled.js';
import { anySignal, jitter, now, retryInterval, sleep, validity } from './timing.js';

/**
 * One acquisition of a key. Its signal aborts at the holder's local deadline (the grant's safe
 * lower bound + TTL*(1-drift) - margin) unless a renew succeeded first, or at once when the
 * server says the lease is not held: work under it stops before the server could give the key
 * to anyone else. Keepalive renews every TTL/3; transient failures are retried quickly until the
 * local deadline.
 */
export class Lease {
  #client;
  #ttlMs;
  #ac = new AbortController();
  #localEnd;
  #deadlineTimer;
  #renewTimer = null;
  #tick = null; // the keepalive renew in flight
  #stopped = false;
  #released = false;
  #failing = false;

  constructor(client, rec, ttlMs, grantedAt, keepalive) {
    this.#client = client;
    this.#ttlMs = ttlMs;
    this.key = rec.key;
    this.lease_id = rec.lease_id;
    this.holder = rec.holder;
    this.token = rec.token;
    this.acquired_at = rec.acquired_at;
    this.expires_at = rec.expires_at;
    this.metadata = rec.metadata;
    this.took_over = rec.took_over ?? false;
    /** What the lease holds beyond key: shared mode, more keys, units of limits. */
    this.shared = rec.shared ?? false;
    this.resources = rec.resources ?? [];
    this.limits = rec.limits ?? [];
    this.slots = rec.slots ?? {};
    this.#localEnd = grantedAt + this.#validity();
    this.#deadlineTimer = setTimeout(() => this.#expireLocally(), this.#localEnd - now());
    if (keepalive) this.#renewTimer = setTimeout(() => this.#keepalive(), ttlMs / 3);
  }

  /** Aborts when the lease is lost or released; its reason is a LeaseLostError or a LeaseReleasedError. */
  get signal() {
    return this.#ac.signal;
  }

  /** The TTL asked for, in milliseconds. */
  get ttlMs() {
    return this.#ttlMs;
  }

  /** The local deadline, on performance.now()'s clock. */
  get deadline() {
    return this.#localEnd;
  }

  /** Milliseconds left before the local deadline (negative once past). */
  get remainingMs() {
    return this.#localEnd - now();
  }

  #validity() {
    const c = this.#client;
    return validity(this.#ttlMs, c.driftFactor, c.safetyMarginMs);
  }

  #lose(reason) {
    if (!this.#ac.signal.aborted) this.#ac.abort(reason);
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#renewTimer);
  }

  // The local deadline passed without a renew. The lease is not released: the work under it may
  // still be stopping, and a release would let the next holder start beside it.
  #expireLocally() {
    this.#lose(new LeaseLostError(`lease on "${this.key}" lost: no renew succeeded before the holder's local deadline`));
  }

  /**
   * Extends the lease by its TTL from now. Keepalive does this; call it yourself when keepalive
   * is off. A NotHeldError means the lease is gone and its signal has aborted.
   * @param {{signal?: AbortSignal}} [opts]
   */
  async renew(opts = {}) {
    if (this.#ac.signal.aborted) throw this.#ac.signal.reason;
    const start = now();
    let res;
    try {
      res = await this.#client.request('POST', '/v1/locks/renew', {
        body: { key: this.key, lease_id: this.lease_id, ttl_ms: this.#ttlMs },
        signal: opts.signal,
      });
    } catch (err) {
      if (err instanceof NotHeldError) this.#lose(new LeaseLostError(`lease on "${this.key}" lost: ${err.message}`, err));
      throw err;
    }
    if (this.#ac.signal.aborted) {
      // The local deadline passed while the renew was in flight: the lease stays lost for this
      // holder even though the server renewed it. release() frees it.
      throw this.#ac.signal.reason;
    }
    this.expires_at = res.lease.expires_at;
    const end = start + this.#validity();
    if (end > this.#localEnd) {
      this.#localEnd = end;
      clearTimeout(this.#deadlineTimer);
      this.#deadlineTimer = setTimeout(() => this.#expireLocally(), end - now());
    }
  }

  #keepalive() {
    if (this.#stopped || this.#ac.signal.aborted) return;
    const interval = this.#ttlMs / 3;
    this.#tick = (async () => {
      let next = interval;
      try {
        await this.renew({ signal: anySignal(this.#ac.signal, AbortSignal.timeout(Math.ceil(interval))) });
        if (this.#failing) this.#client.warn(`lease renew on "${this.key}" recovered`);
        this.#failing = false;
      } catch (err) {
        if (err instanceof NotHeldError) {
          this.#client.warn(`lease on "${this.key}" lost: the server says it is not held`, err);
          return;
        }
        if (this.#ac.signal.aborted) return;
        if (!this.#failing) this.#client.warn(`lease renew on "${this.key}" failed; retrying until the local deadline`, err);
        this.#failing = true;
        next = retryInterval(this.#ttlMs);
      } finally {
        this.#tick = null;
      }
      if (!this.#stopped && !this.#ac.signal.aborted) this.#renewTimer = setTimeout(() => this.#keepalive(), next);
    })();
  }

  /**
   * Stops keepalive, aborts the signal (LeaseReleasedError unless already lost) and frees the
   * key. Releasing again is harmless. A lease that was lost rejects with NotHeldError unless
   * nobody took the key yet. A server that is unreachable, failing or overloaded (503, 429) is
   * asked again, never sooner than its Retry-After, until the lease's local deadline or
   * opts.signal. A release that ends without an answer (opts.signal, or still failing at the
   * deadline) rejects, and this client then never hands the lease out again: an acquire by the
   * same holder that gets it back releases it and takes the key afresh.
   * @param {{signal?: AbortSignal}} [opts]
   */
  async release(opts = {}) {
    if (this.#released) return;
    this.#stopped = true;
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#deadlineTimer);
    if (this.#tick) await this.#tick.catch(() => {});
    if (!this.#ac.signal.aborted) this.#ac.abort(new LeaseReleasedError());
    for (;;) {
      let err;
      try {
        await this.#client.request('POST', '/v1/locks/release', {
          body: { key: this.key, lease_id: this.lease_id },
          signal: opts.signal,
        });
      } catch (e) {
        err = e;
      }
      if (err === undefined) {
        this.#client.releaseOutcome(this.lease_id, this.#ttlMs, undefined);
        this.#released = true;
        return;
      }
      if (!(await this.#pauseBeforeRetry(err, opts.signal))) {
        this.#client.releaseOutcome(this.lease_id, this.#ttlMs, err);
        throw err;
      }
    }
  }

  // Waits before a failed release is sent again and resolves true, or resolves false at once if
  // it is not to be sent again: its outcome is known (not_held, invalid_argument), it is no
  // failure that may go away by itself (the server unreachable, 5xx, 429, 408), the caller gave
  // up, or the next attempt would start after the local deadline, after which the server may
  // expire the lease anyway. An overloaded server is not asked again before its Retry-After.
  async #pauseBeforeRetry(err, signal) {
    if (settledRelease(err) || !(err instanceof BatonError && err.retryable) || signal?.aborted) return false;
    let pause = retryInterval(this.#ttlMs);
    if (err.retryAfterMs > 0) pause = Math.max(pause, err.retryAfterMs + jitter(err.retryAfterMs) / 5);
    if (now() + pause >= this.#localEnd) return false;
    try {
      await sleep(pause, signal);
    } catch {
      return false;
    }
    return true;
  }
}
