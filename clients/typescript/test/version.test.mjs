import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

// The clients are versioned with the server and with each other (docs/clients.md, Versions).
const read = (rel) => readFileSync(new URL(rel, import.meta.url), 'utf8');

test("package.json's version is the Python client's (pyproject.toml and __version__)", () => {
  const version = JSON.parse(read('../package.json')).version;
  const pyproject = /^\[project\][^[]*?^version\s*=\s*"([^"]+)"/m.exec(read('../../python/pyproject.toml'));
  assert.ok(pyproject, 'no version in [project] of clients/python/pyproject.toml');
  const dunder = /^__version__\s*=\s*["']([^"']+)["']/m.exec(read('../../python/baton/__init__.py'));
  assert.ok(dunder, 'no __version__ in clients/python/baton/__init__.py');
  assert.match(version, /^\d+\.\d+\.\d+/);
  assert.equal(pyproject[1], version, 'clients/python/pyproject.toml');
  assert.equal(dunder[1], version, 'clients/python/baton/__init__.py');
});
