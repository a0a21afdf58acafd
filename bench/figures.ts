/**
 * The benchmark figure format and timing helpers shared by every suite.
 *
 * A figure is one measured number with its unit; when it is compared with a floor measured in
 * the same run, `floor` holds that floor and `ratio` the figure relative to it (how `ratio` reads
 * is stated in the figure's name, e.g. "× bare signature": lower is better for costs, higher for
 * throughputs). Floors are measured in the same process right next to the figure, so machine
 * noise hits both alike.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

/** One benchmark figure, as printed and as written to `--json` (`{"figures": [...]}`). */
export interface Figure {
  readonly name: string;
  readonly value: number;
  /** e.g. `ops/s`, `µs`, `×`. */
  readonly unit: string;
  /** The floor measured in the same run, in `unit`. */
  readonly floor?: number;
  /** value / floor (or the ratio the name states). */
  readonly ratio?: number;
  /** The goal the figure is held to, as text, e.g. `≥ 200000 ops/s` or `ratio ≤ 1.25`. */
  readonly goal?: string;
  /** Whether the goal was met, when there is one. */
  readonly met?: boolean;
}

/**
 * A figure held to `ratio ≥ least`, the ratio being `value / floor` (throughput against a floor of
 * the same run) unless given (e.g. a median of per-round ratios).
 */
export function ratioAtLeast(name: string, value: number, unit: string, floor: number, least: number, ratio = value / floor): Figure {
  return { name, value: sig(value), unit, floor: sig(floor), ratio: sig(ratio), goal: `ratio ≥ ${least}`, met: ratio >= least };
}

/**
 * The machine's 1-minute load average as a figure (`when`: e.g. `start`, `end`), with the core
 * count in its name: on a shared machine every other figure of the run is read against it.
 */
export function loadFigure(when: string): Figure {
  return { name: `load average, 1 min, ${when} of the run (${cpus().length} cores)`, value: sig(loadavg()[0]!, 3), unit: 'runnable' };
}

/** The options every suite's `run` receives. */
export interface SuiteOptions {
  /** Seed for the suite's inputs (keys, nonces), so two runs measure the same work. */
  readonly seed: number;
}

/** A suite: `bench/<name>.ts` exports `run`. */
export type Suite = (opts: SuiteOptions) => Promise<Figure[]>;

/** A throughput measurement. */
export interface Rate {
  /** Operations per second. */
  readonly opsPerS: number;
  /** Mean time of one operation (µs). */
  readonly meanUs: number;
  readonly ops: number;
  readonly elapsedMs: number;
}

/**
 * Runs `op` in batches until `budgetMs` of wall time has passed (after `warmupMs` of warm-up) and
 * returns its rate. `op` receives the running operation index. Batches amortise the clock.
 */
export function opsPerSecond(op: (i: number) => unknown, budgetMs = 1_000, warmupMs = 200): Rate {
  let sink: unknown;
  let i = 0;
  const warmEnd = performance.now() + warmupMs;
  while (performance.now() < warmEnd) for (let k = 0; k < 16; k++) sink = op(i++);
  let batch = 16;
  let ops = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < budgetMs) {
    for (let k = 0; k < batch; k++) sink = op(i++);
    ops += batch;
    t = performance.now();
    if (t - t0 < budgetMs / 20) batch *= 2;
  }
  keep(sink);
  const elapsedMs = t - t0;
  return { opsPerS: (ops * 1000) / elapsedMs, meanUs: (elapsedMs * 1000) / ops, ops, elapsedMs };
}

/**
 * Times `op` one call at a time for `budgetMs` and returns its per-call samples (µs). Use for
 * percentiles; `setup` runs untimed before each call and its value is passed to `op`.
 */
export function samplesUs<S>(setup: (i: number) => S, op: (s: S, i: number) => unknown, budgetMs = 1_000, warmup = 50): number[] {
  let sink: unknown;
  for (let i = 0; i < warmup; i++) sink = op(setup(i), i);
  const out: number[] = [];
  const end = performance.now() + budgetMs;
  for (let i = warmup; performance.now() < end; i++) {
    const s = setup(i);
    const t0 = performance.now();
    sink = op(s, i);
    out.push((performance.now() - t0) * 1000);
  }
  keep(sink);
  return out;
}

/** The p-th percentile (0–100) of `xs`, nearest-rank. Throws on an empty list. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) throw new RangeError('percentile of no samples');
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** The median of `xs`. */
export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** Mean µs per op over exactly `n` calls of `op(start + k)`. For inputs that must not repeat (uncached work). */
export function timeOps(op: (i: number) => unknown, n: number, start = 0): number {
  let sink: unknown;
  const t0 = performance.now();
  for (let k = 0; k < n; k++) sink = op(start + k);
  const t1 = performance.now();
  keep(sink);
  return ((t1 - t0) * 1000) / n;
}

/** A cost next to its floor: medians of interleaved rounds (µs per op) and the median per-round ratio. */
export interface Versus {
  readonly valueUs: number;
  readonly floorUs: number;
  readonly ratio: number;
}

/**
 * Interleaves `rounds` rounds of the measured work and of its floor, each round returning mean µs
 * per op, so drift (thermal, GC, neighbours) hits both alike; reports the medians.
 */
export function interleave(round: (r: number) => number, floorRound: (r: number) => number, rounds = 7): Versus {
  const values: number[] = [];
  const floors: number[] = [];
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const v = round(r);
    const f = floorRound(r);
    values.push(v);
    floors.push(f);
    ratios.push(v / f);
  }
  return { valueUs: median(values), floorUs: median(floors), ratio: median(ratios) };
}

/** {@link interleave} for repeatable ops: each round runs the op for `roundMs` (after a short warm-up of both). */
export function againstFloor(op: (i: number) => unknown, floorOp: (i: number) => unknown, rounds = 7, roundMs = 300): Versus {
  opsPerSecond(op, 100, 100);
  opsPerSecond(floorOp, 100, 100);
  return interleave(
    () => opsPerSecond(op, roundMs, 20).meanUs,
    () => opsPerSecond(floorOp, roundMs, 20).meanUs,
    rounds,
  );
}

/**
 * Times the work and its floor in alternating small batches (ABBA order, so neither always runs
 * first), `batch` ops each, until `budgetMs` has passed or `maxPairs` pairs ran. On a shared
 * machine a preemption spoils one batch, not a whole round: the medians of the per-batch µs and
 * of the per-pair ratios shrug it off. `op(i)` gets a fresh index each call (ops never repeat an
 * index, so a finite pool of uncached inputs can be indexed directly).
 */
export function paired(
  op: (i: number) => unknown,
  floorOp: (i: number) => unknown,
  opts: { budgetMs?: number; batch?: number; maxPairs?: number; warmupPairs?: number } = {},
): Versus & { pairs: number } {
  const budgetMs = opts.budgetMs ?? 3_000;
  const batch = opts.batch ?? 1;
  const maxPairs = opts.maxPairs ?? Number.POSITIVE_INFINITY;
  const warmup = opts.warmupPairs ?? 0;
  const values: number[] = [];
  const floors: number[] = [];
  const ratios: number[] = [];
  let i = 0;
  let j = 0;
  const end = performance.now() + budgetMs;
  for (let pair = 0; pair < maxPairs + warmup && (pair < warmup || performance.now() < end); pair++) {
    let v: number;
    let f: number;
    if (pair % 2 === 0) {
      v = timeOps(op, batch, i);
      f = timeOps(floorOp, batch, j);
    } else {
      f = timeOps(floorOp, batch, j);
      v = timeOps(op, batch, i);
    }
    i += batch;
    j += batch;
    if (pair < warmup) continue;
    values.push(v);
    floors.push(f);
    ratios.push(v / f);
  }
  return { valueUs: median(values), floorUs: median(floors), ratio: median(ratios), pairs: values.length };
}

/** Rounds to `digits` significant digits for printing and JSON. */
export function sig(x: number, digits = 4): number {
  return Number(x.toPrecision(digits));
}

/** Formats figures as an aligned table. */
export function table(figures: readonly Figure[]): string {
  const rows = [
    ['figure', 'value', 'unit', 'floor', 'ratio', 'goal', ''],
    ...figures.map((f) => [
      f.name,
      String(f.value),
      f.unit,
      f.floor === undefined ? '' : String(f.floor),
      f.ratio === undefined ? '' : String(f.ratio),
      f.goal ?? '',
      f.met === undefined ? '' : f.met ? 'met' : 'MISSED',
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => (c === 1 || c === 3 || c === 4 ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

let globalSink: unknown;
/** Keeps a value alive so the optimiser cannot drop the work that made it. */
export function keep(v: unknown): void {
  globalSink = v;
}
/** The last kept value (read it so `keep` is never dead code). */
export function kept(): unknown {
  return globalSink;
}

/** The fields of /proc/<pid>/stat after the command name (`state` first, so `ppid` is [1]); undefined where unreadable (Linux only). */
function procStat(pid: number | string): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system, every thread) process `pid` has used so far, from /proc (Linux); 0 where unreadable. */
export function cpuOf(pid: number | undefined): number {
  const f = pid === undefined ? undefined : procStat(pid);
  return f === undefined ? 0 : (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** The processes whose parent is `pid` (Linux /proc), e.g. a node's stdio MCP servers. */
export function childrenOf(pid: number | undefined): number[] {
  if (pid === undefined) return [];
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d) && procStat(d)?.[1] === String(pid))
    .map(Number);
}
