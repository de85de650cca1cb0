import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient } from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
before(async () => {
  server = new BatonServer();
  await server.start();
  const c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
  await c.putKind('traced', {});
});
after(async () => {
  await server.close();
});

const tp = (n) => `00-${n.toString(16).padStart(32, '0')}-${(n + 1).toString(16).padStart(16, '0')}-01`;

test('a submitted job keeps the traceparent the client sends: the option, the submit\'s, or TRACEPARENT', async () => {
  const c = new BatonClient({ baseUrl: server.url, traceparent: tp(0xa1), onWarning: () => {} });
  const { job } = await c.submitJob({ kind: 'traced', resource: 'trace/opt' });
  assert.equal(job.traceparent, tp(0xa1));
  const { job: own } = await c.submitJob({ kind: 'traced', resource: 'trace/own' }, { traceparent: tp(0xb2) });
  assert.equal(own.traceparent, tp(0xb2));
  assert.equal((await c.getJob(own.id)).traceparent, tp(0xb2));

  const saved = process.env.TRACEPARENT;
  try {
    process.env.TRACEPARENT = tp(0xc3);
    const fromEnv = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
    assert.equal((await fromEnv.submitJob({ kind: 'traced', resource: 'trace/env' })).job.traceparent, tp(0xc3));
    process.env.TRACEPARENT = 'not-a-traceparent'; // ignored, as W3C asks of a malformed one
    const bad = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
    assert.equal((await bad.submitJob({ kind: 'traced', resource: 'trace/bad-env' })).job.traceparent, undefined);
    delete process.env.TRACEPARENT;
    const none = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
    assert.equal((await none.submitJob({ kind: 'traced', resource: 'trace/none' })).job.traceparent, undefined);
  } finally {
    if (saved === undefined) delete process.env.TRACEPARENT;
    else process.env.TRACEPARENT = saved;
  }
  assert.throws(() => new BatonClient({ baseUrl: server.url, traceparent: '00-abc' }), /traceparent must be a W3C traceparent/);
  await assert.rejects(c.submitJob({ kind: 'traced', resource: 'trace/x' }, { traceparent: 'nope' }), /traceparent must be a W3C traceparent/);
});
