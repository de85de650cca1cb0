// One side of the Go benchmarks in bench/peers/js_jobs_test.go: Graphile Worker or pg-boss, each in
// its mode that runs the jobs of one key one at a time, in order, on the PostgreSQL at PEER_DSN, in
// the schema PEER_SCHEMA (created here, dropped by the Go side).
//
// Environment:
//   PEER_SYSTEM   gw (Graphile Worker, its defaults), gwfast (its local queue and batched
//                 completion), pgboss (policy key_strict_fifo)
//   PEER_MODE     drain: insert PEER_N jobs over PEER_R keys (untimed), print "loaded", wait for
//                 "go" on stdin, drain them with PEER_C jobs at a time, print "drained".
//                 latency: start the workers, print "loaded", wait for "go", submit PEER_RATE
//                 jobs/s over PEER_R keys for PEER_SECONDS, wait for all to finish, print "drained".
//   PEER_OUT      file for one JSON line per job: {"k": key, "s": seq within key, "t": submitted
//                 (latency mode), "a": started, "b": ended}, times in ms on one clock
//                 (performance.timeOrigin + performance.now()).
// Job g (0-based, in submission order) has key g % R and seq floor(g / R).
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { setImmediate as tick } from "node:timers/promises";

const env = (name, dflt) => {
  const v = process.env[name] ?? dflt;
  if (v === undefined) {
    throw new Error(`${name} is required`);
  }
  return v;
};
const int = (name, dflt) => {
  const v = Number(env(name, dflt));
  if (!Number.isInteger(v) || v < 1) {
    throw new Error(`${name} must be a positive integer, got ${env(name, dflt)}`);
  }
  return v;
};

const system = env("PEER_SYSTEM");
const mode = env("PEER_MODE", "drain");
const dsn = env("PEER_DSN");
const schema = env("PEER_SCHEMA");
const R = int("PEER_R");
const C = int("PEER_C");
const out = env("PEER_OUT");
const N = mode === "drain" ? int("PEER_N") : int("PEER_RATE") * int("PEER_SECONDS");
const rate = mode === "latency" ? int("PEER_RATE") : 0;
if (!["gw", "gwfast", "pgboss"].includes(system)) {
  throw new Error(`PEER_SYSTEM must be gw, gwfast or pgboss, got ${system}`);
}
if (!["drain", "latency"].includes(mode)) {
  throw new Error(`PEER_MODE must be drain or latency, got ${mode}`);
}

const now = () => performance.timeOrigin + performance.now();
const keyOf = (g) => g % R;
const seqOf = (g) => Math.floor(g / R);

// Per-job records, indexed by g.
const submitted = new Float64Array(N);
const started = new Float64Array(N).fill(-1);
const ended = new Float64Array(N).fill(-1);
const runs = new Int32Array(N);
let finished = 0;
let allDone;
const allDonePromise = new Promise((resolve) => (allDone = resolve));

// The task: record its start, yield once to the event loop (so that two runs of one key at once
// would overlap in the records), record its end.
async function task(g) {
  started[g] = started[g] < 0 ? now() : started[g];
  runs[g]++;
  await tick();
  const first = ended[g] < 0;
  ended[g] = now();
  if (first && ++finished === N) {
    allDone();
  }
}

// Lines from stdin, kept until asked for (the Go side may write "go" before we wait for it).
const lines = createInterface({ input: process.stdin });
const pending = [];
let waiter;
lines.on("line", (l) => (waiter ? (waiter(l), (waiter = undefined)) : pending.push(l)));
lines.on("close", () => waiter?.("(stdin closed)"));
const nextLine = () => (pending.length ? Promise.resolve(pending.shift()) : new Promise((r) => (waiter = r)));
async function waitGo() {
  const l = (await nextLine()).trim();
  if (l !== "go") {
    throw new Error(`expected go on stdin, got ${l}`);
  }
}

function say(word) {
  process.stdout.write(word + "\n");
}

// ---- Graphile Worker ----
async function graphile() {
  const { makeWorkerUtils, run, Logger } = await import("graphile-worker");
  // Errors only: its default logger writes a line per job.
  const logger = new Logger(() => (level, message) => {
    if (level === "error") {
      process.stderr.write(`graphile-worker: ${message}\n`);
    }
  });
  const utils = await makeWorkerUtils({ connectionString: dsn, schema, logger });
  await utils.migrate();
  const spec = (g, extra) => ({ identifier: "noop", payload: { g, ...extra }, queueName: "r" + keyOf(g) });
  const add = async (from, to, extra) => {
    const specs = [];
    for (let g = from; g < to; g++) {
      specs.push(spec(g, extra));
    }
    await utils.addJobs(specs);
  };
  if (mode === "drain") {
    for (let g = 0; g < N; g += 5000) {
      await add(g, Math.min(N, g + 5000));
    }
  }
  const worker = { connectionString: dsn, schema, concurrentJobs: C };
  if (system === "gwfast") {
    worker.localQueue = { size: C + 1 };
    worker.completeJobBatchDelay = 0;
    worker.failJobBatchDelay = 0;
  }
  const start = () =>
    run({
      preset: { worker },
      noHandleSignals: true,
      taskList: { noop: (payload) => task(payload.g) },
      logger,
    });
  let runner;
  if (mode === "latency") {
    runner = await start();
    say("loaded");
    await waitGo();
    await submitLoop(async (from, to) => {
      await add(from, to);
    });
  } else {
    say("loaded");
    await waitGo();
    runner = await start();
  }
  await allDonePromise;
  await runner.stop(); // flushes batched completions
  await utils.release();
}

// ---- pg-boss ----
async function pgboss() {
  const { PgBoss } = await import("pg-boss");
  const boss = new PgBoss({ connectionString: dsn, schema, useListenNotify: true });
  boss.on("error", (e) => process.stderr.write(`pg-boss: ${e.message}\n`));
  await boss.start();
  await boss.createQueue("noop", { policy: "key_strict_fifo", notify: true });
  // A key's order is its jobs' created_on, then their (random) ids: jobs of one insert() call
  // share created_on, so two jobs of one key in one call would run in either order. Each call
  // holds at most one job per key (R consecutive jobs), in its own transaction.
  const add = async (from, to) => {
    for (let lo = from; lo < to; lo += R) {
      const jobs = [];
      for (let g = lo; g < Math.min(to, lo + R); g++) {
        jobs.push({ data: { g }, singletonKey: "r" + keyOf(g) });
      }
      await boss.insert("noop", jobs);
    }
  };
  if (mode === "drain") {
    await add(0, N);
  }
  // C jobs at a time: two pollers, each fetching up to C/2 keys' heads at once and fetching again
  // at once while its fetches come back full (burstWhenBatchFull), else every 0.5 s (the least
  // pollingIntervalSeconds allows) or when NOTIFY says a job came.
  const pollers = C >= 2 ? 2 : 1;
  const opts = {
    localConcurrency: pollers,
    batchSize: Math.floor(C / pollers),
    burstWhenBatchFull: true,
    pollingIntervalSeconds: 0.5,
  };
  const start = () => boss.work("noop", opts, (jobs) => Promise.all(jobs.map((j) => task(j.data.g))));
  if (mode === "latency") {
    await start();
    say("loaded");
    await waitGo();
    await submitLoop(add);
  } else {
    say("loaded");
    await waitGo();
    await start();
  }
  await allDonePromise;
  await boss.offWork("noop", { wait: true }); // the last completions are written
  await boss.stop({ graceful: false, close: true });
}

// submitLoop submits jobs at the offered rate for N jobs, in batches every 10 ms, recording each
// job's submission time just before its batch is sent.
async function submitLoop(add) {
  const t0 = now();
  let g = 0;
  while (g < N) {
    const due = Math.min(N, Math.floor(((now() - t0) / 1000) * rate));
    if (due > g) {
      const t = now();
      for (let i = g; i < due; i++) {
        submitted[i] = t;
      }
      await add(g, due);
      g = due;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function main() {
  if (system === "pgboss") {
    await pgboss();
  } else {
    await graphile();
  }
  say("drained");
  const rows = [];
  for (let g = 0; g < N; g++) {
    const r = { k: keyOf(g), s: seqOf(g), a: started[g], b: ended[g], n: runs[g] };
    if (mode === "latency") {
      r.t = submitted[g];
    }
    rows.push(JSON.stringify(r));
  }
  writeFileSync(out, rows.join("\n") + "\n");
  lines.close();
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`peer ${system}: ${e.stack ?? e}\n`);
  process.exit(1);
});
