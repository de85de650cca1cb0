// An HTTP proxy in front of a real `baton serve` that can hold one release back: the release
// reaches the proxy, which neither answers the client nor passes it on until the test delivers
// it, late. This is a release whose outcome the client cannot know (a cut connection, a timeout)
// and that the server still applies afterwards. It can also hold back the server's answer to a
// request (the server has acted; the client has not heard), rewrite answers, and tells the test
// of each request that arrives.
import { createServer } from 'node:http';

const hop = new Set(['host', 'connection', 'content-length', 'keep-alive', 'transfer-encoding']);

export class HoldingProxy {
  /** @param {string} target the server's URL */
  constructor(target) {
    this.target = target;
    this.url = '';
    this.held = null; // {method, url, headers, body}
    this.onHeld = null;
    this.holdAnswer = null; // {path, pred, onHeld}
    this.heldAnswer = null; // () => void: passes it on
    this.rewrites = new Map(); // path -> (body) => body
    /** Called with (method, path, body) as each request arrives, before it is passed on. */
    this.onRequest = null;
    this.server = createServer((req, res) => this.#serve(req, res));
  }

  /**
   * The next answer to path whose decoded body satisfies pred is held back: the server has
   * answered, the client does not hear it until releaseAnswer(). onHeld is called once it is held.
   */
  holdNextAnswer(path, pred, onHeld) {
    this.holdAnswer = { path, pred, onHeld };
  }

  /** Passes the held-back answer on to its client (if the client still listens). */
  releaseAnswer() {
    const pass = this.heldAnswer;
    this.heldAnswer = null;
    pass?.();
  }

  /** Answers to path are passed on as fn(decoded body) instead. */
  rewriteAnswers(path, fn) {
    this.rewrites.set(path, fn);
  }

  async start() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this.url;
  }

  /** The next POST /v1/locks/release is held back; onHeld is called once it arrived. */
  holdNextRelease(onHeld) {
    this.onHeld = onHeld;
  }

  /** Sends the held-back release to the server now; resolves with its {status, body}. */
  async deliver() {
    const h = this.held;
    if (!h) throw new Error('no release was held back');
    this.held = null;
    const r = await fetch(this.target + h.url, { method: h.method, headers: h.headers, body: h.body });
    return { status: r.status, body: await r.json() };
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  async #serve(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !hop.has(k)));
    if (this.onHeld && req.method === 'POST' && req.url.endsWith('/v1/locks/release')) {
      const onHeld = this.onHeld;
      this.onHeld = null;
      this.held = { method: req.method, url: req.url, headers, body };
      onHeld(); // no answer: the client gives up on its own
      return;
    }
    const path = req.url.split('?')[0];
    this.onRequest?.(req.method, path, body && /json/.test(req.headers['content-type'] ?? '') ? JSON.parse(body.toString()) : undefined);
    res.on('error', () => {}); // a client that hung up
    try {
      const r = await fetch(this.target + req.url, { method: req.method, headers, body });
      let out = Buffer.from(await r.arrayBuffer());
      const h = {};
      for (const name of ['content-type', 'retry-after', 'location', 'idempotency-replayed']) {
        const v = r.headers.get(name);
        if (v !== null) h[name] = v;
      }
      const rewrite = this.rewrites.get(path);
      if (rewrite && r.ok) out = Buffer.from(JSON.stringify(rewrite(JSON.parse(out.toString()))));
      const hold = this.holdAnswer;
      if (hold && path === hold.path && r.ok && hold.pred(JSON.parse(out.toString()))) {
        this.holdAnswer = null;
        this.heldAnswer = () => res.writeHead(r.status, h).end(out);
        hold.onHeld();
        return;
      }
      res.writeHead(r.status, h).end(out);
    } catch (err) {
      res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err));
    }
  }
}
