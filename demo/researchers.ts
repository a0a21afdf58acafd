/**
 * The orchestrator's side of the demo's researcher agent (the process script is
 * `researcher.ts`): spawns it with an IPC channel, learns its did:key and A2A base url (`hello`),
 * tells it where its bridge goes (`go`), and keeps what it reports: each tool call it made under a
 * delegated chain and each task it finished (with the chain it was handed).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Did } from '../core/index.ts';
import { agentEnvironment, scriptArgv, stopChild, track } from '../testkit/index.ts';
import type { FromResearcher, ResearcherCall, ToResearcher } from './messages.ts';

/** The researcher script beside this module: `researcher.ts` in the sources, `researcher.js` in the build. */
const RESEARCHER_SCRIPT = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './researcher.ts' : './researcher.js', import.meta.url));

/** A task the researcher finished, as it reported it. */
export type ResearcherTask = Extract<FromResearcher, { type: 'task' }>;

/** The researcher process and what it reported. */
export class ResearcherProc {
  readonly child: ChildProcess;
  did: Did | undefined;
  /** Its A2A base url (the agent card at `/.well-known/agent-card.json`). */
  url: string | undefined;
  ready = false;
  readonly calls: ResearcherCall[] = [];
  readonly tasks: ResearcherTask[] = [];
  failure: string | undefined;
  stderr = '';
  readonly #waiters = new Set<() => void>();

  /**
   * Spawns the researcher; `demoDir` goes on its command line only so `ps` tells which demo it
   * belongs to. It serves on 127.0.0.1:`port` (0: any free port; its `hello` says which).
   */
  constructor(demoDir: string, onCall: (c: ResearcherCall) => void, port = 0) {
    this.child = spawn(process.execPath, [...scriptArgv(RESEARCHER_SCRIPT), demoDir, String(port)], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      // An agent: only what a process needs, never the user's secrets (testkit agentEnvironment).
      env: agentEnvironment(),
    });
    track(this.child);
    this.child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-4000);
    });
    this.child.on('message', (m: FromResearcher) => {
      if (m.type === 'hello') {
        this.did = m.did;
        this.url = m.url;
      } else if (m.type === 'ready') this.ready = true;
      else if (m.type === 'call') {
        this.calls.push(m);
        onCall(m);
      } else if (m.type === 'task') this.tasks.push(m);
      else this.failure = `researcher: ${m.message}`;
      this.#notify();
    });
    this.child.once('exit', (code, signal) => {
      this.failure ??= `the researcher exited (${signal ?? code})${this.stderr ? `: ${this.stderr.trim().slice(-500)}` : ''}`;
      this.#notify();
    });
  }

  #notify(): void {
    for (const w of this.#waiters) w();
  }

  async #until<T>(get: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = get();
      if (v !== undefined) return v;
      if (this.failure !== undefined) throw new Error(this.failure);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`researcher: no ${what} within ${timeoutMs} ms${this.stderr ? `: ${this.stderr.trim().slice(-500)}` : ''}`);
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

  /** Its did:key and A2A base url (from its `hello`). */
  async hello(timeoutMs = 60_000): Promise<{ did: Did; url: string }> {
    const did = await this.#until(() => this.did, 'hello', timeoutMs);
    return { did, url: this.url! };
  }

  /** Sends `go` and resolves once its bridge is up. */
  async go(m: Extract<ToResearcher, { type: 'go' }>, timeoutMs = 60_000): Promise<void> {
    if (this.child.connected) this.child.send(m, () => undefined);
    await this.#until(() => (this.ready ? true : undefined), 'ready', timeoutMs);
  }

  /** Asks it to stop, then ends the process (SIGTERM, SIGKILL after a grace period). */
  async stop(): Promise<void> {
    if (this.child.connected) this.child.send({ type: 'stop' } satisfies ToResearcher, () => undefined);
    await stopChild(this.child, 3_000);
  }
}
