/**
 * Start-up bench: `npm run bench -- startup [--json out.json]`.
 *
 * Wall times from spawn, each against its goal and against the floor of this run (`node -e 0`
 * spawned the same way: the cost of any Node process here):
 * - `jcp --help` (median of `JCP_BENCH_STARTUP_ROUNDS`, default 5), goal ≤ 0.3 s;
 * - `jcp node start` on an empty data folder until it prints `listening on` (median of the same
 *   rounds, a new folder each), goal ≤ 1.0 s;
 * - `npm start` until the demo prints its first `node … up` line (one round: it starts 3 nodes,
 *   their 6 MCP servers, 3 workers and 3 threshold participants; it is then interrupted and
 *   stops everything it started), goal ≤ 2 s.
 * It runs the compiled build and refuses a missing or stale one (bin/jcp.mjs would run the
 * sources through tsx instead, which is not what is measured).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type Figure, median, type Suite, sig } from './figures.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'jcp.mjs');

/** Newest mtime (ms) of the .ts files under `dir`. */
function newestTs(dir: string): number {
  let max = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) max = Math.max(max, newestTs(p));
    else if (e.name.endsWith('.ts')) max = Math.max(max, statSync(p).mtimeMs);
  }
  return max;
}

/** @throws Error when dist/ is missing or older than a source it compiles. */
function requireFreshBuild(): void {
  const built = join(ROOT, 'dist', 'cli', 'main.js');
  const include = (JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] }).include;
  if (!existsSync(built) || include.some((f) => newestTs(join(ROOT, f)) > statSync(built).mtimeMs))
    throw new Error('dist/ is missing or older than the sources: run `npm run build` first (the bench measures the compiled build)');
}

/** Spawns `cmd args` and resolves with the seconds until `ready` matches its output, or rejects when it exits first or after `timeoutMs`. */
function untilOutput(
  cmd: string,
  args: readonly string[],
  ready: RegExp | 'exit',
  opts: { cwd?: string; detached?: boolean; timeoutMs?: number } = {},
): Promise<{ seconds: number; child: ChildProcess }> {
  const t0 = process.hrtime.bigint();
  const child = spawn(cmd, args, { cwd: opts.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
  const seconds = () => Number(process.hrtime.bigint() - t0) / 1e9;
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd} ${args.join(' ')}: not ready after ${opts.timeoutMs ?? 60_000} ms: ${out.slice(-500)}`));
    }, opts.timeoutMs ?? 60_000);
    const seen = (d: Buffer) => {
      out += d.toString('utf8');
      if (ready !== 'exit' && ready.test(out)) {
        clearTimeout(timer);
        resolve({ seconds: seconds(), child });
      }
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (ready === 'exit' && code === 0) resolve({ seconds: seconds(), child });
      else reject(new Error(`${cmd} ${args.join(' ')} exited (${code}) before it was ready: ${out.slice(-500)}`));
    });
  });
}

/** Stops a child (its process group when `group`) with `signal`, then SIGKILL after `graceMs`; resolves once it exited. */
async function stop(child: ChildProcess, signal: NodeJS.Signals, group = false, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = (s: NodeJS.Signals) => {
    try {
      if (group && child.pid !== undefined) process.kill(-child.pid, s);
      else child.kill(s);
    } catch {
      // already gone
    }
  };
  kill(signal);
  const timer = setTimeout(() => kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** A wall time (s) held to `≤ goal` s, with this run's spawn floor. */
function wall(name: string, value: number, floor: number, goal: number): Figure {
  return {
    name,
    value: sig(value, 3),
    unit: 's',
    floor: sig(floor, 3),
    ratio: sig(value / floor, 3),
    goal: `≤ ${goal} s`,
    met: value <= goal,
  };
}

/** Median seconds of `rounds` runs of `once`. */
async function medianOf(rounds: number, once: (r: number) => Promise<number>): Promise<number> {
  const xs: number[] = [];
  for (let r = 0; r < rounds; r++) xs.push(await once(r));
  return median(xs);
}

export const run: Suite = async () => {
  requireFreshBuild();
  const rounds = Number(process.env['JCP_BENCH_STARTUP_ROUNDS'] ?? 5);
  const work = mkdtempSync(join(tmpdir(), 'jcp-bench-startup-'));
  try {
    const floor = await medianOf(rounds, async () => (await untilOutput(process.execPath, ['-e', '0'], 'exit')).seconds);
    const help = await medianOf(rounds, async () => (await untilOutput(process.execPath, [BIN, '--help'], 'exit')).seconds);
    const node = await medianOf(rounds, async (r) => {
      const args = [BIN, 'node', 'start', '--data', join(work, `node-${r}`), '--listen', '127.0.0.1:0'];
      const { seconds, child } = await untilOutput(process.execPath, args, /listening on 127\.0\.0\.1:\d+/);
      await stop(child, 'SIGTERM');
      return seconds;
    });
    const demo = await untilOutput('npm', ['start', '--', '--dir', join(work, 'demo')], /node \w+ up: /, {
      detached: true,
      timeoutMs: 120_000,
    });
    // The demo stops every process it started on SIGINT (and cleans what it made on NATS).
    await stop(demo.child, 'SIGINT', true, 30_000);
    await sleep(200);
    return [
      { name: 'spawn floor: node -e 0', value: sig(floor, 3), unit: 's' },
      wall('jcp --help, wall', help, floor, 0.3),
      wall('jcp node start, empty data folder, spawn → listening', node, floor, 1.0),
      wall('npm start, spawn → first node up', demo.seconds, floor, 2),
    ];
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
};
