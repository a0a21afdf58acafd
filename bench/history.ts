/**
 * Costs that should not grow with history: `npm run bench -- history [--json out.json]`.
 *
 * For logs of `JCP_BENCH_HISTORY_SIZES` receipts (comma-separated; default 100000,1000000,5000000)
 * a node is started (a child process, `jcp node start`, replay on two temporary workers) on the
 * log alone (a full replay; only for sizes up to `JCP_BENCH_HISTORY_FULL_MAX`, default 1,000,000,
 * since it takes minutes per million receipts here) and on the same log with a ledger snapshot
 * of its last receipt (node/snapshot.ts; the median of three starts on one copy). Figures per
 * size: `start seconds, <n> receipts[, snapshot]` (spawn to listening, what an operator waits)
 * and `RSS MB after start, <n> receipts[, snapshot]`. The ratio figures hold the largest size
 * against the smallest, with snapshots (goal ≤ 1.5×), and the largest fully replayed size
 * against the smallest without. Each size's snapshot is made once and kept beside its log
 * (`<log>-snapshot/`), the next size's continuing it, so every receipt is replayed for a
 * snapshot once, on two worker threads.
 *
 * Then the decision rate while a snapshot is written: a node on the smallest log with snapshots
 * off, and one whose first snapshot (of the whole log) starts one second after start, both
 * driven by the same closed-loop load (`bench/nodeload.ts`); the rate and p99 of each, and the
 * rate ratio, and the p99 with a snapshot against the p99 without (goal: no worse). Logs are built once per size and kept in the temp folder (the build seals every
 * receipt: minutes per million on two cores). Requests in the built logs are ten days old, so
 * the snapshot's request index (bounded by time) is empty, as on a node that has run for long.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Actor, encode, newActor, seededRng, type SignedGrant, signedGrantToCbor, signGrant, toHex } from '../core/index.ts';
import { makeSnapshot, ReceiptLog, readKeyFile, resourceIdOf, SNAPSHOT_DIR, WorkerPool } from '../node/index.ts';
import { type Figure, type SuiteOptions, sig } from './figures.ts';
import { sealedLog } from './node.ts';
import type { LoadResult, LoadSpec } from './nodeload.ts';

const repo = path.resolve(import.meta.dirname, '..');
/**
 * The clock skew the nodes here accept (seconds). The load signs all its requests before it sends
 * the first (so signing is not measured), each with the clock of that moment; with the default 30 s
 * the last of 20,000 requests on a loaded machine were older than that and refused `clock-skew`,
 * and the abuse limiter (node/ratelimit.ts) then refused the rest of the peer's requests
 * `rate-limited`: thousands of error replies, answered without a decision, counted as decisions/s.
 */
const MAX_SKEW_S = 600;
/** The request window of the nodes here (`max_skew_s` + margin 60). */
const WINDOW_S = MAX_SKEW_S + 60;

function sizes(): number[] {
  const v = process.env['JCP_BENCH_HISTORY_SIZES'] ?? '100000,1000000,5000000';
  const out = v.split(',').map((x) => Number(x.trim()));
  if (out.length === 0 || out.some((x) => !Number.isSafeInteger(x) || x < 1))
    throw new Error(`JCP_BENCH_HISTORY_SIZES: expected sizes like 100000,1000000, got ${v}`);
  return out.sort((a, b) => a - b);
}

function logDir(seed: number, n: number): string {
  return path.join(tmpdir(), `jcp-bench-history-log-${seed}-${n}`);
}

/**
 * A data folder holding `n` sealed receipts, at least ten days old (built once per seed and size):
 * the log of a smaller size in `sizes` that was built already is copied and extended, so the logs
 * of one run share their first receipts and each receipt is sealed once.
 */
function historyLog(seed: number, n: number, sizes: readonly number[]): Promise<string> {
  return sealedLog(logDir(seed, n), n, {
    rngLabel: `bench/history/log/${seed}`,
    t0S: Math.floor(Date.now() / 1000) - 10 * 86_400,
    requestKey: (seq) => ({ history: seed, seq }),
    grow: sizes.filter((m) => m < n).map((m) => logDir(seed, m)),
  });
}

/**
 * The folder keeping the snapshot of the built log of `n` receipts (its last receipt), beside the
 * log: made once per size, and the next larger log's snapshot continues it, so each receipt of
 * the run is replayed for a snapshot once (a real node snapshots as it goes; what the bench
 * measures is the start from one, not how long it took to make).
 */
function keptSnapshotDir(seed: number, n: number): string {
  return `${logDir(seed, n)}-snapshot`;
}

/** The snapshot files in `dir` (none when it does not exist). */
function snapshotFiles(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.cbor')) : [];
}

/**
 * Puts a snapshot of the copy's last receipt in `dir` (a copy of the built log of `n` receipts):
 * the kept one when there is one; else from the largest smaller size's kept snapshot (the logs
 * share their first receipts) plus the receipts after it, replayed on two worker threads, and
 * kept for the next run.
 */
async function snapshotInto(dir: string, seed: number, n: number, ns: readonly number[]): Promise<void> {
  const kept = keptSnapshotDir(seed, n);
  const into = path.join(dir, SNAPSHOT_DIR);
  mkdirSync(into, { recursive: true });
  const copyFrom = (from: string) => {
    for (const f of snapshotFiles(from)) cpSync(path.join(from, f), path.join(into, f));
  };
  if (snapshotFiles(kept).length > 0) return copyFrom(kept);
  const smaller = ns.filter((m) => m < n && snapshotFiles(keptSnapshotDir(seed, m)).length > 0).pop();
  if (smaller !== undefined) copyFrom(keptSnapshotDir(seed, smaller));
  const steward = readKeyFile(path.join(dir, 'steward.key'));
  const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: 0, mustExist: true });
  const pool = await WorkerPool.start(2);
  try {
    const made = await makeSnapshot(log, dir, {
      steward,
      nowS: Math.floor(Date.now() / 1000),
      windowS: WINDOW_S,
      keep: 1,
      runner: (job) => pool.replaySlice(job),
      parallel: 2,
    });
    if (made === undefined) throw new Error(`${dir}: no snapshot made`);
    process.stderr.write(`history: snapshot of ${n} receipts made (${made.replayed} replayed, ${sig(made.seconds)} s), kept in ${kept}\n`);
    mkdirSync(kept, { recursive: true });
    cpSync(made.file, path.join(kept, path.basename(made.file)));
  } finally {
    await pool.close();
    await log.close();
  }
}

/** A copy of `source`, the built log of `n` receipts (the kept log is never changed), with a snapshot of its last receipt when asked. */
async function copyOf(source: string, snapshot: { seed: number; n: number; ns: readonly number[] } | undefined): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'jcp-bench-history-'));
  cpSync(source, dir, { recursive: true });
  if (snapshot) await snapshotInto(dir, snapshot.seed, snapshot.n, snapshot.ns);
  return dir;
}

interface Started {
  readonly child: ChildProcess;
  readonly port: number;
  readonly seconds: number;
  /** The node's JSON log lines (stdout) so far. */
  readonly lines: () => Array<Record<string, unknown>>;
}

function configFile(dir: string, extra: Record<string, unknown>): string {
  const file = `${dir}.json`;
  writeFileSync(
    file,
    JSON.stringify({
      listen: '127.0.0.1:0',
      data_dir: dir,
      replay_workers: 2,
      max_skew_s: MAX_SKEW_S,
      request_index_margin_s: WINDOW_S - MAX_SKEW_S,
      log_level: 'warn',
      resources: [{ name: 'bench' }],
      meter: { default_estimate_uj: 1, rungs: ['estimator'] },
      snapshot: { every_receipts: 0, every_s: 0 },
      ...extra,
    }),
  );
  return file;
}

/** Starts `jcp node start`; resolves once it listens, with the seconds from spawn to then. */
function startNode(file: string): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [path.join(repo, 'bin/jcp.mjs'), 'node', 'start', '--config', file], { cwd: repo });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  let err = '';
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const p = /listening on [^\s:]+:(\d+)/.exec(err);
      if (p && err.includes('log replayed')) resolve({ child, port: Number(p[1]), seconds: (performance.now() - t0) / 1000, lines });
    });
    child.once('exit', (code) => reject(new Error(`jcp node start exited ${code}: ${err}`)));
  });
}

async function stopNode(n: Started): Promise<void> {
  if (n.child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    n.child.once('exit', () => resolve());
    n.child.kill('SIGINT');
    setTimeout(() => n.child.kill('SIGKILL'), 10_000).unref();
  });
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/**
 * Start seconds and RSS after start of a node on a copy of `source`: the medians of `starts`
 * starts on the same copy (one node at a time; a start changes nothing the next reads), since a
 * start of a few seconds is mostly process and module start-up, which the machine's load moves.
 */
async function startOn(
  source: string,
  snapshot: { seed: number; n: number; ns: readonly number[] } | undefined,
  starts: number,
): Promise<{ seconds: number; rssMb: number }> {
  const dir = await copyOf(source, snapshot);
  const file = configFile(dir, {});
  const seconds: number[] = [];
  const rss: number[] = [];
  try {
    for (let i = 0; i < starts; i++) {
      const node = await startNode(file);
      try {
        seconds.push(node.seconds);
        rss.push(rssMb(node.child.pid!));
      } finally {
        await stopNode(node);
      }
    }
    return { seconds: percentile(seconds, 50), rssMb: percentile(rss, 50) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(file, { force: true });
  }
}

/** Runs the load process (not synchronously: the node's log lines are read meanwhile, and its pipe never fills). */
function load(spec: LoadSpec): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'bench/nodeload.ts'), JSON.stringify(spec)], { cwd: repo });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      if (code !== 0) reject(new Error(`load process failed: ${err}`));
      else resolve(JSON.parse(out.trim().split('\n').pop()!) as LoadResult);
    });
  });
}

/** The `p`-th percentile of `xs` (nearest rank; 0 for none). */
function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/**
 * The longest pause in the decisions (ms): the largest gap between consecutive replies (`atMs`,
 * unix ms, sorted) of those gaps that overlap `[fromMs, toMs]` (all of them when no window).
 */
export function longestPause(atMs: readonly number[], window?: { fromMs: number; toMs: number }): number {
  let max = 0;
  for (let i = 1; i < atMs.length; i++) {
    const a = atMs[i - 1]!;
    const b = atMs[i]!;
    if (window && (b < window.fromMs || a > window.toMs)) continue;
    max = Math.max(max, b - a);
  }
  return max;
}

/** What a rate run measured besides the load's figures: the node's batch times and its snapshot, if one was written. */
interface RateRun extends LoadResult {
  /** When each reply was read (unix ms), in reply order. */
  readonly replyAtMs: number[];
  /** Seconds of every fsync'd batch of the log during the run (the node's `log batch durable` lines). */
  readonly batchS: number[];
  /** When the first snapshot was written (unix ms), if it was during the load. */
  readonly snapshot: { fromMs: number; toMs: number } | undefined;
}

/** Closed-loop load on a node over a copy of `source`; with `snapshotAfterS`, its first snapshot starts then. */
async function rateOn(
  source: string,
  agent: Actor,
  grant: SignedGrant,
  requests: number,
  snapshotAfterS: number | undefined,
): Promise<RateRun> {
  const dir = await copyOf(source, undefined);
  // Debug level, in both runs: the node logs each durable batch with its seconds.
  const file = configFile(dir, {
    log_level: 'debug',
    ...(snapshotAfterS === undefined ? {} : { snapshot: { every_receipts: 0, every_s: snapshotAfterS } }),
  });
  try {
    const node = await startNode(file);
    try {
      const r = await load({
        host: '127.0.0.1',
        port: node.port,
        grantHex: toHex(encode(signedGrantToCbor(grant))),
        agentSeedHex: toHex(agent.key.seed),
        action: 'call',
        connections: 8,
        requests,
        mode: 'closed',
        window: 16,
        tag: `history-${randomBytes(4).toString('hex')}`,
        nowS: Math.floor(Date.now() / 1000),
        timelineFile: `${dir}.replies.json`,
      });
      const replyAtMs = JSON.parse(readFileSync(`${dir}.replies.json`, 'utf8')) as number[];
      const lines = node.lines();
      const batchS = lines.filter((l) => l['msg'] === 'log batch durable').map((l) => Number(l['seconds']));
      const made = lines.find((l) => l['msg'] === 'snapshot written');
      const last = replyAtMs[replyAtMs.length - 1] ?? 0;
      const toMs = Number(made?.['time']);
      const snapshot = made !== undefined && toMs <= last ? { fromMs: toMs - Number(made['seconds']) * 1000, toMs } : undefined;
      return { ...r, replyAtMs, batchS, snapshot };
    } finally {
      await stopNode(node);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(file, { force: true });
    rmSync(`${dir}.replies.json`, { force: true });
  }
}

/** The suite: start time and memory by log size, with and without a snapshot; decisions while one is written. */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  const figures: Figure[] = [];
  const ns = sizes();
  const starts = new Map<string, { seconds: number; rssMb: number }>();
  // A full replay's start is linear in the log (minutes per million receipts here): sizes above
  // `JCP_BENCH_HISTORY_FULL_MAX` (default 1,000,000) start from a snapshot only.
  const fullMax = Number(process.env['JCP_BENCH_HISTORY_FULL_MAX'] ?? 1_000_000);
  for (const n of ns) {
    const log = await historyLog(seed, n, ns);
    for (const snap of [false, true]) {
      if (!snap && n > fullMax) {
        process.stderr.write(`history: no full replay of ${n} receipts (JCP_BENCH_HISTORY_FULL_MAX=${fullMax})\n`);
        continue;
      }
      const s = await startOn(log, snap ? { seed, n, ns } : undefined, snap ? 3 : 1);
      const tag = `${n} receipts${snap ? ', snapshot' : ''}`;
      starts.set(tag, s);
      figures.push({ name: `start seconds, ${tag}`, value: sig(s.seconds), unit: 's' });
      figures.push({ name: `RSS MB after start, ${tag}`, value: sig(s.rssMb), unit: 'MB' });
    }
  }
  if (ns.length > 1) figures.push(...growthFigures(ns, fullMax, starts));
  // Decisions while a snapshot of the whole smallest log is written (its replay on a temporary worker thread at nice 19).
  const rng = seededRng(`bench/history/agent/${seed}`);
  const issuer = newActor(rng);
  const agent = newActor(rng);
  const grant = signGrant(
    {
      issuer: issuer.did,
      subject: agent.did,
      capability: { resource: resourceIdOf('bench'), actions: ['call'] },
      budget_uj: 10n ** 15n,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
  const small = await historyLog(seed, ns[0]!, ns);
  const requests = Number(process.env['JCP_BENCH_HISTORY_REQUESTS'] ?? 20_000);
  const base = await rateOn(small, agent, grant, requests, undefined);
  const during = await rateOn(small, agent, grant, requests, 1);
  figures.push(...rateFigures(ns[0]!, requests, base, during));
  return figures;
}

/**
 * The ratios of the largest size's start seconds and RSS to the smallest's: from a snapshot (goal
 * ≤ 1.5×), and from a full replay between the smallest and the largest size that was replayed.
 */
function growthFigures(ns: readonly number[], fullMax: number, starts: ReadonlyMap<string, { seconds: number; rssMb: number }>): Figure[] {
  const figures: Figure[] = [];
  const lo = ns[0]!;
  for (const [what, key] of [
    ['start seconds', 'seconds'],
    ['RSS after start', 'rssMb'],
  ] as const) {
    for (const snap of [true, false]) {
      const hi = snap ? ns[ns.length - 1]! : ns.filter((n) => n <= fullMax).pop();
      if (hi === undefined || hi === lo) continue;
      const a = starts.get(`${lo} receipts${snap ? ', snapshot' : ''}`)![key];
      const b = starts.get(`${hi} receipts${snap ? ', snapshot' : ''}`)![key];
      const ratio = sig(b / a);
      figures.push({
        name: `${what}, ${hi} vs ${lo} receipts${snap ? ', snapshot' : ', full replay'} (×)`,
        value: ratio,
        unit: '×',
        ratio,
        ...(snap ? { goal: 'ratio ≤ 1.5', met: ratio <= 1.5 } : {}),
      });
    }
  }
  return figures;
}

/**
 * The figures of the two rate runs on the log of `n` receipts (`requests` each): the rates and
 * their ratio, the error replies (goal none), latencies, the fsync'd batch p99s, and the longest
 * pause during the snapshot against the batch p99 of the same run (goal: no longer).
 */
function rateFigures(n: number, requests: number, base: RateRun, during: RateRun): Figure[] {
  const figures: Figure[] = [];
  const snapped = during.snapshot !== undefined;
  const unfinished = snapped ? '' : ' (the snapshot had not finished when the load ended)';
  figures.push({ name: `decisions/s, closed loop, no snapshot (${n} receipts in the log)`, value: sig(base.perSecond), unit: '/s' });
  figures.push({
    name: `decisions/s, closed loop, while a snapshot of ${n} receipts is written${unfinished}`,
    value: sig(during.perSecond),
    unit: '/s',
  });
  figures.push({
    name: 'decisions/s while a snapshot is written (× no snapshot)',
    value: sig(during.perSecond / base.perSecond),
    unit: '×',
    ratio: sig(during.perSecond / base.perSecond),
  });
  // An error reply is answered without a decision: with any, the rates above count work not done.
  for (const [r, what] of [
    [base, 'no snapshot'],
    [during, 'while a snapshot is written'],
  ] as const) {
    figures.push({ name: `error replies of ${requests}, ${what}`, value: r.errors, unit: 'replies', goal: 'none', met: r.errors === 0 });
    for (const [code, k] of Object.entries(r.errorCodes))
      figures.push({ name: `error replies ${code}, ${what}`, value: k, unit: 'replies' });
  }
  figures.push({ name: 'p99 decision latency, no snapshot', value: sig(base.p99Us / 1000), unit: 'ms' });
  figures.push({ name: `p99 decision latency, while a snapshot is written${unfinished}`, value: sig(during.p99Us / 1000), unit: 'ms' });
  figures.push({ name: 'max decision latency, while a snapshot is written', value: sig(during.maxUs / 1000), unit: 'ms' });
  const batchP99 = percentile(during.batchS, 99) * 1000;
  figures.push({
    name: 'longest pause between decisions, no snapshot (whole load)',
    value: sig(longestPause(base.replyAtMs)),
    unit: 'ms',
  });
  figures.push({ name: "fsync'd batch p99, no snapshot", value: sig(percentile(base.batchS, 99) * 1000), unit: 'ms' });
  figures.push({ name: "fsync'd batch p99, run with the snapshot", value: sig(batchP99), unit: 'ms' });
  if (snapped) {
    figures.push({
      name: 'snapshot seconds, while decisions run',
      value: sig((during.snapshot!.toMs - during.snapshot!.fromMs) / 1000),
      unit: 's',
    });
  }
  // The goal: no pause longer than the fsync'd batch's p99 (same run) while a snapshot is written (docs/node.md "Snapshots").
  const pause = longestPause(during.replyAtMs, during.snapshot);
  figures.push({
    name: `longest pause between decisions while a snapshot is written${unfinished}`,
    value: sig(pause),
    unit: 'ms',
    floor: sig(batchP99),
    ratio: sig(pause / batchP99),
    goal: "pause ≤ the fsync'd batch p99 of the same run",
    met: snapped && pause <= batchP99,
  });
  return figures;
}
