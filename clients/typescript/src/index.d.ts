// Types of Baton's client. The API's JSON shapes (Lease, Job, …) are generated from
// server/openapi.json into api.d.ts; this file types the client around them.
import type * as api from './api.js';

export type * from './api.js';

export interface ClientOptions {
  /** The server, e.g. "http://127.0.0.1:7725"; a path prefix (a reverse proxy's) is kept. */
  baseUrl: string;
  /** Bearer token sent with every request. */
  token?: string;
  /** fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Default lease TTL in ms (15000). */
  ttlMs?: number;
  /** Bound on how much faster the server's clock may run than ours, as a fraction of the TTL (0.01). */
  driftFactor?: number;
  /** Subtracted from the holder's view of validity (100 ms; at most 250). */
  safetyMarginMs?: number;
  /** Fallback poll of a waiting acquire, and the cap of its backoff (1000 ms). */
  pollIntervalMs?: number;
  /** Longest server-side wait asked in one acquire request (25000 ms; the server caps it too). */
  maxWaitMs?: number;
  /** Longest server-side wait of one claim of the worker loop (10000 ms; at most TTL/3). */
  claimWaitMs?: number;
  /** Receives keepalive and retry warnings (default console.warn). */
  onWarning?: (message: string, err?: unknown) => void;
  /**
   * W3C traceparent ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>") sent as the
   * traceparent header of every request, so that the server's spans, and a submitted job's
   * attempts, join that trace. Default: the TRACEPARENT environment variable (Node), if valid.
   */
  traceparent?: string;
}

export interface AcquireOptions {
  ttlMs?: number;
  /** Who holds the lease; default unique to this process and acquisition. The same holder re-acquiring gets its lease back. */
  holder?: string;
  /**
   * The lease's ID; default random. Give each acquisition a new one: a late release of an earlier
   * acquisition with the same ID would end this one. One whose release got no answer is refused (TypeError).
   */
  leaseId?: string;
  metadata?: Record<string, unknown>;
  cooldownMs?: number;
  lockDelayMs?: number;
  /** Hold the keys shared with other shared holders (SQLite and PostgreSQL stores). */
  shared?: boolean;
  /** More keys held with key, all or nothing, under one token (at most 16). */
  resources?: string[];
  /** Limits of which the grant takes one unit each (at most 16). */
  limits?: string[];
  /** Renew every TTL/3 (default true). */
  keepalive?: boolean;
  signal?: AbortSignal;
}

export interface WaitOptions extends AcquireOptions {
  /** Give up after this many ms (default: wait until signal aborts). */
  waitMs?: number;
}

export declare class Lease {
  readonly key: string;
  readonly lease_id: string;
  readonly holder: string;
  /** Fencing token: strictly greater than every earlier token of the key. Pass it to the resource. */
  readonly token: number;
  readonly acquired_at: string;
  /** Expiry on the server's clock as of the last acquire or renew (informative only). */
  readonly expires_at: string;
  /** Held in shared mode (AcquireOptions.shared). */
  readonly shared: boolean;
  /** The keys held with key (AcquireOptions.resources); empty if none. */
  readonly resources: string[];
  /** The limits of which the lease holds a unit (AcquireOptions.limits); empty if none. */
  readonly limits: string[];
  /** The slot of each unit held, by limit name (0..N-1 for a limit of N): fence a slot as the key `name#slot`. */
  readonly slots: Record<string, number>;
  readonly metadata?: Record<string, unknown>;
  /** The key was taken over from a holder that crashed or stalled: the resource may be half-done. */
  readonly took_over: boolean;
  /** Aborts at the local deadline or when the server says the lease is not held (reason LeaseLostError), or on release (LeaseReleasedError). */
  readonly signal: AbortSignal;
  readonly ttlMs: number;
  /** The local deadline, on performance.now()'s clock. */
  readonly deadline: number;
  readonly remainingMs: number;
  renew(opts?: { signal?: AbortSignal }): Promise<void>;
  /** Retries an unreachable, failing or overloaded server (after its Retry-After) until the local deadline or signal. */
  release(opts?: { signal?: AbortSignal }): Promise<void>;
}

export interface ListOptions {
  prefix?: string;
  holder?: string;
  limit?: number;
  cursor?: string;
  signal?: AbortSignal;
}

export interface JobListOptions {
  state?: api.Job['state'];
  kind?: string;
  resource?: string;
  after?: number;
  limit?: number;
  signal?: AbortSignal;
}

export interface ResourceListOptions {
  prefix?: string;
  /** next_after of the previous page */
  after?: string;
  limit?: number;
  signal?: AbortSignal;
}

export interface WorkerOptions {
  kinds: string[];
  /** Runs one attempt; throw to fail it (PermanentError: no retry). Stop when signal aborts. */
  handler: (job: api.Job, signal: AbortSignal) => Promise<void> | void;
  /** The worker's name, recorded with each claim. */
  worker?: string;
  /** Jobs run at once (1). */
  concurrency?: number;
  /** Job lease TTL in ms (30000). */
  ttlMs?: number;
  /** Retry delay after attempt n failed (defaultBackoff). */
  backoff?: (attempt: number) => number;
  /**
   * Stops the worker: running handlers' signals abort (WorkerShutdownError), and runWorker
   * resolves once every handler has returned and its attempt is reported. The claim in flight is
   * not abandoned when the server offers claim_stop (GET /v1/info): its wait in the server is
   * ended (POST /v1/jobs/claim/stop) and its answer read, so that a job claimed in that instant
   * is handed back at once (failed as worker_shutdown, without running the handler; retried
   * without delay) rather than left running until its lease expires. A server without
   * claim_stop has the claim aborted; a job it claimed in that instant is then reaped after its
   * lease expires (worker_timeout).
   */
  signal?: AbortSignal;
  /** Called after each attempt with the job as reported (or as claimed if it could not be) and the handler's error. */
  onJobEnd?: (job: api.Job, err: unknown) => void;
}

type Sig = { signal?: AbortSignal };

export declare class BatonClient {
  constructor(opts: ClientOptions);
  readonly ttlMs: number;
  readonly driftFactor: number;
  readonly safetyMarginMs: number;
  readonly pollIntervalMs: number;
  readonly maxWaitMs: number;
  readonly claimWaitMs: number;
  info(opts?: Sig): Promise<api.Info>;
  tryAcquire(key: string, opts?: AcquireOptions): Promise<Lease>;
  acquire(key: string, opts?: WaitOptions): Promise<Lease>;
  withLock<T>(key: string, fn: (signal: AbortSignal, lease: Lease) => Promise<T> | T, opts?: WaitOptions): Promise<T>;
  get(key: string, opts?: Sig): Promise<api.Lease>;
  list(opts?: ListOptions): Promise<api.ListResponse>;
  forceRelease(key: string, reason: string, opts?: Sig): Promise<api.Lease>;
  clearRest(key: string, reason: string, opts?: Sig): Promise<api.Rest>;
  checkFence(resource: string, token: number, opts?: Sig): Promise<api.FenceCheckResponse>;
  /** Deletes a resource's fence (admin), audited with reason; resolves to the token it held. */
  resetFence(resource: string, reason: string, opts?: Sig): Promise<api.FenceResetResponse>;
  /** Creates the limit or changes its capacity (admin); rate ("20/1m") bounds the grants of its units per sliding window. */
  setLimit(name: string, capacity: number, opts?: Sig & { rate?: string }): Promise<api.Limit>;
  getLimit(name: string, opts?: Sig): Promise<api.Limit>;
  listLimits(opts?: Sig & { limit?: number; cursor?: string }): Promise<api.LimitsResponse>;
  /** Deletes a limit no live lease holds (admin): LimitInUseError while one does. */
  deleteLimit(name: string, opts?: Sig): Promise<api.DeleteLimitResponse>;
  /** Makes the prefix (ending with "/") a tree, or resolves to the tree it is already (admin): TreeInUseError while a key of it is live. */
  setTree(prefix: string, opts?: Sig): Promise<api.Tree>;
  getTree(prefix: string, opts?: Sig): Promise<api.Tree>;
  listTrees(opts?: Sig & { limit?: number; cursor?: string }): Promise<api.TreesResponse>;
  /** Returns a tree's keys to flat keys (admin): TreeInUseError while a key of it is live. */
  deleteTree(prefix: string, opts?: Sig): Promise<api.DeleteTreeResponse>;
  /** Sets or changes the rate ("MAX/WINDOW") of a key prefix (admin). */
  setPrefixRate(prefix: string, rate: string, opts?: Sig): Promise<api.PrefixRate>;
  getPrefixRate(prefix: string, opts?: Sig): Promise<api.PrefixRate>;
  listPrefixRates(opts?: Sig & { limit?: number; cursor?: string }): Promise<api.PrefixRatesResponse>;
  /** Removes the rate of a key prefix (admin). */
  deletePrefixRate(prefix: string, opts?: Sig): Promise<api.DeletePrefixRateResponse>;
  putKind(name: string, kind?: api.Kind, opts?: Sig): Promise<api.Kind>;
  listKinds(opts?: Sig): Promise<api.Kind[]>;
  listPeriodic(opts?: Sig): Promise<api.PeriodicJob[]>;
  submitJob(req: api.SubmitRequest, opts?: Sig & { idempotencyKey?: string; traceparent?: string }): Promise<{ job: api.Job; existing: boolean }>;
  submitJobs(reqs: api.SubmitRequest[], opts?: Sig): Promise<api.SubmitResult[]>;
  getJob(id: number, opts?: Sig): Promise<api.Job>;
  /** Why a job does not run now: each reason that holds; none for a running or finished job. */
  explainJob(id: number, opts?: Sig): Promise<api.Explanation>;
  listJobs(opts?: JobListOptions): Promise<api.JobsResponse>;
  countJobs(opts?: Sig): Promise<api.JobCount[]>;
  cancelJob(id: number, opts?: Sig): Promise<api.Job>;
  retryJob(id: number, opts?: Sig): Promise<api.Job>;
  claimJobs(req: api.ClaimRequest, opts?: Sig): Promise<api.JobsResponse>;
  /**
   * Ends the wait of the caller's claim named waitId (its wait_id; POST /v1/jobs/claim/stop): the
   * claim answers soon with what it claimed, maybe nothing. True if such a claim was waiting on
   * this server; false if it answered already, waits on another replica, or has not arrived yet
   * (then it will not wait). Only for a server whose info says claim_stop.
   */
  stopClaimWait(waitId: string, opts?: Sig): Promise<boolean>;
  heartbeatJob(id: number, req: api.HeartbeatRequest, opts?: Sig): Promise<api.HeartbeatResponse>;
  completeJob(id: number, token: number, opts?: Sig): Promise<api.Job>;
  failJob(id: number, req: api.FailRequest, opts?: Sig): Promise<api.Job>;
  listResources(opts?: ResourceListOptions): Promise<api.ResourcesResponse>;
  /** A resource, with its holder, rest and line (at most lineLimit tickets, 1-1000, default 100) from a server with a line. */
  getResource(key: string, opts?: Sig & { lineLimit?: number }): Promise<api.Resource>;
  /** Why key would not be granted to a new request now: each reason that holds. */
  explainResource(key: string, opts?: Sig): Promise<api.Explanation>;
  setResourceState(key: string, state: string, opts?: Sig & { ifVersion?: number }): Promise<api.Resource>;
  clearResourceCooldown(key: string, reason: string, opts?: Sig): Promise<api.ResourceCooldown>;
  runWorker(opts: WorkerOptions): Promise<void>;
}

export declare function keyPath(key: string): string;

export declare class BatonError extends Error {
  /** HTTP status; 0 when the server could not be reached. */
  readonly status: number;
  /** The problem's stable code ("lock_held", …), "" without a problem document. */
  readonly code: string;
  readonly problem: api.Problem | null;
  readonly retryAfterMs: number;
  readonly retryable: boolean;
}
export declare class LockHeldError extends BatonError {
  readonly key: string;
  readonly holder: string;
  readonly token: number;
  readonly expiresAt: Date | null;
  readonly resource: string;
  readonly shared: boolean;
  readonly limit: string;
  readonly inUse: number;
  readonly capacity: number;
  /** In a tree: the related key (an ancestor or a descendant) whose holder refused the request; "" if none. */
  readonly related: string;
}
export declare class LimitInUseError extends BatonError {
  readonly limit: string;
  readonly inUse: number;
}
/** A tree cannot be set or deleted while a key of it is live: prefix, key, and what lives there. */
export declare class TreeInUseError extends BatonError {
  readonly prefix: string;
  readonly key: string;
  readonly what: 'lease' | 'ticket' | 'job' | '';
}
export declare class CooldownError extends BatonError {
  readonly key: string;
  readonly reason: string;
  readonly remainingMs: number;
  /** reason "rate": the rate reached, and the limit or key prefix whose it is. */
  readonly rate: string;
  readonly limit: string;
  readonly prefix: string;
}
export declare class InvalidArgumentError extends BatonError {
  readonly field: string;
  readonly rule: string;
}
/** A 3xx answer, not followed: Baton's API never redirects. Never retryable. */
export declare class RedirectError extends BatonError {
  /** Where the redirect pointed; null in a browser, which does not show it. */
  readonly location: string | null;
}
export declare class NotHeldError extends BatonError {}
export declare class NotFoundError extends BatonError {}
export declare class AuthError extends BatonError {}
export declare class ResourceBusyError extends BatonError {}
export declare class JobStateError extends BatonError {}
export declare class VersionMismatchError extends BatonError {
  readonly resource: string;
  readonly ifVersion: number;
  readonly currentVersion: number;
}
export declare class StaleTokenError extends BatonError {
  readonly resource: string;
  readonly token: number;
  /** The greater token already presented for the resource. */
  readonly currentToken: number;
}
export declare class LeaseLostError extends Error {}
export declare class LeaseReleasedError extends Error {}
export declare class JobCancelledError extends Error {}
export declare class PermanentError extends Error {
  constructor(message: string, cause?: unknown);
}
export declare class WorkerShutdownError extends Error {}
export declare function defaultBackoff(attempt: number): number;
