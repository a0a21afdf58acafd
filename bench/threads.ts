/**
 * Where a process's CPU goes, thread by thread, seen from outside (Linux): `npm run bench --
 * history` samples the node's threads while it decides, to tell what a snapshot costs the cores
 * the decisions run on. Each sample reads `/proc/<pid>/task/<tid>/schedstat` (nanoseconds on a
 * CPU) and `stat` (the thread's nice) of every thread; the CPU between two samples goes to one
 * of three classes:
 * - `main`: the node's main thread (the decisions; tid = pid);
 * - `low`: threads at least 10 nice steps below the main thread (the snapshot worker at nice 19,
 *   node/snapshot.ts, when the node runs at nice 0; the same when the whole node was started
 *   niced);
 * - `helpers`: every other thread at the node's own priority: V8's helper threads (the garbage
 *   collectors' parallel and concurrent work for every isolate of the process, worker threads
 *   included), libuv's pool (the log's writes and fsyncs, LevelDB reads) and the signature
 *   workers.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Nice steps below the main thread from which a thread counts as `low`. */
const LOW_NICE_STEPS = 10;

/** CPU milliseconds of each thread class over one sampling interval (unix ms at both ends). */
export interface ThreadInterval {
  readonly fromMs: number;
  readonly toMs: number;
  readonly mainMs: number;
  readonly lowMs: number;
  readonly helpersMs: number;
}

/** One thread's CPU so far (ns) and nice, or undefined when it ended between the listing and the read. */
function readThread(pid: number, tid: string): { ns: number; nice: number } | undefined {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, nice field 19.
    const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    return Number.isFinite(ns) && Number.isFinite(nice) ? { ns, nice } : undefined;
  } catch {
    return undefined;
  }
}

/** Every thread of `pid` (tid → CPU ns, nice); empty once the process is gone. */
function readThreads(pid: number): Map<string, { ns: number; nice: number }> {
  const out = new Map<string, { ns: number; nice: number }>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    const t = readThread(pid, tid);
    if (t !== undefined) out.set(tid, t);
  }
  return out;
}

/**
 * Samples the threads of process `pid` every `everyMs` (default 100) until `stop()`, which
 * returns the intervals (a last one ends at the first `stop()`). A thread born between two
 * samples counts from zero; one that ended loses its last interval's CPU (at most `everyMs` of
 * one thread). Off Linux (no /proc), no intervals.
 */
export function sampleThreads(pid: number, everyMs = 100): { stop(): ThreadInterval[] } {
  const intervals: ThreadInterval[] = [];
  let last = readThreads(pid);
  let lastAt = Date.now();
  const sample = (): void => {
    const now = readThreads(pid);
    const at = Date.now();
    const ms = { mainMs: 0, lowMs: 0, helpersMs: 0 };
    const lowFrom = (now.get(String(pid))?.nice ?? 0) + LOW_NICE_STEPS;
    for (const [tid, t] of now) {
      const d = (t.ns - (last.get(tid)?.ns ?? 0)) / 1e6;
      if (tid === String(pid)) ms.mainMs += d;
      else if (t.nice >= lowFrom) ms.lowMs += d;
      else ms.helpersMs += d;
    }
    if (now.size > 0) intervals.push({ fromMs: lastAt, toMs: at, ...ms });
    last = now;
    lastAt = at;
  };
  const timer = setInterval(sample, everyMs);
  let stopped = false;
  return {
    stop() {
      if (!stopped) {
        stopped = true;
        clearInterval(timer);
        sample(); // the last stretch, up to the stop
      }
      return intervals;
    },
  };
}

/** CPU of each class in milliseconds per second of wall time. */
export interface ThreadRates {
  readonly main: number;
  readonly low: number;
  readonly helpers: number;
  /** Seconds of wall time the rates cover. */
  readonly seconds: number;
}

/**
 * The CPU rates (ms per s) of the intervals whose middle lies inside one of `stretches` (unix ms)
 * and of those outside all of them, counting only intervals from `fromMs` on (after a warm-up).
 * A side with no interval is undefined.
 */
export function ratesInAndOut(
  intervals: readonly ThreadInterval[],
  stretches: ReadonlyArray<{ fromMs: number; toMs: number }>,
  fromMs: number,
): { inside: ThreadRates | undefined; outside: ThreadRates | undefined } {
  const sums = { inside: { main: 0, low: 0, helpers: 0, ms: 0 }, outside: { main: 0, low: 0, helpers: 0, ms: 0 } };
  for (const x of intervals) {
    const mid = (x.fromMs + x.toMs) / 2;
    if (mid < fromMs) continue;
    const s = stretches.some((w) => mid >= w.fromMs && mid <= w.toMs) ? sums.inside : sums.outside;
    s.main += x.mainMs;
    s.low += x.lowMs;
    s.helpers += x.helpersMs;
    s.ms += x.toMs - x.fromMs;
  }
  const rates = (s: typeof sums.inside): ThreadRates | undefined =>
    s.ms > 0
      ? { main: (s.main / s.ms) * 1000, low: (s.low / s.ms) * 1000, helpers: (s.helpers / s.ms) * 1000, seconds: s.ms / 1000 }
      : undefined;
  return { inside: rates(sums.inside), outside: rates(sums.outside) };
}
