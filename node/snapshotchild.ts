/**
 * The entry of a running node's snapshot process (node/snapshotproc.ts, booted by
 * node/snapshotproc.mjs): serves the snapshot session (node/snapshotjob.ts) over the IPC channel
 * the node opened, and answers `nice` with how its main thread is scheduled. It exits when the
 * channel closes (the node stopped or ended it).
 */
import { getPriority } from 'node:os';
import { handleSnapshotJob, type SnapshotJob, type SnapshotReply } from './snapshotjob.ts';
import { SCHED_IDLE, threadPolicy } from './workers.ts';

/** What the node sends: a session message, or a question about this process's scheduling. */
export type SnapshotProcessJob = SnapshotJob | { readonly t: 'nice'; readonly id: number };

/** What this process answers, with the id of the message it answers. */
export type SnapshotProcessReply =
  | { readonly id: number; readonly snap: SnapshotReply }
  | { readonly id: number; readonly nice: number | null; readonly idle: boolean | null }
  | { readonly id: number; readonly error: string };

const send = (r: SnapshotProcessReply): void => {
  process.send?.(r);
};

if (process.send !== undefined) {
  process.on('message', (m: SnapshotProcessJob) => {
    if (m.t === 'nice') {
      let nice: number | null = null;
      try {
        nice = getPriority(0);
      } catch {
        // unreadable: null
      }
      const policy = threadPolicy(); // this thread: the process's main thread
      send({ id: m.id, nice, idle: policy === undefined ? null : policy === SCHED_IDLE });
      return;
    }
    const answer = (r: SnapshotReply | Error): void => {
      if (r instanceof Error) send({ id: m.id, error: r.message });
      else send({ id: m.id, snap: r });
    };
    handleSnapshotJob(m, answer).catch((e: Error) => answer(e));
  });
  process.on('disconnect', () => process.exit(0));
}
