import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, CooldownError, InvalidArgumentError, NotFoundError } from '../src/index.js';
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

test('prefix rates: set, get, list; a lock over the rate is refused naming it; bad rates name the field; delete', async () => {
  const set = await c.setPrefixRate('ts-rated/', '1/1h');
  assert.deepEqual([set.prefix, set.rate], ['ts-rated/', '1/1h']);
  assert.deepEqual(await c.getPrefixRate('ts-rated/'), set);
  assert.deepEqual((await c.listPrefixRates()).rates, [set]);
  await (await c.tryAcquire('ts-rated/a', { keepalive: false })).release();
  const refused = await c.tryAcquire('ts-rated/b', { keepalive: false }).catch((e) => e);
  assert.ok(refused instanceof CooldownError, String(refused));
  assert.deepEqual([refused.reason, refused.rate, refused.prefix], ['rate', '1/1h', 'ts-rated/']);
  for (const [bad, field] of [['0/1m', 'rate.max'], ['3/999ms', 'rate.window']]) {
    await assert.rejects(c.setPrefixRate('ts-other/', bad), (e) => e instanceof InvalidArgumentError && e.field === field);
  }
  await assert.rejects(c.setPrefixRate('ts-rated/x/', '1/1m'), (e) => e instanceof InvalidArgumentError && e.field === 'prefix');
  assert.deepEqual(await c.deletePrefixRate('ts-rated/'), { prefix: 'ts-rated/', deleted: true });
  await assert.rejects(c.getPrefixRate('ts-rated/'), NotFoundError);
});

test('limit rates: set with a rate, a unit over it is refused naming the limit', async () => {
  const lim = await c.setLimit('ts-api', 1000000, { rate: '1/1h' });
  assert.equal(lim.rate, '1/1h');
  await (await c.tryAcquire('ts-api-1', { limits: ['ts-api'], keepalive: false })).release();
  const refused = await c.tryAcquire('ts-api-2', { limits: ['ts-api'], keepalive: false }).catch((e) => e);
  assert.ok(refused instanceof CooldownError, String(refused));
  assert.deepEqual([refused.reason, refused.limit], ['rate', 'ts-api']);
  await assert.rejects(c.setLimit('ts-api', 5, { rate: '1000001/1m' }), (e) => e instanceof InvalidArgumentError && e.field === 'rate.max');
});
