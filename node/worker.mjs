// Boots a node worker thread: lowers its priority first when asked (workerData.nice, and
// workerData.idle for the SCHED_IDLE class; Linux: the module loading below is most of a new
// worker's CPU, and a background worker must not take it at the decision path's priority),
// registers tsx's loader when the entry is a TypeScript source (a checkout run from its sources;
// worker threads do not inherit the loader), then loads the entry named in workerData
// (dist/node/worker.js in the build, node/worker.ts in the sources).
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
if (workerData?.idle === true && process.platform === 'linux') {
  try {
    // sched_setscheduler(2) with pid 0 changes the calling thread alone; SCHED_IDLE is 5 and takes
    // a sched_param whose priority is 0. A thread of this class runs only where no other wants the
    // core, and gives it up at once to one that wakes (nice 19 runs on to the end of its slice).
    const koffi = (await import('koffi')).default;
    const setScheduler = koffi.load('libc.so.6').func('int sched_setscheduler(int pid, int policy, const int *param)');
    setScheduler(0, 5, [0]);
  } catch {
    // No glibc, or the system refused: the worker stays at its nice (node/workers.ts says so).
  }
}
if (String(workerData.entry).endsWith('.ts')) (await import('tsx/esm/api')).register();
await import(workerData.entry);
