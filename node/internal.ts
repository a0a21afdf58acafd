/**
 * Names of node/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { REQUEST_KEY_WORDS, requestKeyWords } from './requestindex.ts';
export { MAX_WAITING_PER_GRANT } from './revocations.ts';
export { SCHED_IDLE, SIGNATURE_WORKER_REPLACEMENTS, threadPolicy, VERIFY_CHUNK } from './workers.ts';
export { SNAPSHOT_PAUSE_MAX_MS, SNAPSHOT_SLICE, SNAPSHOT_WORKER_NICE } from './snapshot.ts';
export type { SnapshotJob } from './snapshotjob.ts';
export { SnapshotProcess } from './snapshotproc.ts';
export { replayChunks } from './replay.ts';
