import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, InvalidArgumentError, LimitInUseError, LockHeldError, NotFoundError } from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
let c;
before(async () => {
  server = new BatonServer();
  await server.start();
  c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
});
after(async () => {
  await server.close();
});

test('limits: set, a full limit refuses naming it, list, delete refused while held', async () => {
  await assert.rejects(c.setLimit('gpu/pool', 0), (e) => e instanceof InvalidArgumentError && e.field === 'capacity');
  const set = await c.setLimit('gpu/pool', 1);
  assert.equal(set.capacity, 1);
  const a = await c.tryAcquire('gpu/pool', { shared: true, limits: ['gpu/pool'], keepalive: false });
  assert.equal(a.shared, true);
  assert.deepEqual(a.limits, ['gpu/pool']);
  assert.deepEqual(a.slots, { 'gpu/pool': 0 });
  const full = await c.tryAcquire('gpu/pool', { shared: true, limits: ['gpu/pool'], keepalive: false }).catch((e) => e);
  assert.ok(full instanceof LockHeldError, String(full));
  assert.equal(full.limit, 'gpu/pool');
  assert.equal(full.inUse, 1);
  assert.equal(full.capacity, 1);
  const got = await c.getLimit('gpu/pool');
  assert.equal(got.in_use, 1);
  assert.equal(got.holders.length, 1);
  const page = await c.listLimits();
  assert.deepEqual(page.limits.map((l) => [l.name, l.in_use, l.capacity]), [['gpu/pool', 1, 1]]);
  const inUse = await c.deleteLimit('gpu/pool').catch((e) => e);
  assert.ok(inUse instanceof LimitInUseError, String(inUse));
  assert.equal(inUse.inUse, 1);
  await a.release();
  assert.deepEqual(await c.deleteLimit('gpu/pool'), { name: 'gpu/pool', deleted: true });
  await assert.rejects(c.getLimit('gpu/pool'), NotFoundError);
});

test('several keys: all or nothing, the refusal names the held resource', async () => {
  const b = await c.tryAcquire('db/b', { holder: 'b', keepalive: false });
  const refused = await c.tryAcquire('db/a', { resources: ['db/b'], keepalive: false }).catch((e) => e);
  assert.ok(refused instanceof LockHeldError, String(refused));
  assert.equal(refused.resource, 'db/b');
  assert.equal(refused.holder, 'b');
  await assert.rejects(c.get('db/a'), NotFoundError);
  await b.release();
  const both = await c.tryAcquire('db/a', { resources: ['db/b'], keepalive: false });
  assert.deepEqual(both.resources, ['db/b']);
  await both.release();
  await assert.rejects(c.tryAcquire('bad', { limits: ['no-such'] }), (e) => e instanceof InvalidArgumentError && e.field === 'limits');
});
