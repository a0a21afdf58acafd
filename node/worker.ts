/**
 * A signature worker thread (started by `workers.ts`): verifies caller signatures (§11) and
 * replays receipt-log slices (§8.1), so both cores do signature work.
 */
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { parseDid, verify } from '../core/index.ts';
import { replaySlice, type SliceJob } from './replay.ts';

/** One caller-signature check: the caller's did, the signed bytes, the signature. */
export interface VerifyJob {
  readonly did: string;
  readonly msg: Uint8Array;
  readonly sig: Uint8Array;
}

/** Messages a worker takes. */
export type WorkerJob =
  | { readonly t: 'verify'; readonly id: number; readonly jobs: readonly VerifyJob[] }
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

/** The receipts of a packed slice, as views into the one buffer. */
export function unpack(packed: Uint8Array, ends: Uint32Array): Uint8Array[] {
  const out: Uint8Array[] = new Array(ends.length);
  let from = 0;
  for (let i = 0; i < ends.length; i++) {
    out[i] = packed.subarray(from, ends[i]!);
    from = ends[i]!;
  }
  return out;
}

/** 1 where the signature verifies under the did, else 0 (a did that does not parse is 0). */
export function verifyJobs(jobs: readonly VerifyJob[]): Uint8Array {
  const out = new Uint8Array(jobs.length);
  for (let i = 0; i < jobs.length; i++) {
    const j = jobs[i]!;
    try {
      out[i] = verify(parseDid(j.did), j.msg, j.sig) ? 1 : 0;
    } catch {
      out[i] = 0;
    }
  }
  return out;
}

/**
 * Lowers this worker thread's priority to `nice` (Linux: setpriority on the thread's own id, read
 * from /proc/thread-self). Returns the priority set, or undefined where that is not possible.
 */
export function niceThisThread(nice: number): number | undefined {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isSafeInteger(tid) || tid <= 0) return undefined;
    setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return undefined;
  }
}

const port = parentPort;
if (port && typeof (workerData as { nice?: unknown } | undefined)?.nice === 'number') niceThisThread((workerData as { nice: number }).nice);
if (port) {
  port.on('message', (m: WorkerJob) => {
    try {
      if (m.t === 'verify') {
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
