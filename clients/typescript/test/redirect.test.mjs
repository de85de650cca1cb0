// The client never follows a redirect: Baton's API does not redirect, and following one would
// send the request, bearer token included, to whatever the Location names.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BatonClient, RedirectError } from '../src/index.js';

// listen starts a local HTTP server on a free loopback port; it records every request.
async function listen(handle) {
  const requests = [];
  const srv = createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    req.resume();
    req.on('end', () => handle(req, res));
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { srv, requests, url: `http://127.0.0.1:${srv.address().port}` };
}

let other;
let redirector;
let status = 307;
before(async () => {
  // The other host answers as a Baton server would, so that a client that followed the redirect
  // would succeed quietly.
  other = await listen((req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ lease: { key: 'k', lease_id: 'x', holder: 'h', token: 1, acquired_at: '2026-01-01T00:00:00Z',
      expires_at: '2026-01-01T00:00:15Z', ttl_left_ms: 15000 } }));
  });
  redirector = await listen((req, res) => {
    res.writeHead(status, { Location: other.url + req.url, 'Content-Length': '0' });
    res.end();
  });
});
after(async () => {
  for (const s of [other, redirector]) {
    s.srv.closeAllConnections();
    await new Promise((resolve) => s.srv.close(resolve));
  }
});

test('a redirect is a RedirectError naming the Location, and the token is not sent on', async () => {
  const c = new BatonClient({ baseUrl: redirector.url, token: 'ts-secret-token', onWarning: () => {} });
  const calls = { GET: () => c.get('team/db'), POST: () => c.forceRelease('team/db', 'redirect test') };
  for (const s of [301, 302, 303, 307, 308]) {
    for (const [method, call] of Object.entries(calls)) {
      status = s;
      const err = await call().then((v) => v, (e) => e);
      assert.ok(err instanceof RedirectError, `${s} ${method}: ${err instanceof Error ? err.stack : JSON.stringify(err)}`);
      assert.equal(err.status, s);
      assert.equal(err.retryable, false);
      assert.equal(err.location, `${other.url}/v1/locks/${method === 'GET' ? 'team/db' : 'force-release'}`);
      assert.match(err.message, new RegExp(`redirect.*${other.url}`));
    }
  }
  assert.equal(redirector.requests.length, 10);
  assert.deepEqual(other.requests, [], 'the client followed a redirect to another host');
});
