import { getPriority } from 'node:os';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ratesInAndOut, sampleThreads, type ThreadInterval } from '../../bench/threads.ts';

const at = (fromMs: number, mainMs: number, lowMs: number, helpersMs: number): ThreadInterval => ({
  fromMs,
  toMs: fromMs + 100,
  mainMs,
  lowMs,
  helpersMs,
});

/**
 * A worker thread that sets its own nice to `nice` (unless it is already there) and, once told,
 * spins until its own CPU (schedstat, so it holds however busy the cores are) has grown by
 * `cpuMs`. It lives until terminated (its listener stays): a thread that ends before a sample
 * loses its CPU since the last.
 */
function spinner(nice: number, cpuMs: number): Worker {
  return new Worker(
    `const { parentPort } = require('node:worker_threads');
     const { readFileSync, readlinkSync } = require('node:fs');
     const os = require('node:os');
     const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
     if (os.getPriority(tid) !== ${nice}) os.setPriority(tid, ${nice});
     const cpuMs = () => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
     parentPort.on('message', () => { const end = cpuMs() + ${cpuMs}; while (cpuMs() < end); parentPort.postMessage('done'); });
     parentPort.postMessage('ready');`,
    { eval: true },
  );
}

/** The worker's next message; rejects when it fails or exits first. */
const next = (w: Worker) =>
  new Promise((resolve, reject) => {
    const failed = (e: unknown) => {
      w.off('message', got);
      w.off('exit', failed);
      reject(e instanceof Error ? e : new Error(`worker exited with ${String(e)}`));
    };
    const got = (m: unknown) => {
      w.off('error', failed);
      w.off('exit', failed);
      resolve(m);
    };
    w.once('message', got);
    w.once('error', failed);
    w.once('exit', failed);
  });

describe('bench/threads: CPU by thread class', () => {
  it('ratesInAndOut splits intervals by their middle and leaves out the warm-up', () => {
    const intervals = [at(0, 90, 90, 90), at(1000, 50, 0, 10), at(1100, 60, 40, 30), at(1200, 40, 0, 10), at(1300, 70, 20, 50)];
    const { inside, outside } = ratesInAndOut(
      intervals,
      [
        { fromMs: 1100, toMs: 1200 },
        { fromMs: 1320, toMs: 1400 },
      ],
      500,
    );
    // Inside: the intervals from 1100 (middle 1150) and from 1300 (middle 1350): 200 ms of wall time.
    expect(inside).toEqual({ main: 650, low: 300, helpers: 400, seconds: 0.2 });
    // Outside: from 1000 and from 1200; the one from 0 is in the warm-up.
    expect(outside).toEqual({ main: 450, low: 0, helpers: 100, seconds: 0.2 });
    expect(ratesInAndOut(intervals, [], 5000)).toEqual({ inside: undefined, outside: undefined });
    // A stretch's ends count as inside: one ending at a middle (1150), one starting at a middle (1350).
    const edges = ratesInAndOut(
      intervals,
      [
        { fromMs: 1140, toMs: 1150 },
        { fromMs: 1350, toMs: 1360 },
      ],
      500,
    );
    expect(edges.inside?.seconds).toBe(0.2);
  });

  it('sampleThreads counts the main thread, threads 10 nice steps below it and the others apart, up to stop()', async () => {
    // Relative to this thread's nice (the runner may itself be niced): one worker 10 steps below
    // it spins 150 ms of its own CPU, one 9 steps below 250 ms, one at its nice 300 ms. The period
    // is longer than the test: every figure comes from stop()'s sample.
    const base = getPriority(0);
    expect(base, 'the test needs a thread 10 nice steps below this one').toBeLessThanOrEqual(9);
    const workers = [spinner(base + 10, 150), spinner(base + 9, 250), spinner(base, 300)];
    try {
      await Promise.all(workers.map(next));
      await new Promise((r) => setTimeout(r, 200)); // the workers' start-up ends
      const sampler = sampleThreads(process.pid, 600_000);
      const done = Promise.all(workers.map(next));
      for (const w of workers) w.postMessage('go');
      await done;
      const intervals = sampler.stop();
      const sum = (k: 'mainMs' | 'lowMs' | 'helpersMs') => intervals.reduce((t, x) => t + x[k], 0);
      expect(intervals).toHaveLength(1);
      // A running thread's count, read by another, can lag by a scheduler tick.
      expect(sum('lowMs')).toBeGreaterThan(120);
      expect(sum('lowMs')).toBeLessThan(350);
      expect(sum('helpersMs')).toBeGreaterThan(450);
      expect(sum('mainMs')).toBeGreaterThan(0);
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }, 60_000);
});
