import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, InvalidArgumentError, LockHeldError, NotFoundError, TreeInUseError } from '../src/index.js';
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

test('trees: set, get, list; a child of a held key is refused naming the related key; delete refused while in use', async () => {
  await assert.rejects(c.setTree('cluster'), (e) => e instanceof InvalidArgumentError && e.field === 'prefix');
  const set = await c.setTree('cluster/');
  assert.equal(set.prefix, 'cluster/');
  assert.equal(set.root, 'cluster');
  assert.deepEqual(await c.setTree('cluster/'), set);
  await assert.rejects(c.setTree('cluster/eu/'), (e) => e instanceof InvalidArgumentError && e.field === 'prefix' && e.rule.includes('overlaps'));
  assert.deepEqual(await c.getTree('cluster/'), set);

  const parent = await c.tryAcquire('cluster/eu-1', { holder: 'upgrade', keepalive: false });
  const refused = await c.tryAcquire('cluster/eu-1/node/a', { keepalive: false }).catch((e) => e);
  assert.ok(refused instanceof LockHeldError, String(refused));
  assert.equal(refused.key, 'cluster/eu-1/node/a');
  assert.equal(refused.related, 'cluster/eu-1');
  assert.equal(refused.holder, 'upgrade');
  assert.equal(refused.token, parent.token);
  const inUse = await c.deleteTree('cluster/').catch((e) => e);
  assert.ok(inUse instanceof TreeInUseError, String(inUse));
  assert.deepEqual([inUse.prefix, inUse.key, inUse.what], ['cluster/', 'cluster/eu-1', 'lease']);
  await parent.release();

  assert.deepEqual(await c.deleteTree('cluster/'), { prefix: 'cluster/', deleted: true });
  await assert.rejects(c.getTree('cluster/'), NotFoundError);
  await assert.rejects(c.deleteTree('cluster/'), NotFoundError);
});

test('trees: odd prefixes round-trip, and the list pages', async () => {
  const odd = ['sp ace/q?u#e%ry/ü/../.bin/', 'a/./', 'z/'];
  for (const p of odd) assert.equal((await c.setTree(p)).prefix, p);
  for (const p of odd) assert.equal((await c.getTree(p)).prefix, p);
  const first = await c.listTrees({ limit: 2 });
  assert.deepEqual(first.trees.map((t) => t.prefix), ['a/./', odd[0]]);
  const rest = await c.listTrees({ limit: 2, cursor: first.next_cursor });
  assert.deepEqual(rest.trees.map((t) => t.prefix), ['z/']);
  for (const p of odd) assert.deepEqual(await c.deleteTree(p), { prefix: p, deleted: true });
  assert.deepEqual((await c.listTrees()).trees, []);
});
