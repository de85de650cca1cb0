import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BatonClient, BatonError, LockHeldError, NotFoundError } from '../src/index.js';
import { BatonServer } from './server.mjs';
import { HoldingProxy } from './proxy.mjs';

let server;
let proxy;
before(async () => {
  server = new BatonServer();
  await server.start();
  proxy = new HoldingProxy(server.url);
  await proxy.start();
});
after(async () => {
  await proxy.close();
  await server.close();
});

// The Go conformance case ReleaseOutcomeUnknown over HTTP: a release is held back (the client
// gets no answer), the same holder acquires the key again, and the release then reaches the
// server. The server hands a holder's live lease back to it, so without the client's rule the
// re-acquire returns the released lease and the late release ends it while another holder can
// take the key.
for (const how of ['tryAcquire', 'acquire']) {
  test(`${how}: a lease whose release got no answer is never handed out again`, async () => {
    const c = new BatonClient({ baseUrl: proxy.url, onWarning: () => {} });
    const key = `ts/unsettled/${how}`;
    const opts = { holder: 'deploy-worker-1', ttlMs: 10000 };
    const first = await c.tryAcquire(key, opts);
    const noAnswer = new AbortController();
    proxy.holdNextRelease(() => noAnswer.abort(new Error('no answer to the release')));
    await assert.rejects(first.release({ signal: noAnswer.signal }), /no answer/);
    await assert.rejects(c.tryAcquire(key, { ...opts, leaseId: first.lease_id }), TypeError, 'the same lease ID again is refused');

    const second = await c[how](key, opts);
    const late = await proxy.deliver();
    assert.ok(late.status === 200 || late.status === 409, `the late release: ${late.status} ${JSON.stringify(late.body)}`);
    const onServer = await c.get(key).catch((e) => e);
    assert.ok(!(onServer instanceof NotFoundError), `the late release of lease ${first.lease_id} ended the re-acquired lease ${second.lease_id}`);
    assert.equal(onServer.lease_id, second.lease_id);
    assert.notEqual(second.lease_id, first.lease_id, 'the re-acquire handed back the lease whose release could still be applied');
    assert.ok(second.token > first.token, `token ${second.token} after ${first.token}: a new grant`);
    await second.renew();
    const other = await c.tryAcquire(key, { holder: 'deploy-worker-2' }).catch((e) => e);
    assert.ok(other instanceof LockHeldError, `another holder after the late release: ${other}`);
    await second.release();
  });
}

// A 503 overloaded answer to a release (from a fetch in front of the real server): the release is
// sent again after Retry-After, not failed at once; and one that stays overloaded is given up at
// the lease's local deadline, no attempt starting after it.
test('a release answered 503 overloaded is retried after Retry-After until the local deadline', async () => {
  let overloaded = 0; // how many releases still get 503
  const releases = [];
  const shed = async (url, init) => {
    if (String(url).endsWith('/v1/locks/release')) {
      releases.push(performance.now());
      if (overloaded > 0) {
        overloaded--;
        return new Response(JSON.stringify({ type: 'https://baton.dev/problems/overloaded', title: 'Server overloaded', status: 503, code: 'overloaded', retry_after_ms: 1000 }), {
          status: 503,
          headers: { 'content-type': 'application/problem+json', 'retry-after': '1' },
        });
      }
    }
    return fetch(url, init);
  };
  const c = new BatonClient({ baseUrl: server.url, fetch: shed, onWarning: () => {} });

  const a = await c.tryAcquire('ts/release-503', { ttlMs: 10000 });
  overloaded = 1;
  await a.release();
  assert.equal(releases.length, 2);
  assert.ok(releases[1] - releases[0] >= 1000, `sent again after ${releases[1] - releases[0]} ms`);
  await assert.rejects(c.get('ts/release-503'), NotFoundError, 'the second attempt released it');

  releases.length = 0;
  const b = await c.tryAcquire('ts/release-503', { ttlMs: 4000 });
  overloaded = Infinity;
  const err = await b.release().catch((e) => e);
  overloaded = 0;
  assert.ok(err instanceof BatonError && err.status === 503, String(err));
  assert.ok(releases.length >= 2, `${releases.length} attempts`);
  for (const t of releases) assert.ok(t < b.deadline, 'an attempt started after the local deadline');
  // The outcome counts as unknown: the same holder is not handed the lease back.
  const again = await c.tryAcquire('ts/release-503', { holder: b.holder });
  assert.notEqual(again.lease_id, b.lease_id);
  assert.ok(again.token > b.token);
  await again.release();
});
