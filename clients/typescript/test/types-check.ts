// Compiled by `npm run typecheck` (tsc --noEmit): the declarations hold together and read as a
// user would write against them.
import { BatonClient, LockHeldError, PermanentError, type Job, type Lease } from '../src/index.js';

export async function example(): Promise<number> {
  const client = new BatonClient({ baseUrl: 'http://127.0.0.1:7725', token: 'secret' });
  const token: number = await client.withLock('deploy/api', async (signal: AbortSignal, lease: Lease) => {
    signal.throwIfAborted();
    return lease.token;
  }, { ttlMs: 30000, waitMs: 60000 });
  try {
    await client.tryAcquire('deploy/api');
  } catch (err) {
    if (err instanceof LockHeldError) console.log(err.holder, err.expiresAt?.toISOString());
  }
  const { job, existing }: { job: Job; existing: boolean } = await client.submitJob(
    { kind: 'build', resource: 'repo/api', args: { ref: 'main' } },
    { idempotencyKey: 'build-1' },
  );
  const state: Job['state'] = job.state;
  await client.runWorker({
    kinds: ['build'],
    handler: async (j: Job, signal: AbortSignal) => {
      if (j.attempt > 3 || signal.aborted) throw new PermanentError('give up');
    },
  });
  return existing && state === 'succeeded' ? token : 0;
}
