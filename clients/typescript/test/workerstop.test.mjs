// A worker that stops while its claim waits in the server: the claim is ended, not abandoned.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient } from '../src/index.js';
import { BatonServer } from './server.mjs';
import { HoldingProxy } from './proxy.mjs';

let server;
let c;
before(async () => {
  server = new BatonServer();
  await server.start();
  c = new BatonClient({ baseUrl: server.url, onWarning: () => {} });
  await c.putKind('stop.claimed', { max_attempts: 3 });
  await c.putKind('stop.old', { max_attempts: 3 });
});
after(async () => {
  await server.close();
});

// The server claims a job for the worker's waiting claim, and its answer is held back in a proxy
// until the worker has stopped: the job was claimed in the instant of the stop. The worker must
// still read that answer and hand the job back (worker_shutdown, retried at once), not abandon
// the claim and leave the job running with nobody to run it until its lease expires (30 s) and
// the reaper ends the attempt as timed out.
test('a worker stopping while its claim waits hands back the job claimed in that instant', async () => {
  const proxy = new HoldingProxy(server.url);
  await proxy.start();
  try {
    const w = new BatonClient({ baseUrl: proxy.url, onWarning: () => {} });
    const claims = [];
    let claimArrived;
    const arrived = new Promise((r) => (claimArrived = r));
    proxy.onRequest = (method, path, body) => {
      if (path === '/v1/jobs/claim') {
        claims.push(body);
        claimArrived();
      }
      // The stop reaches the server after its answer left: the claim's answer, held back, goes
      // on to the worker now.
      if (path === '/v1/jobs/claim/stop') proxy.releaseAnswer();
    };
    let held;
    const answerHeld = new Promise((r) => (held = r));
    proxy.holdNextAnswer('/v1/jobs/claim', (res) => res.jobs.length > 0, held);
    const stop = new AbortController();
    let handled = false;
    const ended = [];
    const done = w.runWorker({
      kinds: ['stop.claimed'],
      ttlMs: 30000,
      signal: stop.signal,
      handler: () => {
        handled = true;
      },
      onJobEnd: (job, err) => ended.push({ job, err }),
    });
    await arrived;
    const { job } = await c.submitJob({ kind: 'stop.claimed', resource: 'stop/a' });
    await answerHeld; // the server claimed it: running, with a lease of 30 s
    assert.equal((await c.getJob(job.id)).state, 'running');
    stop.abort();
    await done;
    const after = await c.getJob(job.id);
    assert.notEqual(after.state, 'running', 'the job claimed as the worker stopped was left running');
    assert.ok(after.state === 'available' || after.state === 'retryable', after.state);
    assert.equal(after.errors.at(-1)?.code, 'worker_shutdown');
    assert.equal(handled, false, 'the handler ran after the worker stopped');
    assert.deepEqual(ended.map((e) => [e.job.id, e.err?.name]), [[job.id, 'WorkerShutdownError']]);
    assert.equal(claims[0].wait_ms, 10000);
    assert.match(claims[0].wait_id ?? '', /^[0-9a-f]{32}$/, 'a waiting claim names its wait');
  } finally {
    await proxy.close();
  }
});

// A server that does not offer claim_stop: the claim names no wait and a stop aborts it (its
// answer never comes here: the proxy holds every answer to a claim).
test('against a server without claim_stop, a stop aborts the claim', async () => {
  const proxy = new HoldingProxy(server.url);
  await proxy.start();
  try {
    proxy.rewriteAnswers('/v1/info', (info) => ({ ...info, claim_stop: undefined }));
    const w = new BatonClient({ baseUrl: proxy.url, onWarning: () => {} });
    const claims = [];
    let stops = 0;
    let claimArrived;
    const arrived = new Promise((r) => (claimArrived = r));
    proxy.onRequest = (method, path, body) => {
      if (path === '/v1/jobs/claim') {
        claims.push(body);
        claimArrived();
      }
      if (path === '/v1/jobs/claim/stop') stops++;
    };
    proxy.holdNextAnswer('/v1/jobs/claim', () => true, () => {});
    const stop = new AbortController();
    const done = w.runWorker({ kinds: ['stop.old'], signal: stop.signal, handler: () => {} });
    await arrived;
    assert.equal(claims[0].wait_id, undefined);
    stop.abort();
    await done;
    assert.equal(stops, 0);
  } finally {
    await proxy.close();
  }
});
