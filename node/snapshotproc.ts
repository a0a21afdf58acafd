/**
 * A running node's snapshot built in a process of its own (config `snapshot.builder: process`,
 * docs/node.md "Snapshots"): the same session as the snapshot worker thread (node/snapshotjob.ts),
 * carried over a Node IPC channel (structured-clone serialization, so the receipts travel as typed
 * arrays). Every thread of the process runs at nice 19, and in the SCHED_IDLE class when asked
 * (node/snapshotproc.mjs). Unlike a worker thread, the process shares no lock with the node's main
 * thread (libuv's thread pool, a message port), so its class cannot stall the decisions while it
 * waits for a core holding one.
 *
 * The process gets the steward's seed over the channel (it signs the snapshot), and nothing else of
 * the node's: an environment of PATH, HOME and the locale only (`stdioEnvironment`), and none of the
 * node's open files (marked close-on-exec before the spawn, io/cloexec.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bindCloseOnExec, markCloseOnExec } from '../io/index.ts';
import { stdioEnvironment } from './endpoint.ts';
import type { SnapshotProcessJob, SnapshotProcessReply } from './snapshotchild.ts';
import type { SnapshotJob, SnapshotReply } from './snapshotjob.ts';
import type { BootScheduling } from './workers.ts';

type Waiter = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** One snapshot process: kept between snapshots by the node (node/snapshot.ts `Snapshotter`), ended by {@link close}. */
export class SnapshotProcess {
  readonly #child: ChildProcess;
  readonly #waiters = new Map<number, Waiter>();
  #nextId = 1;
  #exited: Error | undefined;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (m: SnapshotProcessReply) => {
      const w = this.#waiters.get(m.id);
      if (w === undefined) return;
      this.#waiters.delete(m.id);
      if ('error' in m) w.reject(new Error(`worker: ${m.error}`));
      else if ('snap' in m) w.resolve(m.snap);
      else w.resolve({ nice: m.nice, idle: m.idle } satisfies BootScheduling);
    });
    child.on('error', (e) => this.#end(new Error(`worker: the snapshot process failed: ${e.message}`)));
    child.on('exit', (code, signal) =>
      this.#end(new Error(`worker: the snapshot process exited (${signal ?? `code ${code}`}) before it answered`)),
    );
  }

  #end(e: Error): void {
    this.#exited ??= e;
    for (const w of this.#waiters.values()) w.reject(e);
    this.#waiters.clear();
  }

  /** Whether the process has ended (or failed): it answers nothing more, and a kept one should be replaced. */
  get exited(): boolean {
    return this.#exited !== undefined;
  }

  /**
   * Starts the process and waits until its IPC channel answers. `idle`: every thread also in the
   * SCHED_IDLE class (Linux, glibc; where refused, nice 19 only: {@link bootScheduling} tells).
   * @throws Error `worker: cannot start the snapshot process: <why>` when it cannot be started
   *   (e.g. `spawn … EMFILE`), or `worker: the snapshot process exited …` when it ends before it answers.
   */
  static async start(opts: { readonly idle?: boolean } = {}): Promise<SnapshotProcess> {
    // In the sources this module is node/snapshotproc.ts and its entry node/snapshotchild.ts (run
    // through tsx); in the build, dist/node/snapshotproc.js and dist/node/snapshotchild.js. The boot
    // script is plain JavaScript in node/ either way.
    const sources = import.meta.url.endsWith('.ts');
    const boot = new URL(sources ? './snapshotproc.mjs' : '../../node/snapshotproc.mjs', import.meta.url);
    const entry = new URL(sources ? './snapshotchild.ts' : './snapshotchild.js', import.meta.url).href;
    // PATH and HOME, the locale, and its own two: as little of the node's environment as a stdio upstream gets.
    const base: Record<string, string> = {};
    for (const k of ['PATH', 'HOME']) if (process.env[k] !== undefined) base[k] = process.env[k]!;
    const env = stdioEnvironment(base, { JCP_SNAPSHOT_ENTRY: entry, ...(opts.idle === true ? { JCP_SNAPSHOT_IDLE: '1' } : {}) });
    await bindCloseOnExec();
    markCloseOnExec();
    const child = spawn(process.execPath, [fileURLToPath(boot)], {
      env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    if (child.pid === undefined) {
      // Not started (out of file handles, no such binary): spawn says why on its 'error' event, next tick.
      const why = await new Promise<Error>((resolve) => child.once('error', resolve));
      throw new Error(`worker: cannot start the snapshot process: ${why.message}`);
    }
    const p = new SnapshotProcess(child);
    try {
      await p.bootScheduling();
    } catch (e) {
      await p.close();
      throw e;
    }
    return p;
  }

  /** The process id (undefined when it could not be started). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  #send<T>(job: SnapshotProcessJob): Promise<T> {
    if (this.#exited !== undefined) return Promise.reject(this.#exited);
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#waiters.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#child.send({ ...job, id }, (e) => {
        if (e == null) return;
        this.#waiters.delete(id);
        reject(new Error(`worker: cannot reach the snapshot process: ${e.message}`));
      });
    });
  }

  /**
   * Sends one message of a snapshot session (node/snapshotjob.ts); `_transfer` is ignored (the
   * channel copies).
   * @throws (rejects with) Error `worker: …` when the process answered with an error or ended.
   */
  snapshotJob(job: SnapshotJob, _transfer: ArrayBuffer[] = []): Promise<SnapshotReply> {
    return this.#send<SnapshotReply>(job);
  }

  /** How the process's main thread is scheduled: its nice and whether it is in the SCHED_IDLE class (null: unknown). */
  async bootScheduling(): Promise<BootScheduling[]> {
    return [await this.#send<BootScheduling>({ t: 'nice', id: 0 })];
  }

  /** Ends the process (SIGKILL: it holds nothing that needs a clean stop) and waits for its exit. */
  async close(): Promise<void> {
    const child = this.#child;
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}
