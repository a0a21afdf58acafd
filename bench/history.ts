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
 * receipt: minutes per million on two cores). Then an open loop at half the closed loop's rate,
 * for `JCP_BENCH_HISTORY_ROUNDS` rounds (default 3) of a run without snapshots and one writing
 * them as it goes (the worker at nice 19, the node's default; in SCHED_IDLE too with
 * `JCP_BENCH_HISTORY_SCHEDULING=idle`; built in a process of its own with
 * `JCP_BENCH_HISTORY_BUILDER=process`; paced with `JCP_BENCH_HISTORY_PAUSE_MS`, the node's
 * `snapshot.pause_ms`): the p99
 * and the longest pause with snapshots against without, goals ≤ 1.25× (medians of the rounds).
 * The open loop runs twice more, without snapshots, beside a process that only spins, at nice 19
 * and in the SCHED_IDLE class: what any background work of that kind costs the p99 on this
 * machine. The node's threads are sampled in every rate run (bench/threads.ts), so the runs a
 * ratio compares carry the same sampling; from the open-loop runs with snapshots come the CPU of
 * its main thread, of its other threads at its own priority (V8's helper threads, libuv's pool,
 * the signature workers) and of the nice-19 worker, while snapshots are written against the rest
 * of the run. `JCP_BENCH_HISTORY_OPEN_ONLY=1` with `JCP_BENCH_HISTORY_OPEN_RATE` runs only the
 * open-loop rounds, at that rate; `JCP_BENCH_HISTORY_NODE_ARGS` adds Node or V8 flags to every
 * node; `JCP_BENCH_HISTORY_WORKERS` sets every node's `workers` (the caller's signature checked on
 * that many worker threads; default 0, the main thread); `JCP_BENCH_HISTORY_TIMELINES=<folder>` keeps each rate run's timeline there. Requests in the built logs are ten days old, so
 * the snapshot's request index (bounded by time) is empty, as on a node that has run for long.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Actor, encode, newActor, seededRng, type SignedGrant, signedGrantToCbor, toHex } from '../core/index.ts';
import {
  type MadeSnapshot,
  makeSnapshot,
  makeSnapshotOffThread,
  ReceiptLog,
  readKeyFile,
  SNAPSHOT_DIR,
  SNAPSHOT_WORKER_NICE,
  WorkerPool,
} from '../node/index.ts';
import { type Figure, median, percentile as nearestRank, type SuiteOptions, sig } from './figures.ts';
import { readBuild, rootGrant, sealedLog } from './node.ts';
import type { LoadResult, LoadSpec } from './nodeload.ts';
import { type Split, type Stretch, splitByStretches } from './split.ts';
import { ratesInAndOut, sampleThreads, type ThreadInterval } from './threads.ts';

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

/**
 * Node or V8 flags for every node the suite starts (`JCP_BENCH_HISTORY_NODE_ARGS`, space-separated,
 * e.g. `--single-threaded-gc`): to see which of V8's background work a figure moves with.
 */
const NODE_ARGS = (process.env['JCP_BENCH_HISTORY_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');

/** Starts `jcp node start`; resolves once it listens, with the seconds from spawn to then. */
function startNode(file: string): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...NODE_ARGS, path.join(repo, 'bin/jcp.mjs'), 'node', 'start', '--config', file], { cwd: repo });
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
  return xs.length === 0 ? 0 : nearestRank(xs, p);
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

/**
 * A process beside the node that only spins at nice 19 (no memory, no I/O, nothing of the
 * node's): for the whole load (`nice`, or `idle` in the SCHED_IDLE class), or only over the given
 * stretches (ms from the load's start), sleeping between them.
 */
type Burner = 'nice' | 'idle' | { readonly stretchesMs: ReadonlyArray<readonly [number, number]> };

/**
 * The spinner over stretches: argv[1] holds [fromMs, toMs] pairs, offsets from the "go" line on
 * stdin (sent, once it printed "ready", as the load starts); it spins through each, prints the
 * pair it spun (unix ms), and sleeps until the next.
 */
const STRETCH_SPINNER = `
const w = JSON.parse(process.argv[1]);
process.stdout.write('ready\\n');
process.stdin.once('data', () => {
  const t0 = Date.now();
  let i = 0;
  const step = () => {
    if (i === w.length) return process.exit(0);
    const [a, b] = w[i];
    const now = Date.now() - t0;
    if (now < a) return void setTimeout(step, a - now);
    const from = Date.now();
    while (Date.now() - t0 < b);
    process.stdout.write(JSON.stringify([from, Date.now()]) + '\\n');
    i++;
    setImmediate(step);
  };
  step();
});`;

/**
 * Starts a {@link Burner}: `go()` resolves once it runs (the spinner over stretches has started
 * and been told to go: its clock starts then), `spun()` gives the stretches it spun (unix ms).
 * @throws Error from `go()` when the spinner over stretches does not start within 10 s.
 */
function startBurner(burner: Burner): { child: ChildProcess; go(): Promise<void>; spun(): Array<{ fromMs: number; toMs: number }> } {
  // Spinning for the whole load at nice 19, or in the SCHED_IDLE class (chrt --idle: it runs only on a core nothing else wants).
  const spinner = [process.execPath, '-e', 'for (;;);'];
  const child =
    burner === 'nice'
      ? spawn('nice', ['-n', '19', ...spinner], { stdio: 'ignore' })
      : burner === 'idle'
        ? spawn('chrt', ['--idle', '0', ...spinner], { stdio: 'ignore' })
        : spawn('nice', ['-n', '19', process.execPath, '-e', STRETCH_SPINNER, JSON.stringify(burner.stretchesMs)], {
            stdio: ['pipe', 'pipe', 'ignore'],
          });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return {
    child,
    async go() {
      if (child.stdin === null) return;
      for (let waitedMs = 0; !out.includes('ready'); waitedMs += 5) {
        if (waitedMs > 10_000) throw new Error('history: the spinner over stretches did not start');
        await new Promise((r) => setTimeout(r, 5));
      }
      child.stdin.write('go\n');
    },
    // One JSON pair a line, as each stretch ended.
    spun: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('['))
        .map((l) => JSON.parse(l) as [number, number])
        .map(([fromMs, toMs]) => ({ fromMs, toMs })),
  };
}

/** What a rate run measured besides the load's figures: the node's batch times and its snapshot, if one was written. */
interface RateRun extends LoadResult {
  /** When the load process was started (unix ms). */
  readonly loadAtMs: number;
  /** CPU time the hypervisor gave other guests during the load, all cores together (ms per s; /proc/stat `steal`; NaN where unreadable). */
  readonly stealMsPerS: number;
  /** The stretches a spinner over stretches spun (unix ms); empty otherwise. */
  readonly spunMs: ReadonlyArray<{ fromMs: number; toMs: number }>;
  /** When each reply was read (unix ms), in reply order. */
  readonly replyAtMs: number[];
  /** Each reply's latency (µs), in the same order. */
  readonly latencyUs: number[];
  /** The node's threads' CPU by class during the load, every 100 ms (bench/threads.ts). */
  readonly threads: ThreadInterval[];
  /** Seconds of every fsync'd batch of the log during the run (the node's `log batch durable` lines). */
  readonly batchS: number[];
  /** When each of those batches was durable (unix ms; its line's time), in the same order. */
  readonly batchAtMs: number[];
  /** When the first snapshot was written (unix ms), if it was during the load. */
  readonly snapshot: { fromMs: number; toMs: number } | undefined;
  /** Every snapshot finished during the load (unix ms), with the request ids and receipts it held and replayed. */
  readonly snapshots: Array<{
    fromMs: number;
    toMs: number;
    requests: number;
    replayed: number;
    scheduling: string;
    builder: string;
    pauseMs: number;
    cpuS: number;
    base: string;
  }>;
}

/**
 * The load of a rate run: closed loop (16 outstanding per connection: the node's peak) or open
 * loop at `rate` requests/s over the 8 connections (a sustained load that leaves the node idle
 * time, as a serving node has).
 */
type RateLoad =
  | { readonly mode: 'closed'; readonly requests: number }
  | { readonly mode: 'open'; readonly requests: number; readonly rate: number };

/** The snapshot worker's `snapshot.scheduling` in the runs with snapshots (`JCP_BENCH_HISTORY_SCHEDULING`: nice, the node's default, or idle). */
const SCHEDULING = process.env['JCP_BENCH_HISTORY_SCHEDULING'] ?? 'nice';
/** The node's `snapshot.builder` in the runs with snapshots (`JCP_BENCH_HISTORY_BUILDER`: thread, the node's default, or process). */
const BUILDER = process.env['JCP_BENCH_HISTORY_BUILDER'] ?? 'thread';
/** The node's `snapshot.pause_ms` in the runs with snapshots (`JCP_BENCH_HISTORY_PAUSE_MS`; default 0, the node's). */
const PAUSE_MS = Number(process.env['JCP_BENCH_HISTORY_PAUSE_MS'] ?? 0);
/**
 * The nodes' `workers` (signature-check worker threads) in every rate run, with snapshots or not
 * (`JCP_BENCH_HISTORY_WORKERS`; default 0, the node's: the caller's signature checked on the main thread).
 */
const WORKERS = Number(process.env['JCP_BENCH_HISTORY_WORKERS'] ?? 0);

/** CPU time stolen from this machine by its hypervisor so far, all cores (ms; /proc/stat's `steal` at 100 ticks/s); NaN where unreadable. */
function stolenMs(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
    return Number(cpu[8]) * 10;
  } catch {
    return Number.NaN;
  }
}

/** A rate run's fsync'd batches and the snapshots finished by `lastReplyMs`, from the node's log lines. */
function fromNodeLines(
  lines: ReadonlyArray<Record<string, unknown>>,
  lastReplyMs: number,
): Pick<RateRun, 'batchS' | 'batchAtMs' | 'snapshots'> {
  const batches = lines.filter((l) => l['msg'] === 'log batch durable');
  const snapshots = lines
    .filter((l) => l['msg'] === 'snapshot written' && Number(l['time']) <= lastReplyMs)
    .map((l) => ({
      fromMs: Number(l['time']) - Number(l['seconds']) * 1000,
      toMs: Number(l['time']),
      requests: Number(l['requests']),
      replayed: Number(l['replayed']),
      scheduling: String(l['scheduling']),
      builder: String(l['builder']),
      // `snapshot.pause_ms` as the node logged it (absent: 0).
      pauseMs: Number(l['pause_ms'] ?? 0),
      // The worker thread's CPU seconds for it (absent from a node before the field: NaN).
      cpuS: Number(l['cpu_s']),
      base: String(l['base']),
    }));
  return { batchS: batches.map((l) => Number(l['seconds'])), batchAtMs: batches.map((l) => Number(l['time'])), snapshots };
}

/**
 * A folder to keep each rate run's timeline in (`JCP_BENCH_HISTORY_TIMELINES`), for reading a run
 * decision by decision: `<load start, unix ms>-<none|snapshots|spinner>.json` with `replyAtMs`,
 * `latencyUs` (µs), `batchAtMs` and `batchS` (s) of the fsync'd batches, `snapshots`, `spunMs`,
 * and the node's log lines whose message starts with `snapshot`. Unset: nothing kept.
 */
const TIMELINES = process.env['JCP_BENCH_HISTORY_TIMELINES'] || undefined;

/** A load on a node over a copy of `source`; with `snapshotAfterS`, its first snapshot starts then. */
async function rateOn(
  source: string,
  agent: Actor,
  grant: SignedGrant,
  shape: RateLoad,
  snapshot:
    | { readonly afterS: number }
    | { readonly everyReceipts: number; readonly from: { seed: number; n: number; ns: readonly number[] } }
    | undefined,
  burner?: Burner,
): Promise<RateRun> {
  // With `everyReceipts`, the node starts from the kept snapshot of the log (as a node that snapshots as it goes) and writes one every so many receipts.
  const dir = await copyOf(source, snapshot !== undefined && 'from' in snapshot ? snapshot.from : undefined);
  // Debug level, in both runs: the node logs each durable batch with its seconds.
  const file = configFile(dir, {
    log_level: 'debug',
    ...(WORKERS > 0 ? { workers: WORKERS } : {}),
    ...(snapshot === undefined
      ? {}
      : {
          snapshot: {
            ...('afterS' in snapshot
              ? { every_receipts: 0, every_s: snapshot.afterS }
              : { every_receipts: snapshot.everyReceipts, every_s: 0 }),
            scheduling: SCHEDULING,
            builder: BUILDER,
            pause_ms: PAUSE_MS,
          },
        }),
  });
  try {
    const node = await startNode(file);
    const spin = burner === undefined ? undefined : startBurner(burner);
    const sampler = sampleThreads(node.child.pid!);
    try {
      await spin?.go();
      const loadAtMs = Date.now();
      const stolenAt = stolenMs();
      const r = await load({
        host: '127.0.0.1',
        port: node.port,
        grantHex: toHex(encode(signedGrantToCbor(grant))),
        agentSeedHex: toHex(agent.key.seed),
        action: 'call',
        connections: 8,
        requests: shape.requests,
        ...(shape.mode === 'closed' ? { mode: 'closed', window: 16 } : { mode: 'open', rate: shape.rate }),
        tag: `history-${randomBytes(4).toString('hex')}`,
        nowS: Math.floor(Date.now() / 1000),
        timelineFile: `${dir}.replies.json`,
        latencyFile: `${dir}.latency.json`,
      });
      const threads = sampler.stop();
      const stealMsPerS = ((stolenMs() - stolenAt) / (Date.now() - loadAtMs)) * 1000;
      const replyAtMs = JSON.parse(readFileSync(`${dir}.replies.json`, 'utf8')) as number[];
      const latencyUs = JSON.parse(readFileSync(`${dir}.latency.json`, 'utf8')) as number[];
      const lines = node.lines();
      const { batchS, batchAtMs, snapshots } = fromNodeLines(lines, replyAtMs[replyAtMs.length - 1] ?? 0);
      const first = snapshots[0];
      const spunMs = spin?.spun() ?? [];
      if (TIMELINES !== undefined) {
        const kind = snapshot !== undefined ? 'snapshots' : burner !== undefined ? 'spinner' : 'none';
        const snapshotLines = lines.filter((l) => String(l['msg']).startsWith('snapshot'));
        mkdirSync(TIMELINES, { recursive: true });
        const timeline = { replyAtMs, latencyUs, batchAtMs, batchS, snapshots, spunMs, snapshotLines };
        writeFileSync(path.join(TIMELINES, `${loadAtMs}-${kind}.json`), JSON.stringify(timeline));
      }
      return {
        ...r,
        replyAtMs,
        latencyUs,
        batchS,
        batchAtMs,
        snapshot: first && { fromMs: first.fromMs, toMs: first.toMs },
        snapshots,
        loadAtMs,
        stealMsPerS,
        spunMs,
        threads,
      };
    } finally {
      sampler.stop();
      spin?.child.kill('SIGKILL');
      await stopNode(node);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(file, { force: true });
    rmSync(`${dir}.replies.json`, { force: true });
    rmSync(`${dir}.latency.json`, { force: true });
  }
}

/**
 * Only the open-loop rounds and their figures (`JCP_BENCH_HISTORY_OPEN_ONLY=1`, with
 * `JCP_BENCH_HISTORY_OPEN_RATE`): no start figures, closed loop, spinners beside the whole load or
 * stall probe. For comparing one setting with another at the same rate.
 */
const OPEN_ONLY = process.env['JCP_BENCH_HISTORY_OPEN_ONLY'] === '1';
/** The open loop's rate (decisions/s, rounded; `JCP_BENCH_HISTORY_OPEN_RATE`); unset or 0: half the closed loop's. */
const OPEN_RATE = Math.round(Number(process.env['JCP_BENCH_HISTORY_OPEN_RATE'] ?? 0));

/** The suite: start time and memory by log size, with and without a snapshot; decisions while one is written. */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  if (OPEN_ONLY && !(OPEN_RATE > 0))
    throw new Error('history: JCP_BENCH_HISTORY_OPEN_ONLY=1 needs JCP_BENCH_HISTORY_OPEN_RATE (decisions/s)');
  const ns = sizes();
  const figures: Figure[] = OPEN_ONLY ? [] : await startFigures(seed, ns);
  // Decisions while a snapshot of the whole smallest log is written (its replay on a temporary worker thread at nice 19).
  const rng = seededRng(`bench/history/agent/${seed}`);
  const issuer = newActor(rng);
  const agent = newActor(rng);
  const grant = rootGrant(issuer, agent, 'bench', ['call'], rng);
  const small = await historyLog(seed, ns[0]!, ns);
  let rate = OPEN_RATE;
  if (!OPEN_ONLY) {
    const requests = Number(process.env['JCP_BENCH_HISTORY_REQUESTS'] ?? 20_000);
    const base = await rateOn(small, agent, grant, { mode: 'closed', requests }, undefined);
    const during = await rateOn(small, agent, grant, { mode: 'closed', requests }, { afterS: 1 });
    figures.push(...rateFigures(ns[0]!, requests, base, during));
    if (!(rate > 0)) rate = Math.max(1, Math.round(base.perSecond / 2));
  }
  // A closed loop keeps both cores busy, so the nice-19 snapshot hardly runs until the load ends.
  // The sustained case: an open loop at half the closed loop's rate for JCP_BENCH_HISTORY_OPEN_S
  // (default 30 s), on a node that started from a snapshot of the log and writes one every
  // `rate × 4` receipts (each holding every request id of the load so far: all are in the window).
  const openS = Number(process.env['JCP_BENCH_HISTORY_OPEN_S'] ?? 30);
  const open = { mode: 'open', requests: Math.round(rate * openS), rate } as const;
  const from = { seed, n: ns[0]!, ns };
  // Runs without and with snapshots alternate for JCP_BENCH_HISTORY_ROUNDS rounds (default 3): a
  // stall of this VM's disk or CPU in one run moves one round's ratios, not the medians.
  const rounds = Math.max(1, Number(process.env['JCP_BENCH_HISTORY_ROUNDS'] ?? 3));
  const pairs: OpenPair[] = [];
  for (let i = 0; i < rounds; i++) {
    const without = await rateOn(small, agent, grant, open, undefined);
    const during = await rateOn(small, agent, grant, open, { everyReceipts: rate * 4, from });
    // The floor of the goals: no snapshot, a nice-19 spinner over the stretches the snapshots took.
    const stretchesMs = during.snapshots.map((x) => [x.fromMs - during.loadAtMs, x.toMs - during.loadAtMs] as const);
    pairs.push({ base: without, during, mimic: await rateOn(small, agent, grant, open, undefined, { stretchesMs }) });
  }
  figures.push(...openFigures(open, pairs), ...splitFigures(open, pairs), ...threadFigures(open, pairs));
  if (OPEN_ONLY) return figures;
  const baseP99Us = median(pairs.map((p) => p.base.p99Us));
  // What any background work at nice 19 costs the p99 on this machine: the same open loop, no
  // snapshots, with a process at nice 19 that only spins (no memory, no I/O, nothing of the node's).
  for (const [policy, what] of [
    ['nice', 'a nice-19 spinning process'],
    ['idle', 'a SCHED_IDLE spinning process'],
  ] as const) {
    const spun = await rateOn(small, agent, grant, open, undefined, policy);
    figures.push({
      name: `p99 decision latency, open loop at ${open.rate}/s, no snapshot, ${what} beside it (× the p99 without)`,
      value: sig(spun.p99Us / baseP99Us),
      unit: '×',
      floor: sig(baseP99Us / 1000),
      ratio: sig(spun.p99Us / baseP99Us),
    });
  }
  figures.push(...(await stallFigures(small, ns[0]!)));
  return figures;
}

/** Start seconds and RSS by log size, from the log alone and from a snapshot, and their growth. */
async function startFigures(seed: number, ns: readonly number[]): Promise<Figure[]> {
  const figures: Figure[] = [];
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

/** Milliseconds at the start of a load left out of the open-loop pause windows (connections, first batches, JIT). */
const WARM_MS = 1000;

/** When a run's warm-up ends (unix ms): {@link WARM_MS} after its first reply. */
const warmEnd = (r: RateRun): number => (r.replyAtMs[0] ?? 0) + WARM_MS;

/** One round of the open loop: a run without snapshots and one with them, same rate and requests. */
interface OpenPair {
  readonly base: RateRun;
  readonly during: RateRun;
  /** No snapshot, a nice-19 spinner over the stretches `during`'s snapshots took (same offsets from the load's start). */
  readonly mimic: RateRun;
}

/**
 * One round's snapshot figures: the stretches of the run with snapshots while one was written
 * (from {@link WARM_MS} after the load's first reply), the longest pause between decisions in
 * them, the longest in the same stretches of the run without (same offsets from the end of its
 * warm-up), and the fsync'd batch p99 of the run with them. Undefined when no snapshot was
 * written during the load.
 */
function pairPauses(
  { base, during }: Pick<OpenPair, 'base' | 'during'>,
  stretches: ReadonlyArray<{ fromMs: number; toMs: number }> = during.snapshots,
): { seconds: number; pause: number; floor: number; batchP99: number } | undefined {
  const windows = stretches.map((x) => ({ fromMs: Math.max(x.fromMs, warmEnd(during)), toMs: x.toMs })).filter((w) => w.toMs > w.fromMs);
  if (windows.length === 0) return undefined;
  const shift = warmEnd(base) - warmEnd(during);
  return {
    seconds: windows.reduce((t, w) => t + w.toMs - w.fromMs, 0) / 1000,
    pause: Math.max(...windows.map((w) => longestPause(during.replyAtMs, w))),
    floor: Math.max(...windows.map((w) => longestPause(base.replyAtMs, { fromMs: w.fromMs + shift, toMs: w.toMs + shift }))),
    batchP99: percentile(during.batchS, 99) * 1000,
  };
}

/**
 * The figures of the open-loop rounds (each a run without snapshots and one with them, same rate
 * and requests; every figure the median over the rounds): rates and errors (errors summed), p99
 * latencies and fsync'd batch p99s; the snapshots written during the loads (count, how many in
 * the SCHED_IDLE class, seconds, the request ids the last one held); and the longest pause
 * between decisions while any of them was written against the batch p99 of the same run, and
 * against the same stretches of the run without snapshots (goal ≤ 1.25×), and the p99 with
 * snapshots against the p99 without (goal ≤ 1.25×); each goal ratio also per round.
 */
function openFigures(load: RateLoad & { mode: 'open' }, pairs: readonly OpenPair[]): Figure[] {
  const figures: Figure[] = [];
  const at = `open loop at ${load.rate}/s`;
  const med = (f: (p: OpenPair) => number) => median(pairs.map(f));
  for (const [run, what] of [
    [(p: OpenPair) => p.base, 'no snapshot'],
    [(p: OpenPair) => p.during, 'snapshots written'],
  ] as const) {
    const errors = pairs.reduce((t, p) => t + run(p).errors, 0);
    figures.push({ name: `decisions/s, ${at}, ${what}`, value: sig(med((p) => run(p).perSecond)), unit: '/s' });
    figures.push({
      name: `error replies of ${load.requests}, ${at}, ${what}`,
      value: errors,
      unit: 'replies',
      goal: 'none',
      met: errors === 0,
    });
    figures.push({ name: `p99 decision latency, ${at}, ${what}`, value: sig(med((p) => run(p).p99Us) / 1000), unit: 'ms' });
    figures.push({ name: `fsync'd batch p99, ${at}, ${what}`, value: sig(med((p) => percentile(run(p).batchS, 99)) * 1000), unit: 'ms' });
  }
  const snaps = pairs.flatMap((p) => p.during.snapshots);
  const rounds = pairs.map((p) => pairPauses(p));
  const counted = rounds.filter((r) => r !== undefined);
  figures.push({
    name: `snapshots written during the load, ${at}`,
    value: snaps.length,
    unit: 'snapshots',
    goal: 'at least one each round',
    met: counted.length === pairs.length,
  });
  for (const [what, how] of [
    [`written in the SCHED_IDLE class, ${at}`, (x: RateRun['snapshots'][number]) => x.scheduling === 'idle'],
    [`built in a process of their own, ${at}`, (x: RateRun['snapshots'][number]) => x.builder === 'process'],
    [`paced by snapshot.pause_ms, ${at} (the pause: ${PAUSE_MS} ms)`, (x: RateRun['snapshots'][number]) => x.pauseMs > 0],
  ] as const)
    figures.push({
      name: `snapshots ${what}`,
      value: snaps.filter(how).length,
      unit: 'snapshots',
    });
  if (counted.length === 0) return figures;
  figures.push({ name: `request ids in the last snapshot written, ${at}`, value: snaps[snaps.length - 1]!.requests, unit: 'ids' });
  // What each snapshot costs the cores: its worker thread's CPU (node/snapshotjob.ts), per 10,000 receipts it replayed.
  const timed = snaps.filter((x) => Number.isFinite(x.cpuS) && x.replayed > 0);
  if (timed.length > 0) {
    figures.push({
      name: `snapshot worker CPU seconds per 10,000 receipts replayed, ${at} (median of ${timed.length} snapshots)`,
      value: sig(median(timed.map((x) => (x.cpuS / x.replayed) * 10_000))),
      unit: 's',
    });
    figures.push({
      name: `snapshots that continued the state their worker kept, ${at}`,
      value: snaps.filter((x) => x.base === 'kept').length,
      unit: 'snapshots',
    });
  }
  figures.push({
    name: `seconds of the load while snapshots were written, ${at}`,
    value: sig(median(counted.map((r) => r.seconds))),
    unit: 's',
  });
  const floor = median(counted.map((r) => r.floor));
  figures.push({ name: `longest pause between decisions, ${at}, no snapshot (same stretches of the load)`, value: sig(floor), unit: 'ms' });
  const pause = median(counted.map((r) => r.pause));
  const batchP99 = median(counted.map((r) => r.batchP99));
  // Read against the fsync'd batch p99 of the same run (the goal before the ≤ 1.25× ones below; kept as a figure).
  figures.push({
    name: `longest pause between decisions while snapshots are written, ${at}`,
    value: sig(pause),
    unit: 'ms',
    floor: sig(batchP99),
    ratio: sig(pause / batchP99),
  });
  // The goals: the pause and the p99 against the runs without snapshots, ≤ 1.25× each (medians of the rounds' ratios).
  const goals = [
    ['longest pause while snapshots are written (× the same stretches without)', counted.map((r) => r.pause / r.floor), floor],
    [
      'p99 decision latency while snapshots are written (× the p99 without)',
      pairs.map((p) => p.during.p99Us / p.base.p99Us),
      med((p) => p.base.p99Us) / 1000,
    ],
  ] as const;
  for (const [what, ratios, of] of goals) {
    const ratio = median(ratios);
    figures.push({
      name: `${what}, ${at}`,
      value: sig(ratio),
      unit: '×',
      floor: sig(of),
      ratio: sig(ratio),
      goal: 'ratio ≤ 1.25',
      met: ratio <= 1.25,
    });
    for (const [i, r] of ratios.entries()) {
      figures.push({ name: `${what}, ${at}, round ${i + 1} of ${ratios.length}`, value: sig(r), unit: '×', ratio: sig(r) });
    }
  }
  figures.push(...mimicFigures(at, pairs, rounds));
  return figures;
}

/**
 * The floor of the two goals: the same ratios for a run with no snapshot and a process at nice 19
 * that only spins over the stretches the snapshots of the same round took (what any work of that
 * length beside the decisions costs them on this machine, with nothing of the node's), and the
 * snapshots' ratios over it (their cost beyond that; `own`: each round's {@link pairPauses}).
 * Medians of the rounds, each also per round.
 */
function mimicFigures(at: string, pairs: readonly OpenPair[], own: ReadonlyArray<ReturnType<typeof pairPauses>>): Figure[] {
  const rounds = pairs.flatMap((p, i) => {
    const m = p.mimic;
    const pauses = pairPauses({ base: p.base, during: m }, m.spunMs);
    const snapshots = own[i];
    if (pauses === undefined || snapshots === undefined) return [];
    return [
      {
        p99: m.p99Us / p.base.p99Us,
        pause: pauses.pause / pauses.floor,
        overP99: p.during.p99Us / m.p99Us,
        overPause: snapshots.pause / pauses.pause,
      },
    ];
  });
  if (rounds.length === 0) return [];
  const figures: Figure[] = [];
  const spinner = 'no snapshot, a nice-19 process spinning over the stretches the snapshots took';
  for (const [what, key] of [
    [`p99 decision latency, ${at}, ${spinner} (× the p99 without)`, 'p99'],
    [`longest pause, ${at}, ${spinner} (× the same stretches without)`, 'pause'],
    [`p99 decision latency while snapshots are written (× the p99 with the spinner over the same stretches), ${at}`, 'overP99'],
    [`longest pause while snapshots are written (× the spinner's over the same stretches), ${at}`, 'overPause'],
  ] as const) {
    const ratios = rounds.map((r) => r[key]);
    figures.push({ name: what, value: sig(median(ratios)), unit: '×', ratio: sig(median(ratios)) });
    for (const [i, r] of ratios.entries())
      figures.push({ name: `${what}, round ${i + 1} of ${ratios.length}`, value: sig(r), unit: '×', ratio: sig(r) });
  }
  return figures;
}

/**
 * The p99 goal read with less noise (bench/split.ts): the latencies of every round pooled, and the
 * decisions of each run split by whether they were in flight while a snapshot was written.
 * - Pooled: the p99 of every decision of the runs with snapshots ÷ that of the runs without.
 * - Split: in the runs with snapshots, the p99 of the decisions in flight during a snapshot ÷ the
 *   p99 of the rest of the same run (after its warm-up), rounds pooled; each round's ratio too.
 *   The rest includes what follows a snapshot (its garbage collected later), so the split can
 *   understate the cost; the pooled ratio does not.
 * - The split's null: the runs without snapshots split by the same stretches (same offsets from
 *   the warm-up's end), and the runs with the nice-19 spinner by the stretches it spun. A split of
 *   a run with nothing in its stretches reads near 1× pooled; one round's split moves about as
 *   much as the run-against-run ratio (0.7–2.8× in a simulation of 40 runs), so read the pooled
 *   rows, and the null beside them.
 * - The fsync'd batches of the same runs split by the same stretches, and their null: whether a
 *   snapshot's cost reaches the disk the log is made durable on.
 * The two goal readings say `ratio ≤ 1.25`, as the medians of the rounds in {@link openFigures}
 * do; a split no round could make reads as not met.
 */
function splitFigures(load: RateLoad & { mode: 'open' }, pairs: readonly OpenPair[]): Figure[] {
  const at = `open loop at ${load.rate}/s`;
  const figures: Figure[] = [];
  const p99 = (xs: readonly number[]) => nearestRank(xs, 99) / 1000;
  const pooledWithout = p99(pairs.flatMap((p) => p.base.latencyUs));
  const pooledWith = p99(pairs.flatMap((p) => p.during.latencyUs));
  figures.push({
    name: `p99 decision latency of the runs with snapshots (× the runs without), ${at}, the ${pairs.length} rounds' decisions pooled`,
    value: sig(pooledWith / pooledWithout),
    unit: '×',
    floor: sig(pooledWithout),
    ratio: sig(pooledWith / pooledWithout),
    goal: 'ratio ≤ 1.25',
    met: pooledWith / pooledWithout <= 1.25,
  });
  const split = (r: RateRun, stretches: readonly Stretch[]): Split => splitByStretches(r.replyAtMs, r.latencyUs, stretches, warmEnd(r));
  // The run with snapshots' stretches at the same offsets from the warm-up's end of run `r`.
  const moved = (p: OpenPair, r: RateRun): Stretch[] => {
    const shift = warmEnd(r) - warmEnd(p.during);
    return p.during.snapshots.map((x) => ({ fromMs: x.fromMs + shift, toMs: x.toMs + shift }));
  };
  // The fsync'd batches split the same way (a batch's stretch: its seconds before its line's time): the disk's side of the cost.
  const batches = (r: RateRun, stretches: readonly Stretch[]): Split =>
    splitByStretches(
      r.batchAtMs,
      r.batchS.map((s) => s * 1e6),
      stretches,
      warmEnd(r),
    );
  const rows: ReadonlyArray<readonly [string, Split[], boolean, string?]> = [
    [
      `p99 decision latency of the decisions in flight while a snapshot is written (× the rest of the same run), ${at}`,
      pairs.map((p) => split(p.during, p.during.snapshots)),
      true,
    ],
    [
      `p99 decision latency, ${at}, no snapshot, split by the same stretches (× the rest of the same run; the split's null)`,
      pairs.map((p) => split(p.base, moved(p, p.base))),
      false,
    ],
    [
      `p99 decision latency, ${at}, no snapshot, a nice-19 process spinning over the stretches, split by them (× the rest of the same run)`,
      pairs.map((p) => split(p.mimic, p.mimic.spunMs)),
      false,
    ],
    [
      `fsync'd batch p99 of the batches in flight while a snapshot is written (× the rest of the same run), ${at}`,
      pairs.map((p) => batches(p.during, p.during.snapshots)),
      false,
      'batches',
    ],
    [
      `fsync'd batch p99, ${at}, no snapshot, split by the same stretches (× the rest of the same run; the split's null)`,
      pairs.map((p) => batches(p.base, moved(p, p.base))),
      false,
      'batches',
    ],
  ];
  for (const [what, of, goal, items = 'decisions'] of rows) {
    const counted = [...of.entries()].filter(([, s]) => s.inside.length > 0 && s.outside.length > 0);
    if (counted.length === 0) {
      const none = { name: `${what}: no round had ${items} on both sides`, value: 0, unit: 'rounds' };
      figures.push(goal ? { ...none, goal: 'ratio ≤ 1.25', met: false } : none);
      continue;
    }
    const inside = p99(counted.flatMap(([, s]) => s.inside));
    const outside = p99(counted.flatMap(([, s]) => s.outside));
    const ratio = inside / outside;
    figures.push({
      name: `${what}, rounds pooled`,
      value: sig(ratio),
      unit: '×',
      floor: sig(outside),
      ratio: sig(ratio),
      ...(goal ? { goal: 'ratio ≤ 1.25', met: ratio <= 1.25 } : {}),
    });
    for (const [i, s] of counted) {
      const r = p99(s.inside) / p99(s.outside);
      figures.push({ name: `${what}, round ${i + 1} of ${of.length}`, value: sig(r), unit: '×', ratio: sig(r) });
    }
  }
  return figures;
}

/**
 * Where a snapshot's cost lands (bench/threads.ts): in each round's run with snapshots, the CPU
 * (ms per s) of the node's main thread, of its other threads at the node's own priority (V8's
 * helper threads, which also collect the snapshot worker's garbage, libuv's pool, the signature
 * workers) and of the snapshot worker (nice 19), while snapshots were written against the rest of
 * the same run after its warm-up; medians of the rounds. And how far the p99 of the runs without
 * snapshots spreads between rounds (highest ÷ lowest): the noise the ≤ 1.25× goals are read in;
 * and the CPU the hypervisor gave other guests during each kind of run (/proc/stat `steal`, ms per
 * s, all cores together), median and highest round: on a shared host it comes in bursts that stall
 * every thread at once, whatever its priority.
 */
function threadFigures(load: RateLoad & { mode: 'open' }, pairs: readonly OpenPair[]): Figure[] {
  const at = `open loop at ${load.rate}/s`;
  const figures: Figure[] = [];
  const bases = pairs.map((p) => p.base.p99Us);
  if (bases.length > 1) {
    const spread = Math.max(...bases) / Math.min(...bases);
    figures.push({
      name: `p99 decision latency, ${at}, no snapshot: highest round ÷ lowest`,
      value: sig(spread),
      unit: '×',
      ratio: sig(spread),
    });
  }
  // What the hypervisor took (/proc/stat steal): a round whose stretch of the machine lost CPU to other guests.
  for (const [what, run] of [
    ['no snapshot', (p: OpenPair) => p.base],
    ['snapshots written', (p: OpenPair) => p.during],
    ['a nice-19 process spinning over the stretches', (p: OpenPair) => p.mimic],
  ] as const) {
    const steal = pairs.map((p) => run(p).stealMsPerS).filter(Number.isFinite);
    if (steal.length === 0) continue;
    const name = `CPU the hypervisor took (steal, ms per s, all cores together), ${at}, ${what}`;
    figures.push({ name: `${name}, median of the rounds`, value: sig(median(steal)), unit: 'ms/s' });
    figures.push({ name: `${name}, highest round`, value: sig(Math.max(...steal)), unit: 'ms/s' });
  }
  const rounds = pairs.flatMap((p) => {
    const r = ratesInAndOut(p.during.threads, p.during.snapshots, warmEnd(p.during));
    return r.inside !== undefined && r.outside !== undefined ? [{ inside: r.inside, outside: r.outside }] : [];
  });
  if (rounds.length === 0) return figures;
  for (const [what, key] of [
    ['main thread', 'main'],
    ["other threads at the node's priority (V8's helper threads, libuv's pool, signature workers)", 'helpers'],
    ['snapshot worker (nice 19)', 'low'],
  ] as const) {
    const inside = median(rounds.map((r) => r.inside[key]));
    const outside = median(rounds.map((r) => r.outside[key]));
    figures.push({
      name: `node CPU while snapshots are written, ${at}: ${what} (ms per s; floor: the rest of the run)`,
      value: sig(inside),
      unit: 'ms/s',
      floor: sig(outside),
      ...(outside > 0 ? { ratio: sig(inside / outside) } : {}),
    });
  }
  return figures;
}

/**
 * Runs `work` while a 1 ms timer on this thread measures how late each of its turns comes: the
 * longest stall of the event loop (ms) during it, and what `work` returned.
 */
async function stalled<T>(work: () => Promise<T>): Promise<{ stallMs: number; value: T }> {
  let max = 0;
  let prev = performance.now();
  const probe = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - prev);
    prev = now;
  }, 1);
  try {
    const value = await work();
    return { stallMs: Math.max(max, performance.now() - prev), value };
  } finally {
    clearInterval(probe);
  }
}

/**
 * The main thread's longest stall while a snapshot is made, in this process, of the built log of
 * `n` receipts with every one of its request ids in the window (the clock is set just past the
 * log's last request, so the snapshot's request index holds `n` ids, as a busy node's does): the
 * way a running node made it before (replay on a nice-19 worker, the state merged, encoded and
 * signed on the main thread) and the way it does now (`makeSnapshotOffThread`: the state on the
 * worker, scheduled as `JCP_BENCH_HISTORY_SCHEDULING` says). Floor: the same probe with nothing running. The two files must be the same bytes.
 */
async function stallFigures(source: string, n: number): Promise<Figure[]> {
  const build = readBuild(source);
  if (build === undefined) throw new Error(`${source}: not a built log`);
  const nowS = build.t0S + Math.ceil(n / 1000) + 1;
  const steward = readKeyFile(path.join(source, 'steward.key'));
  const idle = await stalled(() => new Promise((r) => setTimeout(r, 2000)));
  const made: Array<{ stallMs: number; value: MadeSnapshot; bytes: Buffer }> = [];
  for (const offThread of [false, true]) {
    const dir = await copyOf(source, undefined);
    const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: 0, mustExist: true });
    const pool = await WorkerPool.start(1, { nice: SNAPSHOT_WORKER_NICE, idle: offThread && SCHEDULING === 'idle' });
    try {
      const o = { steward, nowS, windowS: WINDOW_S, keep: 1 };
      const r = await stalled(() =>
        offThread
          ? makeSnapshotOffThread(log, dir, pool, { ...o, toSeq: n - 1 })
          : makeSnapshot(log, dir, { ...o, runner: (job) => pool.replaySlice(job), parallel: 2 }),
      );
      if (r.value === undefined) throw new Error(`${dir}: no snapshot made`);
      made.push({ stallMs: r.stallMs, value: r.value, bytes: readFileSync(r.value.file) });
    } finally {
      await pool.close();
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const [before, now] = made as [(typeof made)[0], (typeof made)[0]];
  if (!before.bytes.equals(now.bytes)) throw new Error('the snapshot built on the worker differs from the one built on the main thread');
  const ids = now.value.requests;
  const floor = sig(idle.stallMs);
  return [
    { name: 'longest main-thread stall, nothing running (probe floor)', value: floor, unit: 'ms' },
    {
      name: `longest main-thread stall while a snapshot of ${n} receipts (${ids} request ids) is made, state on the main thread (before)`,
      value: sig(before.stallMs),
      unit: 'ms',
      floor,
      ratio: sig(before.stallMs / idle.stallMs),
    },
    {
      name: `longest main-thread stall while a snapshot of ${n} receipts (${ids} request ids) is made, state on its worker thread`,
      value: sig(now.stallMs),
      unit: 'ms',
      floor,
      ratio: sig(now.stallMs / idle.stallMs),
    },
    {
      name: `snapshot seconds, ${n} receipts (${ids} request ids), state on the main thread (before)`,
      value: sig(before.value.seconds),
      unit: 's',
    },
    { name: `snapshot seconds, ${n} receipts (${ids} request ids), state on its worker thread`, value: sig(now.value.seconds), unit: 's' },
  ];
}
