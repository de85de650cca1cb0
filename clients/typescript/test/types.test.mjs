import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { generate, readSpec } from '../scripts/gen-types.mjs';

test('src/api.d.ts is what scripts/gen-types.mjs makes of server/openapi.json', () => {
  const committed = readFileSync(new URL('../src/api.d.ts', import.meta.url), 'utf8');
  assert.equal(committed, generate(readSpec()), 'run: npm run gen-types');
});

test('the package has no runtime dependencies', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.type, 'module');
});
