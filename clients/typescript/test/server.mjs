// Starts a real `baton serve` (built from this repository unless BATON_BIN names a binary) on a
// free loopback port with its own SQLite file, and restarts it on the same port and file.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../../', import.meta.url));

let built = null;
export function batonBinary() {
  if (process.env.BATON_BIN) return process.env.BATON_BIN;
  if (built) return built;
  const dir = mkdtempSync(join(tmpdir(), 'baton-ts-bin-'));
  built = join(dir, 'baton');
  execFileSync('go', ['build', '-o', built, './cmd/baton'], { cwd: repo, stdio: 'inherit' });
  return built;
}

export class BatonServer {
  constructor(extraArgs = []) {
    this.dir = mkdtempSync(join(tmpdir(), 'baton-ts-'));
    this.extraArgs = extraArgs;
    this.listen = '127.0.0.1:0';
    this.proc = null;
    this.url = '';
  }

  /** Starts the server and resolves once it logged its URL and /readyz answers. */
  async start() {
    const bin = batonBinary();
    const args = ['serve', '--listen', this.listen, '--store', `sqlite://${join(this.dir, 'b.db')}`, ...this.extraArgs];
    const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    this.log = '';
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    this.exited = exited;
    this.url = await new Promise((resolve, reject) => {
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (chunk) => {
        this.log += chunk;
        const m = /baton serving"? url=(http:\/\/[0-9.:]+)/.exec(this.log);
        if (m) resolve(m[1]);
      });
      exited.then((code) => reject(new Error(`baton serve exited (${code}) before serving:\n${this.log}`)));
    });
    this.listen = this.url.replace('http://', ''); // a restart takes the same port
    for (;;) {
      try {
        const r = await fetch(`${this.url}/readyz`);
        if (r.ok) return this.url;
      } catch {
        // not yet
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Stops the server: SIGKILL by default (a crash), or SIGTERM. */
  async stop(signal = 'SIGKILL') {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill(signal);
    await this.exited;
  }

  async close() {
    await this.stop();
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }
}
