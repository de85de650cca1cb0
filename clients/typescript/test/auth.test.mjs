import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthError, BatonClient } from '../src/index.js';
import { BatonServer } from './server.mjs';

// A server with --auth-file (docs/cli.md: one token a line, "name role sha256-of-token").
const tokens = { reader: 'read-secret-1', writer: 'write-secret-2' };
const dir = mkdtempSync(join(tmpdir(), 'baton-ts-auth-'));
const authFile = join(dir, 'tokens');
const sha = (s) => createHash('sha256').update(s).digest('hex');
writeFileSync(authFile, `# name role sha256\nreader read ${sha(tokens.reader)}\nwriter write ${sha(tokens.writer)}\n`);

let server;
before(async () => {
  server = new BatonServer(['--auth-file', authFile]);
  await server.start();
});
after(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const client = (token) => new BatonClient({ baseUrl: server.url, token, onWarning: () => {} });

test('a missing or wrong token is an AuthError (401), a role too low one too (403)', async () => {
  for (const token of [undefined, 'not-a-token']) {
    const err = await client(token).tryAcquire('ts/auth').catch((e) => e);
    assert.ok(err instanceof AuthError, `token ${token}: ${err}`);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'unauthorized');
    assert.equal(err.retryable, false);
  }
  // A waiting acquire gives up at once on refused credentials rather than retrying.
  await assert.rejects(client('not-a-token').acquire('ts/auth', { waitMs: 60000 }), AuthError);

  const info = await client(tokens.reader).info();
  assert.equal(info.auth, true);
  assert.equal(info.principal, 'reader');
  const denied = await client(tokens.reader).tryAcquire('ts/auth').catch((e) => e);
  assert.ok(denied instanceof AuthError, String(denied));
  assert.equal(denied.status, 403);
  assert.equal(denied.code, 'forbidden');
  assert.equal(denied.problem.required_role, 'write');

  // A lease ID lets its bearer renew and release the lease: readers do not see it, its owner does.
  const l = await client(tokens.writer).tryAcquire('ts/auth');
  const seen = await client(tokens.reader).get('ts/auth');
  assert.equal(seen.holder, l.holder);
  assert.equal(seen.lease_id, undefined);
  assert.equal((await client(tokens.writer).get('ts/auth')).lease_id, l.lease_id);
  await l.release();
});
