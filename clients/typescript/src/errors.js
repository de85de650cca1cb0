// Errors of the Baton client. Every answer of the server that is an error is a BatonError
// carrying the problem document; the codes the lease and job contracts name have classes of
// their own, so that callers can test with instanceof.

/** An error answer of the server (an RFC 9457 problem document), or a failure to reach it. */
export class BatonError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number, code?: string, problem?: object, retryAfterMs?: number, cause?: unknown}} [o]
   */
  constructor(message, o = {}) {
    super(message, o.cause === undefined ? undefined : { cause: o.cause });
    this.name = new.target.name;
    /** HTTP status; 0 when the server could not be reached. */
    this.status = o.status ?? 0;
    /** The problem's stable code ("lock_held", …); "" when there was no problem document. */
    this.code = o.code ?? '';
    /** The problem document as sent. */
    this.problem = o.problem ?? null;
    /** When the server asked to be tried again (retry_after_ms, or Retry-After in seconds); 0 if not said. */
    this.retryAfterMs = o.retryAfterMs ?? 0;
  }

  /** Whether the answer may change by itself: the server is unreachable, overloaded or failing. */
  get retryable() {
    return this.status === 0 || this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

/** 409 lock_held: the key is held by someone else (holder, token, expiresAt on the store's clock). */
export class LockHeldError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.key = p.key ?? '';
    this.holder = p.holder ?? '';
    this.token = p.token ?? 0;
    this.expiresAt = p.expires_at ? new Date(p.expires_at) : null;
    /** The one of the request's resources that refused it (with shared when held shared); "" for key. */
    this.resource = p.resource ?? '';
    this.shared = p.shared ?? false;
    /** A full limit that refused the request: inUse of capacity units held. */
    this.limit = p.limit ?? '';
    this.inUse = p.in_use ?? 0;
    this.capacity = p.capacity ?? 0;
    /** In a tree: the related key (an ancestor or a descendant) whose holder refused the request; "" if none. holder, token and expiresAt are then its holder's. */
    this.related = p.related ?? '';
  }
}

/** 409 limit_in_use: a limit that live leases hold cannot be deleted (limit, inUse). */
export class LimitInUseError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.limit = p.limit ?? '';
    this.inUse = p.in_use ?? 0;
  }
}

/** 409 tree_in_use: a tree cannot be set or deleted while a key of it is live (prefix, key, and what lives there: "lease", "ticket" or "job"). */
export class TreeInUseError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.prefix = p.prefix ?? '';
    this.key = p.key ?? '';
    this.what = p.what ?? '';
  }
}

/** 423 cooldown: the key rests after a release (reason "cooldown") or an expiry ("lock-delay"). */
export class CooldownError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.key = p.key ?? '';
    this.reason = p.reason ?? '';
    this.remainingMs = p.remaining_ms ?? 0;
    // reason "rate": the rate reached, and the limit or key prefix whose it is.
    this.rate = p.rate ?? '';
    this.limit = p.limit ?? '';
    this.prefix = p.prefix ?? '';
  }
}

/** 400 invalid_argument: field breaks rule. Nothing was written. */
export class InvalidArgumentError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.field = p.field ?? '';
    this.rule = p.rule ?? '';
  }
}

/** 409 not_held: the lease (or job attempt) is no longer the live one: stop working. */
export class NotHeldError extends BatonError {}

/** 404 not_found. */
export class NotFoundError extends BatonError {}

/** 401 unauthorized or 403 forbidden. */
export class AuthError extends BatonError {}

/** 409 resource_busy: a submit under the reject policy to a busy resource. */
export class ResourceBusyError extends BatonError {}

/** 409 job_state: the job's state forbids the operation. */
export class JobStateError extends BatonError {}

/** 409 version_mismatch: a resource state compare-and-set found another version; nothing was written. */
export class VersionMismatchError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.resource = p.resource ?? '';
    this.ifVersion = p.if_version ?? 0;
    this.currentVersion = p.current_version ?? 0;
  }
}

/** 409 stale_token: a fence check found a greater token already presented for the resource. */
export class StaleTokenError extends BatonError {
  constructor(message, o) {
    super(message, o);
    const p = o.problem ?? {};
    this.resource = p.resource ?? '';
    this.token = p.token ?? 0;
    this.currentToken = p.current_token ?? 0;
  }
}

/**
 * A 3xx answer, not followed: Baton's API never redirects, so a redirect comes from something
 * else at the base URL, and following it would send the request, token included, where it points.
 */
export class RedirectError extends BatonError {
  constructor(message, o) {
    super(message, o);
    /** Where the redirect pointed; null in a browser, which does not show it. */
    this.location = o.location ?? null;
  }

  /** Asking again gets the same redirect (a browser reports its status as 0, which would read as unreachable). */
  get retryable() {
    return false;
  }
}

/** A reason to stop that is not an answer of the server; named after its class. */
class StopError extends Error {
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
  }
}

/**
 * The reason of a lease's (or a job's) AbortSignal when the holder must stop: no renew
 * succeeded before the local deadline, or the server said the lease is not held (cause).
 */
export class LeaseLostError extends StopError {}

/** The reason of a lease's AbortSignal after release(). */
export class LeaseReleasedError extends StopError {
  constructor() {
    super('the lease was released');
  }
}

/** The reason of a job handler's AbortSignal when someone cancelled the job. */
export class JobCancelledError extends StopError {
  constructor() {
    super('the job was cancelled');
  }
}

/** The reason of handlers' signals when the worker stops: the attempt is failed for a retry at once. */
export class WorkerShutdownError extends StopError {
  constructor() {
    super('the worker is shutting down');
  }
}

/** Wrap a handler's error in PermanentError to discard the job instead of retrying it. */
export class PermanentError extends StopError {}

const byCode = {
  lock_held: LockHeldError,
  cooldown: CooldownError,
  invalid_argument: InvalidArgumentError,
  not_held: NotHeldError,
  not_found: NotFoundError,
  unauthorized: AuthError,
  forbidden: AuthError,
  resource_busy: ResourceBusyError,
  job_state: JobStateError,
  version_mismatch: VersionMismatchError,
  stale_token: StaleTokenError,
  limit_in_use: LimitInUseError,
  tree_in_use: TreeInUseError,
};

/**
 * The error of an error answer.
 * @param {number} status
 * @param {any} problem the problem document, or null
 * @param {string|null} retryAfterHeader
 * @param {string} what "POST /v1/locks/acquire"
 * @param {string} [bodyStart] the start of a body that was not a problem document
 */
export function errorFor(status, problem, retryAfterHeader, what, bodyStart = '') {
  const code = problem?.code ?? '';
  let retryAfterMs = typeof problem?.retry_after_ms === 'number' ? problem.retry_after_ms : 0;
  if (retryAfterMs <= 0 && retryAfterHeader) {
    const secs = Number.parseInt(retryAfterHeader.trim(), 10);
    if (secs > 0) retryAfterMs = Math.min(secs, 3600) * 1000;
  }
  const detail = problem?.detail || bodyStart;
  const message = `baton: ${what}: ${status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`;
  let Cls = byCode[code] ?? BatonError;
  if (!code && (status === 401 || status === 403)) Cls = AuthError;
  return new Cls(message, { status, code, problem, retryAfterMs });
}
