/**
 * A signature worker thread (started by `workers.ts`): verifies caller signatures (§11) and
 * replays receipt-log slices (§8.1), so both cores do signature work.
 */
import { readlinkSync } from 'node:fs';
import { getPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { replaySlice, type SliceJob } from './replay.ts';
import { handleSnapshotJob, type SnapshotJob, type SnapshotReply } from './snapshotjob.ts';
import { SCHED_IDLE, threadPolicy, unpack, verifyJobs } from './workers.ts';

export { verifyJobs };

/** One caller-signature check: the caller's did, the signed bytes, the signature. */
export interface VerifyJob {
  readonly did: string;
  readonly msg: Uint8Array;
  readonly sig: Uint8Array;
}

/** Messages a worker takes. */
export type WorkerJob =
  | { readonly t: 'verify'; readonly id: number; readonly jobs: readonly VerifyJob[] }
  /** A running node's snapshot session (node/snapshotjob.ts). */
  | SnapshotJob
  /**
   * Asks for the priority the worker had once its modules had loaded (see `bootNice`) and whether
   * it is in the SCHED_IDLE class: a `{id, nice, idle}` reply, each null where unknown.
   */
  | { readonly t: 'nice'; readonly id: number }
  | {
      readonly t: 'replay';
      readonly id: number;
      /** The slice's receipts back to back; `ends[i]` is where receipt i ends. */
      readonly packed: Uint8Array;
      readonly ends: Uint32Array;
      readonly seqs: SliceJob['seqs'];
      readonly steward: SliceJob['steward'];
      readonly start: SliceJob['start'];
    };

/**
 * This thread's scheduling priority (nice; Linux: getpriority on the thread's own id, read from
 * /proc/thread-self), or undefined where it cannot be read.
 */
export function threadNice(): number | undefined {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isSafeInteger(tid) && tid > 0 ? getPriority(tid) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The priority this worker had when this module's body began, after its imports loaded: the boot
 * script (worker.mjs) lowers it to `workerData.nice` before it loads any module, so a background
 * worker's start-up (most of its CPU for a short job) does not run at the decision path's priority.
 */
const bootNice = threadNice();

const port = parentPort;
if (port) {
  port.on('message', (m: WorkerJob) => {
    try {
      if (m.t === 'snap-open' || m.t === 'snap-chunk' || m.t === 'snap-end') {
        const answer = (r: SnapshotReply | Error) => {
          if (r instanceof Error) port.postMessage({ id: m.id, error: r.message });
          else if (r.t === 'ended' && r.made !== undefined) {
            // A copy of its own to transfer (the encoder's buffer may be one it reuses).
            const bytes = r.made.bytes.slice();
            port.postMessage({ id: m.id, snap: { ...r, made: { ...r.made, bytes } } }, [bytes.buffer as ArrayBuffer]);
          } else port.postMessage({ id: m.id, snap: r });
        };
        handleSnapshotJob(m, answer).catch((e: Error) => answer(e));
      } else if (m.t === 'nice') {
        // The class now: the boot script sets SCHED_IDLE right after this module has loaded, before any message is handled.
        const policy = threadPolicy();
        port.postMessage({ id: m.id, nice: bootNice ?? null, idle: policy === undefined ? null : policy === SCHED_IDLE });
      } else if (m.t === 'verify') {
        const flags = verifyJobs(m.jobs);
        port.postMessage({ id: m.id, flags }, [flags.buffer as ArrayBuffer]);
      } else {
        const slice = replaySlice({ receipts: unpack(m.packed, m.ends), seqs: m.seqs, steward: m.steward, start: m.start });
        port.postMessage({ id: m.id, slice }, [
          slice.requestKeys.buffer as ArrayBuffer,
          slice.requestSeqs.buffer as ArrayBuffer,
          slice.requestAts.buffer as ArrayBuffer,
        ]);
      }
    } catch (e) {
      port.postMessage({ id: m.id, error: (e as Error).message ?? String(e) });
    }
  });
}
