import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, InvalidArgumentError, NotFoundError, StaleTokenError, VersionMismatchError } from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
let c;
before(async () => {
  server = new BatonServer();
  await server.start();
  c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
  await c.putKind('line-ts');
});
after(async () => {
  await server.close();
});

test('resource state: set, compare-and-set refused with VersionMismatchError, get and list', async () => {
  await assert.rejects(c.getResource('res/cas'), NotFoundError);
  const r1 = await c.setResourceState('res/cas', 'PENDING');
  assert.equal(r1.state, 'PENDING');
  const r2 = await c.setResourceState('res/cas', 'READY', { ifVersion: r1.version });
  assert.equal(r2.version, r1.version + 1);
  const stale = await c.setResourceState('res/cas', 'FROZEN', { ifVersion: r1.version }).catch((e) => e);
  assert.ok(stale instanceof VersionMismatchError, String(stale));
  assert.equal(stale.status, 409);
  assert.equal(stale.resource, 'res/cas');
  assert.equal(stale.ifVersion, r1.version);
  assert.equal(stale.currentVersion, r2.version);
  const got = await c.getResource('res/cas');
  assert.equal(got.state, 'READY', 'the refused compare-and-set wrote nothing');
  assert.equal(got.version, r2.version);

  await c.setResourceState('res/list/b', 'X');
  await c.setResourceState('res/list/a', 'Y');
  const page1 = await c.listResources({ prefix: 'res/list/', limit: 1 });
  assert.deepEqual(page1.resources.map((r) => r.key), ['res/list/a']);
  const page2 = await c.listResources({ prefix: 'res/list/', after: page1.next_after, limit: 1 });
  assert.deepEqual(page2.resources.map((r) => [r.key, r.state]), [['res/list/b', 'X']]);
});

test('resource keys with slashes and dots set and read back', async () => {
  for (const key of ['team/db', 'a//b', '/lead', 'x/./y', 'p/..', '../q', '.', '..', 'sp ace/ü', 'end/', 'ends/state', 'pct%2F']) {
    const set = await c.setResourceState(key, 'S1');
    assert.equal(set.key, key);
    const got = await c.getResource(key);
    assert.equal(got.key, key);
    assert.equal(got.state, 'S1');
  }
});

test('a resource cooldown after a job is cleared early, once', async () => {
  await c.putKind('remediate', { resource_cooldown_ms: 600000 });
  const { job } = await c.submitJob({ kind: 'remediate', resource: 'app/web' });
  const claimed = await c.claimJobs({ worker: 'ts-test', kinds: ['remediate'], ttl_ms: 30000 });
  assert.deepEqual(claimed.jobs.map((j) => j.id), [job.id]);
  await c.completeJob(job.id, claimed.jobs[0].token);
  const cooling = await c.getResource('app/web');
  assert.equal(cooling.cooldown?.job, job.id);
  const cleared = await c.clearResourceCooldown('app/web', 'ts test: remediated by hand');
  assert.equal(cleared.resource, 'app/web');
  assert.equal(cleared.job, job.id);
  assert.ok(cleared.remaining_ms > 0);
  assert.equal((await c.getResource('app/web')).cooldown, undefined);
  await assert.rejects(c.clearResourceCooldown('app/web', 'again'), NotFoundError);
});

test('clearing the cooldown of evil/../victim, or of .., leaves victim\'s', async () => {
  await c.putKind('cool-dots', { resource_cooldown_ms: 600000 });
  const keys = ['victim', 'evil/../victim', '..'];
  for (const key of keys) {
    const { job } = await c.submitJob({ kind: 'cool-dots', resource: key });
    const claimed = await c.claimJobs({ worker: 'ts-test', kinds: ['cool-dots'], ttl_ms: 30000 });
    assert.deepEqual(claimed.jobs.map((j) => j.resource), [key]);
    await c.completeJob(job.id, claimed.jobs[0].token);
  }
  assert.equal((await c.clearResourceCooldown('evil/../victim', 'ts test')).resource, 'evil/../victim');
  assert.equal((await c.getResource('evil/../victim')).cooldown, undefined);
  assert.equal((await c.clearResourceCooldown('..', 'ts test')).resource, '..');
  assert.equal((await c.getResource('..')).cooldown, undefined);
  assert.ok((await c.getResource('victim')).cooldown, 'victim still cools down');
});

test('checkFence raises the fence and refuses an older token with StaleTokenError', async () => {
  // Tokens the store issued: a fence refuses any greater than the greatest issued.
  const tokens = [];
  for (let i = 0; i < 3; i++) {
    const l = await c.tryAcquire('ts/fence-tokens');
    tokens.push(l.token);
    await l.release();
  }
  const [t1, t2, t3] = tokens;
  assert.deepEqual(await c.checkFence('db/main', t2), { resource: 'db/main', token: t2 });
  assert.deepEqual(await c.checkFence('db/main', t2), { resource: 'db/main', token: t2 }, 'equal tokens pass');
  const err = await c.checkFence('db/main', t1).catch((e) => e);
  assert.ok(err instanceof StaleTokenError, String(err));
  assert.equal(err.token, t1);
  assert.equal(err.currentToken, t2);
  assert.equal(err.resource, 'db/main');
  await c.checkFence('db/main', t3);
  assert.equal((await c.checkFence('db/main', t2).catch((e) => e)).currentToken, t3);
  const unissued = await c.checkFence('db/main', t3 + 1000).catch((e) => e);
  assert.ok(unissued instanceof InvalidArgumentError, String(unissued));
  assert.equal(unissued.field, 'token');
});

test('resetFence deletes a poisoned fence and answers the token it held', async () => {
  const tokens = [];
  for (let i = 0; i < 2; i++) {
    const l = await c.tryAcquire('ts/fence-reset-tokens');
    tokens.push(l.token);
    await l.release();
  }
  const [older, newer] = tokens;
  await c.checkFence('db/restored', newer);
  assert.ok((await c.checkFence('db/restored', older).catch((e) => e)) instanceof StaleTokenError);
  assert.deepEqual(await c.resetFence('db/restored', 'restored from backup'), { resource: 'db/restored', token: newer });
  assert.deepEqual(await c.checkFence('db/restored', older), { resource: 'db/restored', token: older }, 'after the reset an older token passes');
  await c.resetFence('db/restored', 'again');
  await assert.rejects(c.resetFence('db/restored', 'no fence left'), NotFoundError);
  await assert.rejects(c.resetFence('db/restored', ''), TypeError);
});

test('getResource shows the holder, the rest and the line in order; a lock-only key is a resource', async () => {
  const key = 'line/ts';
  await assert.rejects(c.getResource(key), NotFoundError);
  const held = await c.tryAcquire(key, { holder: 'ops', ttlMs: 60000, cooldownMs: 3600000 });
  const r0 = await c.getResource(key);
  assert.equal(r0.state, '');
  assert.equal(r0.version, 0);
  assert.equal(r0.holder?.holder, 'ops');
  assert.equal(r0.holder?.token, held.token);
  assert.deepEqual(r0.line, []);
  // A request that waits is a ticket in the line while it waits.
  const stop = new AbortController();
  const waiting = c.acquire(key, { holder: 'w1', leaseId: 'w1-lease', ttlMs: 60000, signal: stop.signal }).catch((e) => e);
  for (const t0 = Date.now(); !(await c.getResource(key)).line.some((t) => t.holder === 'w1'); ) {
    assert.ok(Date.now() - t0 < 30000, 'the ticket of w1 never appeared in the line');
    await new Promise((r) => setTimeout(r, 20));
  }
  const { job } = await c.submitJob({ kind: 'line-ts', resource: key });
  const r1 = await c.getResource(key);
  assert.deepEqual(r1.line.map((t) => [t.position, t.type, t.holder]), [[1, 'lock', 'w1'], [2, 'job', `job:${job.id}`]]);
  assert.equal(r1.line[0].lease_id, 'w1-lease');
  assert.ok(r1.line[0].expires_at);
  assert.equal(r1.line[1].job, job.id);
  assert.equal(r1.line[1].kind, 'line-ts');
  assert.equal(r1.line[1].expires_at, undefined);
  assert.deepEqual((await c.getResource(key, { lineLimit: 1 })).line.map((t) => t.holder), ['w1']);
  const bad = await c.getResource(key, { lineLimit: 1001 }).catch((e) => e);
  assert.ok(bad instanceof InvalidArgumentError, String(bad));
  assert.equal(bad.field, 'line_limit');
  await held.release();
  const r2 = await c.getResource(key);
  assert.equal(r2.holder, undefined);
  assert.equal(r2.rest?.reason, 'cooldown');
  assert.ok(r2.rest.remaining_ms > 59 * 60 * 1000);
  assert.equal(r2.line[0].holder, 'w1', 'w1 still waits while the key rests');
  stop.abort();
  assert.ok((await waiting) instanceof Error, 'w1 was not granted a resting key');
  // A waiter that gives up leaves the line before acquire rejects (POST /v1/locks/leave).
  assert.deepEqual((await c.getResource(key)).line.map((t) => t.holder), [`job:${job.id}`], 'w1 left the line');
});

test('explainJob and explainResource name what holds a job and a key back', async () => {
  const key = 'explain/ts';
  const first = (await c.submitJob({ kind: 'line-ts', resource: key })).job;
  const claimed = await c.claimJobs({ worker: 'w-ts', kinds: ['line-ts'], limit: 1, ttl_ms: 60000 });
  assert.equal(claimed.jobs[0].id, first.id);
  const second = (await c.submitJob({ kind: 'line-ts', resource: key })).job;
  const e = await c.explainJob(second.id);
  assert.equal(e.key, key);
  assert.equal(e.job, second.id);
  assert.equal(e.job_state, 'available');
  assert.equal(e.reasons[0].code, 'held');
  assert.equal(e.reasons[0].holder, `job:${first.id}`);
  assert.deepEqual((await c.explainJob(first.id)).reasons, [], 'a running job is not waiting');
  const r = await c.explainResource(key);
  assert.deepEqual(r.reasons.map((x) => x.code), ['held', 'ahead']);
  assert.equal(r.reasons[1].ahead, 1);
  assert.deepEqual((await c.explainResource('explain/free')).reasons, []);
  await assert.rejects(c.explainJob(999999), NotFoundError);
});
