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
  });

  it('sampleThreads puts a nice-19 thread in low and the main thread in main', async () => {
    // A worker thread that lowers itself to nice 10 (the class's lowest) and spins until its own
    // CPU (schedstat, so the test holds however busy the cores are) reaches 150 ms.
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { readFileSync, readlinkSync } = require('node:fs');
       const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
       require('node:os').setPriority(tid, 10);
       const cpuMs = () => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
       parentPort.once('message', () => { const end = cpuMs() + 150; while (cpuMs() < end); parentPort.postMessage('done'); });
       parentPort.postMessage('ready');`,
      { eval: true },
    );
    await new Promise((r) => worker.once('message', r));
    const sampler = sampleThreads(process.pid, 20);
    const done = new Promise((r) => worker.once('message', r));
    worker.postMessage('go');
    await done;
    await new Promise((r) => setTimeout(r, 60));
    const intervals = sampler.stop();
    await worker.terminate();
    const sum = (k: 'mainMs' | 'lowMs') => intervals.reduce((t, x) => t + x[k], 0);
    // The spin is 150 ms of CPU at nice 10 (read by another thread, a running thread's count can
    // lag by a scheduler tick); the main thread only ran the sampler's timer.
    expect(sum('lowMs')).toBeGreaterThan(120);
    expect(sum('mainMs')).toBeLessThan(sum('lowMs'));
  }, 60_000);
});
