/**
 * Worker threads for signature work (docs/design.md "Decisions and the ledger": caller signatures are
 * verified for every request): caller-signature checks of request bodies, batched per event-loop
 * turn, and boot-replay slices. The decision itself, the debit and the receipt signature stay on
 * the main thread, in order (each receipt links to the previous one's bytes).
 */
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { parseDid, verify } from '../core/index.ts';
import type { SliceJob, SliceResult } from './replay.ts';
import type { SnapshotJob, SnapshotReply } from './snapshotjob.ts';
import type { VerifyJob, WorkerJob } from './worker.ts';

/**
 * Signature workers a node replaces over its life when they exit (config `workers` ≥ 1; node/node.ts):
 * bounded, so a worker that keeps crashing does not start threads without end; past it the node
 * runs on the workers left and its main thread.
 */
export const SIGNATURE_WORKER_REPLACEMENTS = 16;

/** Largest number of caller-signature checks sent to a worker in one message. */
export const VERIFY_CHUNK = 16;

interface Slot {
  readonly worker: Worker;
  inFlight: number;
  /** Set once the worker has exited: a message sent to it then would never be answered. */
  exited?: Error;
}

/** A job in flight: how it is answered, and the worker it went to. */
type Waiter = { resolve: (v: unknown) => void; reject: (e: Error) => void; slot: Slot };

/**
 * 1 where the signature verifies under the did, else 0 (a did that does not parse is 0): what a
 * worker answers to a `verify` batch, and what the pool does itself for a batch whose worker
 * exited before it answered.
 */
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
 * Receipts back to back in one buffer, to hand a worker without a copy: `ends[i]` is where receipt
 * i ends ({@link unpack} undoes it).
 */
export function packReceipts(receipts: readonly Uint8Array[]): { packed: Uint8Array; ends: Uint32Array } {
  let total = 0;
  for (const r of receipts) total += r.length;
  const packed = new Uint8Array(total);
  const ends = new Uint32Array(receipts.length);
  let off = 0;
  for (let i = 0; i < receipts.length; i++) {
    packed.set(receipts[i]!, off);
    off += receipts[i]!.length;
    ends[i] = off;
  }
  return { packed, ends };
}

/** The receipts of a {@link packReceipts} buffer, as views into it (no copy). */
export function unpack(packed: Uint8Array, ends: Uint32Array): Uint8Array[] {
  const out: Uint8Array[] = new Array(ends.length);
  let from = 0;
  for (let i = 0; i < ends.length; i++) {
    out[i] = packed.subarray(from, ends[i]!);
    from = ends[i]!;
  }
  return out;
}

/** Linux's number of the SCHED_IDLE scheduling policy (sched(7)). */
export const SCHED_IDLE = 5;

/**
 * A thread's scheduling policy (sched(7): 0 SCHED_OTHER, 3 SCHED_BATCH, 5 SCHED_IDLE, …), read
 * from field 41 of `<task>/stat` (proc(5); `task` defaults to this thread's,
 * /proc/thread-self, or give /proc/<pid>/task/<tid>), or undefined where it cannot be read.
 */
export function threadPolicy(task = '/proc/thread-self'): number | undefined {
  try {
    const stat = readFileSync(`${task}/stat`, 'utf8');
    // Fields after the command name (in parentheses, which may hold spaces) start at field 3.
    const policy = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[41 - 3]);
    return Number.isSafeInteger(policy) ? policy : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How a worker thread was scheduled once its modules had loaded: its nice (null where it cannot be
 * read) and whether it was in the SCHED_IDLE class (null where the class cannot be read: not Linux).
 */
export interface BootScheduling {
  readonly nice: number | null;
  readonly idle: boolean | null;
}

/** A worker of a {@link WorkerPool} that exited while the pool was open ({@link PoolOptions.onExit}). */
export interface WorkerExit {
  /** Its place in the pool (0-based). */
  readonly index: number;
  /** Its exit code. */
  readonly code: number;
  /** Whether a new worker took its place ({@link PoolOptions.replace}). */
  readonly replaced: boolean;
}

/** How a {@link WorkerPool} starts its workers and what it does when one exits. */
export interface PoolOptions {
  /** Scheduling priority (nice, 1–19, Linux) each worker lowers itself to. */
  readonly nice?: number;
  /** Whether each worker enters the SCHED_IDLE class (Linux, glibc). */
  readonly idle?: boolean;
  /**
   * Workers that exit while the pool is open (a crash, out of memory) that are replaced by a new
   * one, over the pool's life (default 0: none; a pool kept for later checks {@link WorkerPool.exited}).
   * Bounded, so a worker that keeps crashing does not start threads without end.
   */
  readonly replace?: number;
  /** Told of each worker that exits while the pool is open, after its jobs were rejected (and it was replaced, if it was). */
  readonly onExit?: (e: WorkerExit) => void;
}

/** A fixed pool of signature workers. */
export class WorkerPool {
  readonly #slots: Slot[];
  readonly #waiters = new Map<number, Waiter>();
  #nextId = 1;
  #batch: VerifyJob[] = [];
  #batchWaiters: Array<(ok: boolean) => void> = [];
  #scheduled = false;
  #closed = false;

  readonly #spawn: () => Worker;
  readonly #onExit: ((e: WorkerExit) => void) | undefined;
  /** Replacements left for workers that exit while the pool is open ({@link PoolOptions.replace}). */
  #replacements: number;

  private constructor(workers: Worker[], spawn: () => Worker, opts: PoolOptions) {
    this.#spawn = spawn;
    this.#onExit = opts.onExit;
    this.#replacements = opts.replace ?? 0;
    this.#slots = workers.map((worker) => ({ worker, inFlight: 0 }));
    for (const [i, slot] of this.#slots.entries()) this.#wire(slot, i);
  }

  /** Answers `slot`'s messages; on its exit rejects what it still had and, while the pool is open, replaces it if it may. */
  #wire(slot: Slot, index: number): void {
    slot.worker.on(
      'message',
      (m: {
        id: number;
        flags?: Uint8Array;
        slice?: SliceResult;
        nice?: number | null;
        idle?: boolean | null;
        snap?: SnapshotReply;
        error?: string;
      }) => {
        slot.inFlight--;
        const w = this.#waiters.get(m.id);
        if (!w) return;
        this.#waiters.delete(m.id);
        if (m.error !== undefined) w.reject(new Error(`worker: ${m.error}`));
        else if (m.nice !== undefined) w.resolve({ nice: m.nice, idle: m.idle ?? null } satisfies BootScheduling);
        else w.resolve(m.flags ?? m.slice ?? m.snap);
      },
    );
    slot.worker.on('error', (e) => this.#rejectAll(slot, e));
    // A worker that ended (terminate(), or process.exit in it) never answers what it still had;
    // the other workers' jobs are theirs to answer.
    slot.worker.on('exit', (code) => {
      slot.exited = new Error(`worker: exited (code ${code})`);
      this.#rejectAll(slot, new Error(`worker: exited (code ${code}) before it answered`));
      if (this.#closed) return;
      const replaced = this.#replacements > 0;
      if (replaced) {
        this.#replacements--;
        const fresh: Slot = { worker: this.#spawn(), inFlight: 0 };
        this.#slots[index] = fresh;
        this.#wire(fresh, index);
      }
      this.#onExit?.({ index, code, replaced });
    });
  }

  /** Whether a worker of the pool has exited (it answers nothing more: a pool kept for later use should be replaced). */
  get exited(): boolean {
    return this.#slots.some((s) => s.exited !== undefined);
  }

  /** Rejects every job in flight on `slot`'s worker with `e`. */
  #rejectAll(slot: Slot, e: Error): void {
    for (const [id, w] of this.#waiters) {
      if (w.slot !== slot) continue;
      this.#waiters.delete(id);
      w.reject(e);
    }
  }

  /**
   * Starts `n` workers (n ≥ 1) and waits until each is online. With `nice` (1–19, Linux), each
   * worker thread lowers its own scheduling priority to it (setpriority on its thread id), so
   * background work (a snapshot's replay) yields the cores to the decision path; elsewhere, or
   * when the system refuses, the worker runs at the normal priority. With `idle` (Linux, glibc),
   * each also enters the SCHED_IDLE class (sched_setscheduler(2) on itself, through koffi) once its
   * modules have loaded (not before: see node/worker.mjs): it then runs only where no other thread
   * wants a core and yields at once to one that wakes; where that is refused, it keeps its nice
   * ({@link bootScheduling} tells). A worker that exits (terminated by {@link close}, or crashed)
   * rejects the jobs it still had; while the pool is open it is then replaced when
   * `opts.replace` allows, and `opts.onExit` is told either way.
   */
  static async start(n: number, opts: PoolOptions = {}): Promise<WorkerPool> {
    // In the sources this module is node/workers.ts and its entry node/worker.ts (run through tsx);
    // in the build it is dist/node/workers.js and its entry dist/node/worker.js. The boot script
    // is plain JavaScript in node/ either way.
    const sources = import.meta.url.endsWith('.ts');
    const boot = new URL(sources ? './worker.mjs' : '../../node/worker.mjs', import.meta.url);
    const entry = new URL(sources ? './worker.ts' : './worker.js', import.meta.url).href;
    const spawn = () =>
      new Worker(boot, {
        workerData: { entry, ...(opts.nice !== undefined ? { nice: opts.nice } : {}), ...(opts.idle === true ? { idle: true } : {}) },
      });
    const workers = Array.from({ length: n }, spawn);
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            w.once('online', () => resolve());
            w.once('error', reject);
          }),
      ),
    );
    return new WorkerPool(workers, spawn, opts);
  }

  /** Number of workers. */
  get size(): number {
    return this.#slots.length;
  }

  /**
   * Whether `sig` is `did`'s Ed25519 signature of `msg` (§11 caller signature). Checks asked for
   * in one event-loop turn go to the workers as one batch.
   */
  verify(did: string, msg: Uint8Array, sig: Uint8Array): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      this.#batch.push({ did, msg, sig });
      this.#batchWaiters.push(resolve);
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const jobs = this.#batch;
    const waiters = this.#batchWaiters;
    this.#batch = [];
    this.#batchWaiters = [];
    if (jobs.length === 0) return;
    // Chunks of at most VERIFY_CHUNK, spread over the workers: the first chunk's results come back
    // (and are decided on this thread) while a worker verifies the next one.
    const parts = Math.max(this.#slots.length, Math.ceil(jobs.length / VERIFY_CHUNK));
    const per = Math.ceil(jobs.length / parts);
    for (let p = 0; p < parts && p * per < jobs.length; p++) {
      const b = jobs.slice(p * per, (p + 1) * per);
      const w = waiters.slice(p * per, (p + 1) * per);
      const answer = (flags: Uint8Array) => {
        for (let i = 0; i < w.length; i++) w[i]!(flags[i] === 1);
      };
      // A batch whose worker exited (or that no worker can take) is checked here instead: a
      // worker lost must not turn good signatures into bad-signature denials.
      this.#send<Uint8Array>({ t: 'verify', id: 0, jobs: b }).then(answer, () => answer(verifyJobs(b)));
    }
  }

  /** Replays one log slice on a worker; the receipts travel packed in one transferred buffer. */
  replaySlice(job: SliceJob): Promise<SliceResult> {
    const { packed, ends } = packReceipts(job.receipts);
    const msg: WorkerJob = { t: 'replay', id: 0, packed, ends, seqs: job.seqs, steward: job.steward, start: job.start };
    return this.#send<SliceResult>(msg, [packed.buffer as ArrayBuffer, ends.buffer as ArrayBuffer]);
  }

  /** Sends `job` to `to` (default: the worker with the fewest jobs in flight). */
  #send<T>(job: WorkerJob, transfer: ArrayBuffer[] = [], to?: Slot): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('worker pool is closed'));
    const id = this.#nextId++;
    // A worker that exited never answers: not chosen, and a message for it alone is refused at
    // once instead of waiting for ever.
    let slot = to ?? this.#slots.find((s) => s.exited === undefined) ?? this.#slots[0]!;
    if (to === undefined) for (const s of this.#slots) if (s.exited === undefined && s.inFlight < slot.inFlight) slot = s;
    if (slot.exited !== undefined) return Promise.reject(slot.exited);
    slot.inFlight++;
    return new Promise<T>((resolve, reject) => {
      this.#waiters.set(id, { resolve: resolve as (v: unknown) => void, reject, slot });
      slot.worker.postMessage({ ...job, id }, transfer);
    });
  }

  /**
   * Sends one message of a snapshot session (node/snapshotjob.ts) to the first worker, which
   * holds the session's state; `transfer` lists buffers handed over without a copy.
   * @throws (rejects with) Error `worker: …` when the worker answered with an error.
   */
  snapshotJob(job: SnapshotJob, transfer: ArrayBuffer[] = []): Promise<SnapshotReply> {
    return this.#send<SnapshotReply>(job, transfer, this.#slots[0]);
  }

  /**
   * The scheduling priority (nice) each worker had once its modules had loaded, in worker order
   * (null where it cannot be read). With `nice` at start, that is the priority asked: the boot
   * script lowers it before loading anything.
   */
  async bootNices(): Promise<Array<number | null>> {
    return (await this.bootScheduling()).map((s) => s.nice);
  }

  /**
   * How each worker is scheduled, in worker order: the nice it had once its modules had loaded
   * (the boot script sets it before loading anything) and whether it is in the SCHED_IDLE class
   * (set right after they loaded). With `nice` / `idle` at start, that is what was asked where the
   * system allowed it.
   */
  async bootScheduling(): Promise<BootScheduling[]> {
    return Promise.all(this.#slots.map((slot) => this.#send<BootScheduling>({ t: 'nice', id: 0 }, [], slot)));
  }

  /** Stops every worker. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
  }
}
