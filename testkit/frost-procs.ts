/**
 * Threshold participants as separate processes (spec §2.2, C18): each runs
 * `jcp frost participant` (or a test fixture with the same output) on its own keystore, and
 * reports JSON events on stdout, which this launcher collects so callers can wait for
 * `ready`, `dkg-complete`, `dkg-aborted`… Every child is tracked and killed if the parent exits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Did } from '../core/index.ts';
import { deal, FrostError, shareRecord, writeShareFile } from '../frost/index.ts';
import { agentEnvironment, JCP_BIN, killChild, scriptArgv, stopChild, track } from './procs.ts';

const ROOT = resolve(dirname(JCP_BIN), '..');
/** The `jcp` entry point. */

/** One event line printed by a participant. */
export type ProcEvent = { readonly event: string } & Record<string, unknown>;

/** Options for {@link startParticipantProc}. */
export interface ParticipantProcOpts {
  readonly keystore: string;
  readonly natsUrl: string;
  readonly prefix: string;
  /** Run this TS file (with the same flags) instead of `jcp frost participant` (test fixtures). */
  readonly script?: string;
  /**
   * Extra arguments (e.g. `--passphrase-env VAR`). A participant needs an approval policy: when
   * these give no `--approve`, the launcher adds `--approve allow-all` (sign what is asked, each
   * decision recorded), so tests of DKG and signing mechanics need not name one.
   */
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /** Give the child a writable stdin (`child.stdin`), for `--approve prompt`; default none. */
  readonly stdin?: boolean;
  /** How long to wait for the `ready` event, ms (default {@link PARTICIPANT_READY_TIMEOUT_MS}). */
  readonly readyTimeoutMs?: number;
}

/** The default wait for a participant's `ready` event, ms. */
export const PARTICIPANT_READY_TIMEOUT_MS = 30_000;

/** A participant child process and the events it printed. */
export class ParticipantProc {
  readonly keystore: string;
  readonly child: ChildProcess;
  readonly events: ProcEvent[] = [];
  stderr = '';
  readonly #waiters = new Set<() => void>();

  constructor(keystore: string, child: ChildProcess) {
    this.keystore = keystore;
    this.child = child;
    let buf = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buf += chunk;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith('{')) continue;
        try {
          this.events.push(JSON.parse(line) as ProcEvent);
        } catch {
          continue;
        }
        for (const w of this.#waiters) w();
      }
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-20_000);
    });
    child.once('exit', () => {
      for (const w of this.#waiters) w();
    });
  }

  /** The participant's own did (from its `ready` event). */
  get did(): string {
    const r = this.events.find((e) => e.event === 'ready');
    if (!r) throw new Error('participant not ready');
    return r['did'] as string;
  }

  /** True while the process runs. */
  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Resolves with the first event (already seen or future) that satisfies `pred`.
   * @throws Error on timeout, or if the process exits first.
   */
  async waitFor(pred: (e: ProcEvent) => boolean, what: string, timeoutMs = 20_000): Promise<ProcEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.events.find(pred);
      if (hit) return hit;
      if (!this.running) throw new Error(`participant ${this.keystore} exited before ${what}: ${this.stderr.slice(-2000)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} from ${this.keystore}: ${this.stderr.slice(-2000)}`);
      await new Promise<void>((res) => {
        const done = () => {
          clearTimeout(t);
          this.#waiters.delete(done);
          res();
        };
        const t = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
  }

  /** SIGKILL (a crash). */
  async kill(): Promise<void> {
    await killChild(this.child);
  }

  /** SIGTERM, then SIGKILL after a grace period. */
  async stop(): Promise<void> {
    await stopChild(this.child);
  }
}

/**
 * Starts one participant process and waits for its `ready` event, for `readyTimeoutMs`
 * (default `opts.readyTimeoutMs`, else {@link PARTICIPANT_READY_TIMEOUT_MS}).
 * @throws Error when the child exits first or is not ready in time; the child is then stopped
 *   (SIGTERM, then SIGKILL), so nothing is left running and no pipe keeps the caller alive.
 */
export async function startParticipantProc(
  opts: ParticipantProcOpts,
  readyTimeoutMs = opts.readyTimeoutMs ?? PARTICIPANT_READY_TIMEOUT_MS,
): Promise<ParticipantProc> {
  const args = opts.args ?? [];
  const policy = args.some((a) => a === '--approve' || a.startsWith('--approve=')) ? [] : ['--approve', 'allow-all'];
  const flags = ['--keystore', opts.keystore, '--nats', opts.natsUrl, '--prefix', opts.prefix, ...args, ...policy];
  const argv = opts.script ? [...scriptArgv(opts.script), ...flags] : [JCP_BIN, 'frost', 'participant', ...flags];
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    // Only what a process needs and its own variables: never the caller's secrets (testkit/procs.ts).
    env: agentEnvironment(opts.env),
  });
  track(child);
  const p = new ParticipantProc(opts.keystore, child);
  try {
    await p.waitFor((e) => e.event === 'ready', 'ready', readyTimeoutMs);
  } catch (e) {
    await p.stop();
    throw e;
  }
  return p;
}

/** A set of participant processes sharing a temp folder, each with its own keystore. */
export class ParticipantCluster {
  readonly dir: string;
  readonly procs: ParticipantProc[];
  readonly #ownsDir: boolean;

  private constructor(dir: string, ownsDir: boolean, procs: ParticipantProc[]) {
    this.dir = dir;
    this.#ownsDir = ownsDir;
    this.procs = procs;
  }

  /**
   * Starts `n` participants (keystores `<dir>/p1..pn`) in parallel; `dir` defaults to a temp
   * folder. `argsFor(i)` (0-based) adds arguments of participant i's own (its approval policy).
   */
  static async start(
    n: number,
    base: Omit<ParticipantProcOpts, 'keystore'>,
    dir?: string,
    argsFor?: (i: number) => readonly string[],
  ): Promise<ParticipantCluster> {
    const ownsDir = dir === undefined;
    const root = dir ?? mkdtempSync(join(tmpdir(), 'jcp-frost-'));
    mkdirSync(root, { recursive: true });
    const started = await Promise.allSettled(
      Array.from({ length: n }, (_, i) =>
        startParticipantProc({ ...base, keystore: join(root, `p${i + 1}`), args: [...(base.args ?? []), ...(argsFor?.(i) ?? [])] }),
      ),
    );
    const procs = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s) => s.status === 'rejected');
    const c = new ParticipantCluster(root, ownsDir, procs);
    if (failed) {
      await c.dispose();
      throw (failed as PromiseRejectedResult).reason;
    }
    return c;
  }

  /** Stops every process and removes the temp folder (if this launcher made it). */
  async dispose(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop()));
    if (this.#ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A dealt threshold group whose holders run as participant processes. */
export interface DealtGroup {
  /** The group's did:key (sign with `thresholdSigner({nc, group: did, prefix})`). */
  readonly did: Did;
  readonly prefix: string;
  readonly cluster: ParticipantCluster;
  /** Stops the holders and removes their keystores. */
  dispose(): Promise<void>;
}

/**
 * Deals a `min`-of-`max` group and starts one participant process per holder, of which only the
 * first `online` (default all) are started. For conformance classes and tests that need a
 * threshold actor (C13): `thresholdSigner({nc, group: g.did, prefix: g.prefix})` then signs.
 */
export async function startDealtGroup(opts: {
  min: number;
  max: number;
  natsUrl: string;
  prefix?: string;
  online?: number;
}): Promise<DealtGroup> {
  const d = deal({ min: opts.min, max: opts.max }, (n) => new Uint8Array(randomBytes(n)));
  if (!d.ok) throw FrostError.of(d.error);
  const prefix = opts.prefix ?? `jcp.frost.group.${randomBytes(5).toString('hex')}`;
  const root = mkdtempSync(join(tmpdir(), 'jcp-frost-group-'));
  const online = opts.online ?? opts.max;
  for (const s of d.value.shares.slice(0, online)) {
    const dir = join(root, `p${s.identifier}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeShareFile(join(dir, `participant-${s.identifier}.share`), shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed));
  }
  let cluster: ParticipantCluster;
  try {
    cluster = await ParticipantCluster.start(online, { natsUrl: opts.natsUrl, prefix }, root);
  } catch (e) {
    rmSync(root, { recursive: true, force: true });
    throw e;
  }
  return {
    did: d.value.did,
    prefix,
    cluster,
    async dispose() {
      await cluster.dispose();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
