// Baton's official TypeScript/JavaScript client: no runtime dependencies (fetch), ESM, Node 20+
// and browsers. Types: index.d.ts, with the API's shapes generated from server/openapi.json.
export { BatonClient, keyPath } from './client.js';
export { Lease } from './lease.js';
export {
  AuthError,
  BatonError,
  CooldownError,
  InvalidArgumentError,
  JobCancelledError,
  JobStateError,
  LeaseLostError,
  LeaseReleasedError,
  LockHeldError,
  NotFoundError,
  NotHeldError,
  PermanentError,
  RedirectError,
  ResourceBusyError,
  StaleTokenError,
  LimitInUseError,
  TreeInUseError,
  VersionMismatchError,
  WorkerShutdownError,
} from './errors.js';
export { defaultBackoff } from './worker.js';
