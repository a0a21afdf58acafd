/**
 * The orchestrator's side of the demo's agent workers: each worker is a separate process
 * (`node dist/demo/worker.js`, or `demo/worker.ts` through tsx from the sources) with an IPC channel; this module spawns it, keeps
 * the running tally the progress lines show (µJ spent of budget per lane, calls allowed and
 * refused), and turns its messages into promises (`hello`, `checkpoint`, `done`).
 *
 * The tally is what the worker saw; the final report counts from the verified receipts instead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Did, Uj } from '../core/index.ts';
import { agentEnvironment, scriptArgv, stopChild, track } from '../testkit/index.ts';
import type { CallEvent, DelegatedEvent, FromWorker, Lane, ToWorker } from './messages.ts';

/** The worker script beside this module: `worker.ts` in the sources, `worker.js` in the build. */
const WORKER_SCRIPT = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js', import.meta.url));

/** What a worker's checkpoint message carries (hex). */
export interface CheckpointMsg {
  readonly checkpoint: string;
  readonly receipt: string;
  readonly node: string;
}

/** How a worker ended. */
export type WorkerEnd = 'budget-exceeded' | 'revoked' | 'stopped';

/** Per-lane tally (µJ). */
export interface LaneTally {
  spentUj: Uj;
  /** µJ spent under grants this lane no longer uses (a steered grant), plus the current grant's budget. */
  capUj: Uj;
  /** Spend under the current grant. */
  grantSpentUj: Uj;
  grantId: string;
}

/** A worker process and its running tally. */
export class WorkerProc {
  readonly name: string;
  readonly child: ChildProcess;
  did: Did | undefined;
  allowed = 0;
  refused = 0;
  readonly denies = new Map<string, number>();
  readonly lanes: Record<Lane, LaneTally> = {
    files: { spentUj: 0n, capUj: 0n, grantSpentUj: 0n, grantId: '' },
    memory: { spentUj: 0n, capUj: 0n, grantSpentUj: 0n, grantId: '' },
  };
  readonly calls: CallEvent[] = [];
  /** The planner's A2A task to the researcher and its answer (the planner only). */
  delegated: DelegatedEvent | undefined;
  end: WorkerEnd | undefined;
  failure: string | undefined;
  stderr = '';
  /** Bumped on every call, so a progress printer can tell whether anything changed. */
  version = 0;
  readonly #waiters = new Set<() => void>();
  #checkpoint: CheckpointMsg | undefined;
  readonly #onCall: (w: WorkerProc, e: CallEvent) => void;

  /** Spawns worker `name`; `demoDir` goes on its command line only so `ps` tells which demo it belongs to. */
  constructor(name: string, demoDir: string, onCall: (w: WorkerProc, e: CallEvent) => void) {
    this.name = name;
    this.#onCall = onCall;
    this.child = spawn(process.execPath, [...scriptArgv(WORKER_SCRIPT), name, demoDir], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      // An agent: only what a process needs, never the user's secrets (testkit agentEnvironment).
      env: agentEnvironment(),
    });
    track(this.child);
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-4000);
    });
    this.child.on('message', (m: FromWorker) => this.#on(m));
    this.child.once('exit', (code, signal) => {
      if (this.end === undefined && this.failure === undefined) {
        this.failure = `worker ${name} exited (${signal ?? code}) before it finished${this.stderr ? `: ${this.stderr.trim().slice(-500)}` : ''}`;
      }
      this.#notify();
    });
  }

  #notify(): void {
    for (const w of this.#waiters) w();
  }

  #on(m: FromWorker): void {
    switch (m.type) {
      case 'hello':
        this.did = m.did;
        break;
      case 'call': {
        this.calls.push(m);
        const t = this.lanes[m.lane];
        if (m.grant_id !== t.grantId) {
          // First call under a grant (or a continuation): the cap becomes spent-so-far + its budget.
          t.grantId = m.grant_id;
          t.grantSpentUj = 0n;
          t.capUj = t.spentUj + BigInt(m.budget_uj);
        }
        if (m.verdict === 'allow') {
          this.allowed++;
          t.spentUj += BigInt(m.cost_uj);
          t.grantSpentUj += BigInt(m.cost_uj);
        } else {
          this.refused++;
          const r = m.reason ?? 'deny';
          this.denies.set(r, (this.denies.get(r) ?? 0) + 1);
        }
        this.version++;
        this.#onCall(this, m);
        break;
      }
      case 'checkpoint':
        this.#checkpoint = { checkpoint: m.checkpoint, receipt: m.receipt, node: m.node };
        break;
      case 'resumed':
        break;
      case 'delegated':
        this.delegated = m;
        this.version++;
        break;
      case 'done':
        this.end = m.status;
        break;
      case 'failed':
        this.failure = `worker ${this.name}: ${m.message}`;
        break;
    }
    this.#notify();
  }

  /** Sends a message (ignored once the worker is gone). */
  send(m: ToWorker): void {
    // With a callback, a channel that closes meanwhile (EPIPE) is reported there, not as an 'error' event.
    if (this.child.connected) this.child.send(m, () => undefined);
  }

  async #until<T>(get: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = get();
      if (v !== undefined) return v;
      if (this.failure !== undefined) throw new Error(this.failure);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `worker ${this.name}: no ${what} within ${timeoutMs} ms${this.stderr ? `: ${this.stderr.trim().slice(-500)}` : ''}`,
        );
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.#waiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
  }

  /** The worker's did:key (from its `hello`). */
  hello(timeoutMs = 60_000): Promise<Did> {
    return this.#until(() => this.did, 'hello', timeoutMs);
  }

  /** The next checkpoint the worker sends (asks for one first). */
  async checkpoint(timeoutMs = 20_000): Promise<CheckpointMsg> {
    this.#checkpoint = undefined;
    this.send({ type: 'checkpoint' });
    return await this.#until(() => this.#checkpoint, 'checkpoint', timeoutMs);
  }

  /** The planner's A2A task once it has an answer. */
  delegation(timeoutMs: number): Promise<DelegatedEvent> {
    return this.#until(() => this.delegated, 'answer to its A2A task', timeoutMs);
  }

  /** Resolves once the worker reported how it ended. */
  done(timeoutMs: number): Promise<WorkerEnd> {
    return this.#until(() => this.end, 'end', timeoutMs);
  }

  /** True while the worker still works. */
  get running(): boolean {
    return this.end === undefined && this.failure === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Asks the worker to stop, then ends the process (SIGTERM, SIGKILL after a grace period). */
  async stop(): Promise<void> {
    this.send({ type: 'stop' });
    await stopChild(this.child, 3_000);
  }
}
