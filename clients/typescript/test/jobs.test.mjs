import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, JobCancelledError, JobStateError, NotFoundError, PermanentError, ResourceBusyError } from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
let c;
before(async () => {
  server = new BatonServer();
  await server.start();
  c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
  await c.putKind('build', { max_attempts: 3 });
  await c.putKind('deploy', { policy: 'reject', max_attempts: 1 });
});
after(async () => {
  await server.close();
});

test('submit with an idempotency key, get, list, cancel, retry', async () => {
  const first = await c.submitJob({ kind: 'build', resource: 'repo/a', args: { ref: 'main' } }, { idempotencyKey: 'build-a-1' });
  assert.equal(first.existing, false);
  assert.equal(first.job.state, 'available');
  const again = await c.submitJob({ kind: 'build', resource: 'repo/a', args: { ref: 'other' } }, { idempotencyKey: 'build-a-1' });
  assert.equal(again.existing, true);
  assert.equal(again.job.id, first.job.id);
  assert.deepEqual((await c.getJob(first.job.id)).args, { ref: 'main' });
  const page = await c.listJobs({ kind: 'build', resource: 'repo/a' });
  assert.deepEqual(page.jobs.map((j) => j.id), [first.job.id]);
  const cancelled = await c.cancelJob(first.job.id);
  assert.equal(cancelled.state, 'cancelled');
  await assert.rejects(c.cancelJob(first.job.id), JobStateError);
  assert.equal((await c.retryJob(first.job.id)).state, 'available');
  await c.cancelJob(first.job.id);
  await assert.rejects(c.getJob(999999), NotFoundError);
  await c.submitJob({ kind: 'deploy', resource: 'env/busy' });
  const busy = await c.submitJob({ kind: 'deploy', resource: 'env/busy' }).catch((e) => e);
  assert.ok(busy instanceof ResourceBusyError, String(busy));
});

test('the worker runs jobs one at a time per resource and reports with the fencing token', async () => {
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push((await c.submitJob({ kind: 'build', resource: 'repo/w', args: { n: i } })).job.id);
  const failing = (await c.submitJob({ kind: 'build', resource: 'repo/perm', args: { fail: true } })).job.id;
  const stop = new AbortController();
  let running = 0;
  let overlap = false;
  const seen = [];
  const ended = new Set();
  const done = c.runWorker({
    kinds: ['build'],
    concurrency: 3,
    ttlMs: 3000,
    signal: stop.signal,
    handler: async (job, signal) => {
      if (job.args.fail) throw new PermanentError('cannot build this');
      if (job.resource === 'repo/w') {
        if (running++ > 0) overlap = true;
        seen.push({ n: job.args.n, token: job.token });
        await new Promise((r) => setTimeout(r, 30));
        running--;
      }
      assert.equal(signal.aborted, false);
    },
    onJobEnd: (job) => {
      ended.add(job.id);
      if ([...ids, failing].every((id) => ended.has(id))) stop.abort();
    },
  });
  await done;
  assert.equal(overlap, false, 'two jobs of one resource ran at once');
  assert.deepEqual(seen.map((s) => s.n), [0, 1, 2, 3], 'in submission order');
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].token > seen[i - 1].token, 'tokens increase');
  for (const id of ids) assert.equal((await c.getJob(id)).state, 'succeeded');
  const dead = await c.getJob(failing);
  assert.equal(dead.state, 'discarded');
  assert.equal(dead.errors.at(-1).code, 'permanent');
});

test('a cancel request aborts the handler; a lost job lease aborts it and is not reported', async () => {
  const { job } = await c.submitJob({ kind: 'build', resource: 'repo/cancel' });
  const stop = new AbortController();
  let reason;
  const done = c.runWorker({
    kinds: ['build'],
    ttlMs: 1500,
    signal: stop.signal,
    handler: async (j, signal) => {
      await c.cancelJob(j.id); // running: only asked to stop; the next heartbeat says so
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      reason = signal.reason;
      throw reason;
    },
    onJobEnd: () => stop.abort(),
  });
  await done;
  assert.ok(reason instanceof JobCancelledError, String(reason));
  assert.equal((await c.getJob(job.id)).state, 'cancelled');

  // Lease loss: the server is killed while the handler runs and comes back only after the
  // job lease's local deadline, so no heartbeat can succeed in time.
  const lost = (await c.submitJob({ kind: 'build', resource: 'repo/lost' })).job;
  const stop2 = new AbortController();
  let lossReason;
  let claimedToken = 0;
  const done2 = c.runWorker({
    kinds: ['build'],
    ttlMs: 1500,
    signal: stop2.signal,
    handler: async (j, signal) => {
      claimedToken = j.token;
      await server.stop('SIGKILL');
      await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      lossReason = signal.reason;
    },
    onJobEnd: () => stop2.abort(),
  });
  await done2;
  await server.start();
  assert.equal(lossReason?.name, 'LeaseLostError', String(lossReason));
  const after = await c.getJob(lost.id);
  assert.ok(after.state === 'running' || after.state === 'retryable' || after.state === 'available', after.state);
  assert.equal(after.errors.length, 0, 'the lost attempt was not reported');
  assert.equal(after.token, claimedToken);
});
