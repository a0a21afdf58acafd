// Boots a running node's snapshot process (node/snapshotproc.ts): puts every thread of this
// process at nice 19 and, when asked (JCP_SNAPSHOT_IDLE=1), in the SCHED_IDLE class, before it
// loads anything; threads made later (libuv's pool) inherit the class of the thread that makes
// them. A separate process shares no lock with the node's main thread (no thread pool, no message
// port), so the idle class cannot stall the decisions the way a SCHED_IDLE worker thread can
// (node/worker.mjs). Then registers tsx's loader when the entry is a TypeScript source, and loads
// the entry (JCP_SNAPSHOT_ENTRY), which serves the session over the IPC channel.
import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';

const idle = process.env.JCP_SNAPSHOT_IDLE === '1' && process.platform === 'linux';
let setScheduler;
if (idle) {
  try {
    const koffi = (await import('koffi')).default;
    setScheduler = koffi.load('libc.so.6').func('int sched_setscheduler(int pid, int policy, const int *param)');
  } catch {
    // No glibc: the process stays at nice 19 (the parent reads its class and says so).
  }
}
/** Every thread of this process at nice 19, and SCHED_IDLE (5, priority 0) when asked. */
function lower() {
  let tids = [];
  try {
    tids = readdirSync('/proc/self/task').map(Number);
  } catch {
    tids = [0];
  }
  for (const tid of tids) {
    try {
      setPriority(tid, 19);
    } catch {
      // not allowed, or the thread is gone
    }
    setScheduler?.(tid, 5, [0]);
  }
}
lower();
const entry = String(process.env.JCP_SNAPSHOT_ENTRY);
if (entry.endsWith('.ts')) (await import('tsx/esm/api')).register();
await import(entry);
lower(); // threads that module loading started
