import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BatonClient,
  BatonError,
  CooldownError,
  InvalidArgumentError,
  LeaseLostError,
  LeaseReleasedError,
  LockHeldError,
  NotFoundError,
  NotHeldError,
  keyPath,
} from '../src/index.js';
import { BatonServer } from './server.mjs';

let server;
const warnings = [];
const newClient = (o = {}) => new BatonClient({ baseUrl: server.url, onWarning: (m) => warnings.push(m), ...o });
const aborted = (signal) => new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', resolve, { once: true })));
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  server = new BatonServer();
  await server.start();
});
after(async () => {
  await server.close();
});

test('tryAcquire, conflict naming the holder, renew, release, and tokens that increase', async () => {
  const c = newClient();
  const a = await c.tryAcquire('ts/basic', { ttlMs: 5000, holder: 'job-7', metadata: { pipeline: '12' } });
  assert.equal(a.holder, 'job-7');
  assert.deepEqual(a.metadata, { pipeline: '12' });
  const err = await c.tryAcquire('ts/basic', { holder: 'job-8' }).catch((e) => e);
  assert.ok(err instanceof LockHeldError, String(err));
  assert.equal(err.holder, 'job-7');
  assert.equal(err.token, a.token);
  assert.ok(err.expiresAt instanceof Date && err.expiresAt.getTime() > Date.now() - 60000);
  const before = a.deadline;
  await a.renew();
  assert.ok(a.deadline > before, 'a renew moves the local deadline');
  assert.equal((await c.get('ts/basic')).lease_id, a.lease_id);
  await a.release();
  assert.ok(a.signal.reason instanceof LeaseReleasedError);
  await a.release(); // harmless twice
  await assert.rejects(c.get('ts/basic'), NotFoundError);
  const b = await c.tryAcquire('ts/basic');
  assert.ok(b.token > a.token, `token ${b.token} after ${a.token}`);
  await b.release();
});

test('bad input is an InvalidArgumentError naming the field; cooldown is a CooldownError', async () => {
  const c = newClient();
  const err = await c.tryAcquire('ts/bad', { ttlMs: 10 }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError, String(err));
  assert.equal(err.field, 'ttl_ms');
  assert.equal(err.status, 400);
  const l = await c.tryAcquire('ts/cool', { cooldownMs: 60000 });
  await l.release();
  const cool = await c.tryAcquire('ts/cool').catch((e) => e);
  assert.ok(cool instanceof CooldownError, String(cool));
  assert.equal(cool.reason, 'cooldown');
  assert.ok(cool.remainingMs > 0);
});

test('a keys with slashes and dots reads back through get', async () => {
  const c = newClient();
  for (const key of ['team/db', 'a//b', '/lead', 'x/./y', 'p/..', '../q', '.', '..', 'sp ace/ü', 'end/', 'pct%2F']) {
    const l = await c.tryAcquire(key);
    assert.equal((await c.get(key)).key, key, `${key} as ${keyPath(key)}`);
    await l.release();
  }
});

// A long wait: the waiter's single long-poll lasts longer than the TTL. Its lease must be usable
// for a full TTL from the grant, not from the request's start (which would already be past).
test('a wait longer than the TTL gives a lease whose deadline counts from the grant', async () => {
  const c = newClient();
  const ttlMs = 2000;
  const a = await c.tryAcquire('ts/long', { ttlMs, holder: 'first' });
  const started = performance.now();
  const waiting = c.acquire('ts/long', { ttlMs, holder: 'second' });
  await delay(3 * ttlMs / 2 + 500); // the holder keeps it past a TTL (keepalive)
  assert.equal(a.signal.aborted, false, `keepalive kept the first lease: ${a.signal.reason?.stack} ${a.signal.reason?.cause}`);
  await a.release();
  const b = await waiting;
  const waited = performance.now() - started;
  assert.ok(waited >= ttlMs, `waited only ${waited} ms`);
  assert.ok(b.token > a.token);
  assert.equal(b.signal.aborted, false);
  // Measured from the request's start the deadline would be over a second in the past.
  assert.ok(b.remainingMs > 0, `remaining ${b.remainingMs} ms after a ${waited} ms wait`);
  assert.ok(b.deadline > started + waited - 250, 'deadline measured from the grant');
  // And keepalive keeps it past another TTL.
  await delay(ttlMs + 500);
  assert.equal(b.signal.aborted, false, String(b.signal.reason));
  await b.release();
});

test('the server restarting during a hold: keepalive rides it out, and a waiter gets the key after', async () => {
  const c = newClient();
  const ttlMs = 6000;
  const a = await c.tryAcquire('ts/restart', { ttlMs, holder: 'holder' });
  const waiting = c.acquire('ts/restart', { ttlMs, holder: 'waiter', waitMs: 60000 });
  await server.stop('SIGKILL');
  const expiresBefore = a.expires_at;
  await server.start(); // same port, same SQLite file
  // Wait for a renew after the restart, bounded by the lease's own deadline.
  while (a.expires_at === expiresBefore) {
    assert.equal(a.signal.aborted, false, `lease lost across the restart: ${a.signal.reason}`);
    await Promise.race([delay(50), aborted(a.signal)]);
  }
  assert.equal(a.signal.aborted, false);
  const onServer = await c.get('ts/restart');
  assert.equal(onServer.lease_id, a.lease_id);
  assert.equal(onServer.token, a.token);
  await a.release();
  const b = await waiting;
  assert.equal(b.holder, 'waiter');
  assert.ok(b.token > a.token);
  await b.release();
});

test('lease loss aborts the signal: not_held from keepalive, and the local deadline without keepalive', async () => {
  const c = newClient();
  const a = await c.tryAcquire('ts/lost', { ttlMs: 1500 });
  await c.forceRelease('ts/lost', 'test: take it away');
  await aborted(a.signal); // the next keepalive renew is refused
  assert.ok(a.signal.reason instanceof LeaseLostError, String(a.signal.reason));
  assert.ok(a.signal.reason.cause instanceof NotHeldError);
  await assert.rejects(a.release(), NotHeldError);

  const start = performance.now();
  const b = await c.tryAcquire('ts/deadline', { ttlMs: 1000, keepalive: false });
  const granted = performance.now();
  await aborted(b.signal);
  const after = performance.now() - start;
  assert.ok(b.signal.reason instanceof LeaseLostError);
  // The deadline is the request's start + TTL*(1-drift) - margin = 890 ms: never later than the
  // server's expiry. The request started between start and granted (a loaded machine may put
  // milliseconds between this call and the client's own clock reading).
  assert.ok(b.deadline - granted <= 1000 * 0.99 - 100 + 1, `deadline ${b.deadline - granted} ms after the grant came back`);
  assert.ok(after >= 1000 * 0.99 - 100 - 1, `aborted after ${after} ms`);
  await b.release(); // nobody took it: the release still frees it
});

test('withLock passes a signal that aborts on loss, and rejects with the loss', async () => {
  const c = newClient();
  let tokenSeen = 0;
  const err = await c
    .withLock('ts/with', async (signal, lease) => {
      tokenSeen = lease.token;
      await c.forceRelease('ts/with', 'test');
      await aborted(signal);
    }, { ttlMs: 1500 })
    .catch((e) => e);
  assert.ok(tokenSeen > 0);
  assert.ok(err instanceof LeaseLostError, String(err));
  assert.equal(await c.withLock('ts/with', (signal, lease) => lease.token * 0 + 42), 42);
  await assert.rejects(c.get('ts/with'), NotFoundError, 'withLock released');
});

test('a waiting acquire that runs out names the holder', async () => {
  const c = newClient();
  const a = await c.tryAcquire('ts/timeout', { holder: 'busy', ttlMs: 10000 });
  const t0 = performance.now();
  const err = await c.acquire('ts/timeout', { waitMs: 700 }).catch((e) => e);
  assert.ok(err instanceof LockHeldError, String(err));
  assert.equal(err.holder, 'busy');
  assert.ok(performance.now() - t0 >= 600);
  await a.release();
});

// A 503 with Retry-After: the waiting acquire does not come back before it says. The first
// answer comes from a proxy in front of the real server (a fetch that answers 503 once).
test('a waiting acquire honours Retry-After on 503 overloaded', async () => {
  const calls = [];
  const proxy = async (url, init) => {
    calls.push(performance.now());
    if (String(url).endsWith('/v1/locks/acquire') && calls.length === 1) {
      return new Response(JSON.stringify({ type: 'https://baton.dev/problems/overloaded', title: 'Server overloaded', status: 503, code: 'overloaded', retry_after_ms: 1000 }), {
        status: 503,
        headers: { 'content-type': 'application/problem+json', 'retry-after': '1' },
      });
    }
    return fetch(url, init);
  };
  const c = newClient({ fetch: proxy });
  await c.info(); // so that the proxy's first acquire is the first call
  calls.length = 0;
  const l = await c.acquire('ts/overloaded', { waitMs: 10000 });
  const acquires = calls;
  assert.ok(acquires.length >= 2);
  assert.ok(acquires[1] - acquires[0] >= 1000, `retried after ${acquires[1] - acquires[0]} ms`);
  await l.release();
  // Without a wait, 503 is the caller's to handle.
  calls.length = 0;
  const err = await c.tryAcquire('ts/overloaded').catch((e) => e);
  assert.ok(err instanceof BatonError && err.status === 503 && err.retryAfterMs === 1000 && err.retryable, String(err));
});

test('clearRest ends a cooldown early; a free or held key is NotFoundError', async () => {
  const c = newClient();
  const l = await c.tryAcquire('ts/rest', { cooldownMs: 600000 });
  await assert.rejects(c.clearRest('ts/rest', 'test: held'), NotFoundError);
  await l.release();
  await assert.rejects(c.tryAcquire('ts/rest'), CooldownError);
  const rest = await c.clearRest('ts/rest', 'test: rested enough');
  assert.equal(rest.key, 'ts/rest');
  assert.equal(rest.reason, 'cooldown');
  assert.ok(rest.remaining_ms > 0 && rest.remaining_ms <= 600000, String(rest.remaining_ms));
  const again = await c.tryAcquire('ts/rest');
  assert.ok(again.token > l.token);
  await again.release();
  await assert.rejects(c.clearRest('ts/rest', 'test: free'), NotFoundError);
});
