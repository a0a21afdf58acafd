// Boots a node worker thread: lowers its priority first when asked (workerData.nice; Linux: the
// module loading below is most of a new worker's CPU, and a background worker must not take it
// at the decision path's priority), registers tsx's loader when the entry is a TypeScript source
// (a checkout run from its sources; worker threads do not inherit the loader), loads the entry
// named in workerData (dist/node/worker.js in the build, node/worker.ts in the sources), and only
// then, when asked (workerData.idle), enters the SCHED_IDLE class: loading modules submits file
// reads to libuv's thread pool under its process-wide lock, and a SCHED_IDLE thread gives its core
// up the moment the thread it wakes is runnable, still holding that lock, which the main thread's
// log writes then wait for (a fresh review measured stalls of 0.5–2.2 s on busy cores).
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { workerData } from 'node:worker_threads';

if (typeof workerData?.nice === 'number') {
  try {
    // This thread's own id (setpriority on a thread id changes that thread alone).
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), workerData.nice);
  } catch {
    // Not Linux, or the system refused: the worker runs at the normal priority (node/workers.ts says so).
  }
}
let setScheduler;
if (workerData?.idle === true && process.platform === 'linux') {
  try {
    const koffi = (await import('koffi')).default;
    setScheduler = koffi.load('libc.so.6').func('int sched_setscheduler(int pid, int policy, const int *param)');
  } catch {
    // No glibc: the worker stays at its nice (node/workers.ts says so).
  }
}
if (String(workerData.entry).endsWith('.ts')) (await import('tsx/esm/api')).register();
await import(workerData.entry);
// sched_setscheduler(2) with pid 0 changes the calling thread alone; SCHED_IDLE is 5 and takes a
// sched_param whose priority is 0. A refusal leaves the worker at its nice (the entry reads its
// class when asked: node/worker.ts).
setScheduler?.(0, 5, [0]);
