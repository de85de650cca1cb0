// The holder-side deadline rule of the Go client (docs/guarantees.md), shared by leases and job
// attempts. Times are on this process's monotonic clock (performance.now(), in milliseconds),
// never compared with the server's.

export const now = () => performance.now();

/** Spreads ms by ±20%, so that many clients do not act in step. */
export function jitter(ms) {
  return ms * (0.8 + 0.4 * Math.random());
}

/**
 * A lower bound of the instant the server granted a lease (or claimed a job) in a request sent at
 * start: start plus what the server says it waited before the granting attempt (waited_ms),
 * shortened by the drift bound, and never later than now.
 */
export function grantedAfter(start, waitedMs, driftFactor) {
  if (!(waitedMs > 0)) return start;
  return Math.min(start + waitedMs * (1 - driftFactor), now());
}

/** How long after the start of a successful acquire or renew the holder may count the lease its own. */
export function validity(ttlMs, driftFactor, safetyMarginMs) {
  return ttlMs * (1 - driftFactor) - safetyMarginMs;
}

/** The interval between keepalive retries after a transient failure. */
export function retryInterval(ttlMs) {
  return jitter(Math.min(Math.max(ttlMs / 10, 50), 1000));
}

/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A signal that aborts when any of signals (undefined ones skipped) aborts. */
export function anySignal(...signals) {
  const s = signals.filter(Boolean);
  return s.length === 1 ? s[0] : AbortSignal.any(s);
}

export function randomHex(bytes) {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
