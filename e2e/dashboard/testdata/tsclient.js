// The TypeScript client's browser test (tsclient_test.go): an async function of the test's
// parameters, evaluated in a page whose origin serves clients/typescript/src/ under /client/.
// It stops at checkpoints while it holds a lease, so that the test can look at the server; the
// test resumes it. It resolves with what it saw, which the test asserts.
async (p) => {
  // Checkpoints: the script reaches one (with what the test should find on the server) and
  // waits until the test resumes it.
  const points = new Map();
  const point = (name) => {
    if (!points.has(name)) {
      const pt = {};
      pt.reached = new Promise((resolve) => { pt.reach = resolve; });
      pt.resumed = new Promise((resolve) => { pt.resume = resolve; });
      points.set(name, pt);
    }
    return points.get(name);
  };
  window.batonTest = { reached: (name) => point(name).reached, resume: (name) => point(name).resume() };
  const checkpoint = async (name, info) => {
    point(name).reach(info);
    await point(name).resumed;
  };

  const { BatonClient, BatonError, LockHeldError, LeaseReleasedError } = await import('/client/index.js');
  const describe = (e) => ({
    name: e?.name ?? String(e),
    batonError: e instanceof BatonError,
    lockHeld: e instanceof LockHeldError,
    status: e?.status ?? -1,
    code: e?.code ?? '',
    holder: e?.holder ?? '',
    token: e?.token ?? 0,
    expiresAt: e?.expiresAt instanceof Date ? e.expiresAt.toISOString() : '',
    message: String(e?.message ?? e),
  });
  const warnings = [];
  const baton = new BatonClient({ baseUrl: p.baseUrl, onWarning: (msg, err) => warnings.push(`${msg} ${err ?? ''}`) });

  if (p.crossOrigin) {
    // A page of another origin, its client pointed at the server directly.
    const out = {};
    out.write = await baton.tryAcquire(p.heldKey, { ttlMs: 5000, holder: 'other-origin' })
      .then(async (l) => { const t = l.token; await l.release(); return { name: 'granted', token: t }; }, describe);
    out.read = await baton.getJob(p.jobId).then((j) => ({ name: 'read', status: 200, code: j.state }), describe);
    // What any page can send without asking the server first: a POST without a body, whose
    // answer the page never sees. Only the server's cross-origin check refuses it.
    out.blind = await fetch(`${p.baseUrl}/v1/jobs/${p.jobId}/cancel`, { method: 'POST', mode: 'no-cors' })
      .then((r) => ({ name: r.type, status: r.status }), describe);
    return out;
  }

  const out = {};

  // tryAcquire with keepalive, held past its first local deadline: only keepalive's renewals
  // keep the signal from aborting there, and the server from expiring the lease.
  const lease = await baton.tryAcquire(p.heldKey, { ttlMs: p.ttlMs, holder: p.holder });
  const firstDeadline = lease.deadline;
  const firstExpiry = lease.expires_at;
  out.lease = { key: lease.key, lease_id: lease.lease_id, holder: lease.holder, token: lease.token, expires_at: firstExpiry };
  await new Promise((resolve) => setTimeout(resolve, firstDeadline - performance.now() + 200));
  out.keptAlive = {
    aborted: lease.signal.aborted,
    deadlineMoved: lease.deadline > firstDeadline,
    expiryMoved: lease.expires_at !== firstExpiry,
  };

  // Another holder is refused, and told who holds the key.
  out.second = await baton.tryAcquire(p.heldKey, { ttlMs: p.ttlMs, holder: `${p.holder}-2` })
    .then(async (l) => { await l.release(); return { name: 'granted' }; }, describe);

  await checkpoint('held', out.lease);
  await lease.release();
  await lease.release(); // harmless again
  out.released = { aborted: lease.signal.aborted, reasonReleased: lease.signal.reason instanceof LeaseReleasedError };

  // withLock: the function runs under a live lease with the default holder, and its signal
  // aborts once withLock released.
  let fnSignal;
  out.withLock = await baton.withLock(p.withKey, async (signal, l) => {
    fnSignal = signal;
    const seen = { abortedAtStart: signal.aborted, key: l.key, lease_id: l.lease_id, holder: l.holder, token: l.token };
    await checkpoint('withLock', seen);
    seen.abortedAtEnd = signal.aborted;
    return seen;
  }, { ttlMs: p.ttlMs, waitMs: 10000 });
  out.withLock.abortedAfter = fnSignal.aborted;

  // Jobs: register the kind (a PUT), submit (and again with its idempotency key), then get.
  await baton.putKind(p.kind, { max_attempts: 2 });
  const req = { kind: p.kind, resource: p.resource, args: { from: 'browser' } };
  const first = await baton.submitJob(req, { idempotencyKey: p.idempotencyKey });
  const again = await baton.submitJob(req, { idempotencyKey: p.idempotencyKey });
  const got = await baton.getJob(first.job.id);
  out.job = {
    id: first.job.id,
    existing: first.existing,
    againId: again.job.id,
    againExisting: again.existing,
    got: { id: got.id, kind: got.kind, resource: got.resource, state: got.state, args: got.args },
  };
  out.warnings = warnings;
  return out;
}
