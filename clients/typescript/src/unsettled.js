import { InvalidArgumentError, NotHeldError } from './errors.js';
import { now } from './timing.js';

/**
 * The leases whose release was sent but whose outcome is unknown (the request timed out, was
 * aborted, or the connection broke): the release may still be applied later by a server that
 * had received it. A re-acquire by the same holder would get that very lease back (the server
 * hands a holder's live lease back to it, renewed, whatever lease_id the request names), and the
 * late release would then end it under its new user while another holder is granted the key.
 * So a client never hands out a lease it has an unsettled release for: it finishes the release
 * first and takes the key afresh (the Go Locker's rule, unsettled.go at the repository's root).
 *
 * An entry can be dropped once the lease has surely expired on the server: nothing renews it
 * after its release was sent, and after its expiry the server grants a new lease even to the
 * same holder. Kept per client, in memory.
 */
export class Unsettled {
  #until = new Map(); // lease ID -> when (performance.now()) the lease has surely expired

  add(id, ttlMs, driftFactor) {
    const t = now();
    for (const [k, until] of this.#until) if (t > until) this.#until.delete(k);
    // The server's clock may run slow by the drift bound; a second more for the request.
    this.#until.set(id, t + ttlMs * (1 + driftFactor) + 1000);
  }

  has(id) {
    const until = this.#until.get(id);
    return until !== undefined && now() < until;
  }

  remove(id) {
    this.#until.delete(id);
  }
}

/**
 * Whether a release's outcome is known: it was applied (err undefined), or the server said the
 * lease was not there, or refused the request as invalid before anything was done.
 */
export function settledRelease(err) {
  return err === undefined || err === null || err instanceof NotHeldError || err instanceof InvalidArgumentError;
}
