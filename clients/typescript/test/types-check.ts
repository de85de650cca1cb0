// Compiled by `npm run typecheck` (tsc --noEmit): the declarations hold together and read as a
// user would write against them.
import {
  BatonClient,
  LockHeldError,
  PermanentError,
  StaleTokenError,
  TreeInUseError,
  VersionMismatchError,
  type Job,
  type JobCount,
  type Lease,
  type PeriodicJob,
  type Resource,
  type SubmitResult,
  type Ticket,
  type Tree,
} from '../src/index.js';

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

export async function admin(client: BatonClient): Promise<string[]> {
  const results: SubmitResult[] = await client.submitJobs([{ kind: 'build', resource: 'repo/api' }]);
  const counts: JobCount[] = await client.countJobs();
  const periodic: PeriodicJob[] = await client.listPeriodic();
  const kinds = await client.listKinds();
  const page = await client.listResources({ prefix: 'repo/', limit: 10 });
  let r: Resource = await client.getResource('repo/api');
  const waiters: Ticket[] = (await client.getResource('deploy/api', { lineLimit: 10 })).line ?? [];
  for (const t of waiters) console.log(t.position, t.type === 'job' ? t.job : t.holder, r.holder?.token, r.rest?.until);
  try {
    r = await client.setResourceState('repo/api', 'READY', { ifVersion: r.version });
  } catch (err) {
    if (err instanceof VersionMismatchError) console.log(err.currentVersion);
  }
  const cooldown = await client.clearResourceCooldown('repo/api', 'by hand');
  const rest = await client.clearRest('deploy/api', 'by hand');
  try {
    await client.checkFence('db/main', results[0].job.token);
  } catch (err) {
    if (err instanceof StaleTokenError) console.log(err.currentToken);
  }
  return [String(counts.length), periodic[0]?.next_run ?? '', kinds[0]?.name ?? '', page.next_after ?? '', cooldown.until, rest.reason];
}

export async function trees(client: BatonClient): Promise<string[]> {
  const set: Tree = await client.setTree('cluster/');
  const page = await client.listTrees({ limit: 10 });
  const got: Tree = await client.getTree(page.next_cursor ?? set.prefix);
  try {
    await client.tryAcquire('cluster/eu-1/node/a');
  } catch (err) {
    if (err instanceof LockHeldError && err.related) console.log(err.related, err.holder);
  }
  try {
    await client.deleteTree('cluster/');
  } catch (err) {
    if (err instanceof TreeInUseError) console.log(err.prefix, err.key, err.what);
  }
  return [set.root, got.set_at, ...page.trees.map((t) => t.prefix)];
}
