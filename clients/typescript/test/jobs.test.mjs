import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatonClient, InvalidArgumentError, JobCancelledError, JobStateError, NotFoundError, PermanentError, ResourceBusyError } from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
let c;
// A periodic job of a kind never registered: listed, but its submits fail and nothing runs.
const periodicDir = mkdtempSync(join(tmpdir(), 'baton-ts-periodic-'));
const periodicFile = join(periodicDir, 'periodic.json');
writeFileSync(periodicFile, JSON.stringify({ periodic: [{ name: 'nightly-report', schedule: '0 3 * * *', kind: 'report.unregistered', resource: 'reports/nightly', args: { full: true } }] }));
before(async () => {
  server = new BatonServer(['--periodic-file', periodicFile]);
  await server.start();
  c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
  await c.putKind('build', { max_attempts: 3 });
  await c.putKind('deploy', { policy: 'reject', max_attempts: 1 });
});
after(async () => {
  await server.close();
  rmSync(periodicDir, { recursive: true, force: true });
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

test('submitJobs: all or nothing, in order, with idempotency keys; countJobs; listKinds; listPeriodic', async () => {
  await c.putKind('batch', { max_attempts: 2 }); // no worker claims it: its counts stay put
  const results = await c.submitJobs([
    { kind: 'batch', resource: 'repo/batch', args: { n: 1 }, idempotency_key: 'batch-1' },
    { kind: 'batch', resource: 'repo/batch', args: { n: 2 } },
    { kind: 'batch', resource: 'repo/later', delay_ms: 3600000 },
  ]);
  assert.deepEqual(results.map((r) => [r.existing, r.job.args.n]), [[false, 1], [false, 2], [false, undefined]]);
  assert.equal(results[0].job.head, true);
  assert.equal(results[1].job.head, false, 'the second queues behind the first');
  const again = await c.submitJobs([{ kind: 'batch', resource: 'repo/batch', args: { n: 3 }, idempotency_key: 'batch-1' }]);
  assert.equal(again[0].existing, true);
  assert.equal(again[0].job.id, results[0].job.id);
  const bad = await c.submitJobs([{ kind: 'batch', resource: 'repo/batch2' }, { kind: 'batch', resource: '' }]).catch((e) => e);
  assert.ok(bad instanceof InvalidArgumentError, String(bad));
  assert.equal(bad.problem.index, 1);
  assert.deepEqual((await c.listJobs({ resource: 'repo/batch2' })).jobs, [], 'nothing of a refused batch is written');

  const counts = (await c.countJobs()).filter((n) => n.kind === 'batch');
  counts.sort((a, b) => a.state.localeCompare(b.state));
  assert.deepEqual(counts, [{ kind: 'batch', state: 'available', count: 2 }, { kind: 'batch', state: 'scheduled', count: 1 }]);

  const kinds = await c.listKinds();
  assert.deepEqual(kinds.map((k) => k.name), ['batch', 'build', 'deploy']);
  assert.equal(kinds[0].max_attempts, 2);
  assert.equal(kinds[2].policy, 'reject');

  const periodic = await c.listPeriodic();
  assert.equal(periodic.length, 1);
  assert.equal(periodic[0].name, 'nightly-report');
  assert.equal(periodic[0].schedule, '0 3 * * *');
  assert.deepEqual(periodic[0].args, { full: true });
  assert.ok(new Date(periodic[0].next_run).getUTCHours() === 3, periodic[0].next_run);
});

test('a job with a limit, an extra resource and a shared mode, read back; a kind fills its limit templates', async () => {
  await c.setLimit('ts/global', 2);
  await c.setLimit('ts/zone/eu', 2);
  const kind = await c.putKind('ts.drain', { mode: 'shared', limits: ['ts/zone/{args.zone}'] });
  assert.deepEqual([kind.mode, kind.limits], ['shared', ['ts/zone/{args.zone}']]);
  const { job } = await c.submitJob({ kind: 'ts.drain', resource: 'ts/node/1', args: { zone: 'eu' }, resources: ['ts/rack/1'], limits: ['ts/global'] });
  const want = [true, ['ts/rack/1'], ['ts/global', 'ts/zone/eu']];
  assert.deepEqual([job.shared, job.resources, job.limits], want);
  const got = await c.getJob(job.id);
  assert.deepEqual([got.shared, got.resources, got.limits], want);
  const [one] = await c.submitJobs([{ kind: 'build', resource: 'ts/node/2', mode: 'exclusive', limits: ['ts/global'] }]);
  assert.deepEqual([one.job.shared, one.job.limits], [undefined, ['ts/global']]);
  await assert.rejects(c.submitJob({ kind: 'build', resource: 'ts/node/3', limits: ['ts/no-such'] }), (e) => e instanceof InvalidArgumentError && e.field === 'limits');
  await assert.rejects(c.submitJob({ kind: 'build', resource: 'ts/node/3', shared: true, mode: 'exclusive' }), (e) => e instanceof InvalidArgumentError && e.field === 'mode');
  await assert.rejects(c.submitJob({ kind: 'ts.drain', resource: 'ts/node/3' }), (e) => e instanceof InvalidArgumentError && e.field === 'args.zone');
});
