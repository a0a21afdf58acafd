/** Shared fixtures for the node tests: actors, grants, a live node on a loopback port, raw sockets. */
import { Worker } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll } from 'vitest';
import {
  type Actor,
  type ContentId,
  type Cost,
  type Frame,
  FrameReader,
  type Grant,
  grantId,
  newActor,
  payloadHash,
  seededRng,
  type SignedGrant,
  signGrant,
  signWireRequestSync,
  type WireRequest,
} from '../../core/index.ts';
import { configFromJson, type NodeOptions, type RunningNode, resourceIdOf, Snapshotter, startNode } from '../../node/index.ts';

/** A temp folder, removed by the returned cleanup. */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), `jcp-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A maker of temporary folders (`jcp-<prefix>-…`) for one test file, all removed after its tests
 * (vitest afterAll, registered when called at the file's top level).
 */
export function tempFolders(prefix: string): () => string {
  const cleanups: Array<() => void> = [];
  afterAll(() => {
    for (const c of cleanups) c();
  });
  return () => {
    const t = tempDir(prefix);
    cleanups.push(t.cleanup);
    return t.dir;
  };
}

/** Alice issues, bob calls, mallory attacks; deterministic keys per seed. */
export function cast(seed: string): { rng: (n: number) => Uint8Array; alice: Actor; bob: Actor; mallory: Actor; carol: Actor } {
  const rng = seededRng(`test/node/${seed}`);
  return { rng, alice: newActor(rng), bob: newActor(rng), mallory: newActor(rng), carol: newActor(rng) };
}

/** The content id of the test resource `name` (as the node config derives it). */
export const rid = (name: string): ContentId => resourceIdOf(name);

/** A root grant signed by `issuer`. */
export function mint(
  issuer: Actor,
  subject: Actor,
  resource: string,
  actions: string[],
  budgetUj: bigint,
  rng: (n: number) => Uint8Array,
  extra: Partial<Grant> = {},
): SignedGrant {
  return signGrant(
    {
      issuer: issuer.did,
      subject: subject.did,
      capability: { resource: rid(resource), actions },
      budget_uj: budgetUj,
      expiry: 0,
      nonce: rng(16),
      ...extra,
    },
    issuer,
  );
}

/** A silent logger for tests. */
export const quiet = pino({ level: 'silent' });

/** Starts a node on 127.0.0.1:0 over a fresh (or given) data folder. Config fields are the JSON ones. */
export async function liveNode(
  config: Record<string, unknown> = {},
  opts: NodeOptions = {},
  dataDir?: string,
): Promise<RunningNode & { dataDir: string; cleanup: () => Promise<void> }> {
  const t = dataDir === undefined ? tempDir('node') : undefined;
  const dir = dataDir ?? t!.dir;
  const cfg = configFromJson({
    listen: '127.0.0.1:0',
    data_dir: dir,
    resources: [{ name: 'tools' }],
    meter: { default_estimate_uj: 0, rungs: ['estimator'] },
    ...config,
  });
  let node: RunningNode;
  try {
    node = await startNode(cfg, { logger: quiet, ...opts });
  } catch (e) {
    t?.cleanup();
    throw e;
  }
  return Object.assign(node, {
    dataDir: dir,
    cleanup: async () => {
      await node.close();
      t?.cleanup();
    },
  });
}

/** A raw jcp/1 socket: write bytes, read whole reply bodies, see when the node closes it. */
export class RawConn {
  readonly sock: Socket;
  readonly #reader = new FrameReader(64 << 20);
  readonly #bodies: Uint8Array[] = [];
  #waiters: Array<() => void> = [];
  closed = false;

  private constructor(sock: Socket) {
    this.sock = sock;
    sock.on('data', (c: Buffer) => {
      for (const b of this.#reader.push(new Uint8Array(c.buffer, c.byteOffset, c.byteLength))) this.#bodies.push(b);
      this.#wake();
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  /** Connects to 127.0.0.1:`port`, from `localAddress` when given (another loopback address is another peer). */
  static open(port: number, localAddress?: string): Promise<RawConn> {
    return new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, noDelay: true, ...(localAddress ? { localAddress } : {}) });
      s.once('connect', () => resolve(new RawConn(s)));
      s.once('error', reject);
    });
  }

  write(bytes: Uint8Array): void {
    this.sock.write(bytes);
  }

  /** The next reply body; rejects if the connection closes first or after `ms`. */
  async next(ms = 10_000): Promise<Uint8Array> {
    const end = Date.now() + ms;
    for (;;) {
      const b = this.#bodies.shift();
      if (b !== undefined) return b;
      if (this.closed) throw new Error('connection closed before a reply');
      if (Date.now() > end) throw new Error('no reply in time');
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  /** Resolves once the node has closed the connection (or after `ms`, with false). */
  async waitClosed(ms = 10_000): Promise<boolean> {
    const end = Date.now() + ms;
    while (!this.closed && Date.now() < end) {
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        setTimeout(r, 50);
      });
    }
    return this.closed;
  }

  destroy(): void {
    this.sock.destroy();
  }
}

/** A request signed by `signer` (the caller by default), with the chain's leaf as the grant. */
export function request(
  signer: Actor,
  chain: readonly SignedGrant[],
  opts: {
    action?: string;
    costUj?: bigint;
    cost?: Cost;
    now?: number;
    payload?: Uint8Array;
    caller?: string;
    frame?: Partial<Frame>;
  } = {},
): WireRequest {
  const leaf = chain[chain.length - 1]!.grant;
  const payload = opts.payload;
  return signWireRequestSync(
    {
      frame: {
        kind: 'tool-call',
        trust: 'control',
        grant_id: grantId(leaf),
        action: opts.action ?? leaf.capability.actions[0]!,
        resource: leaf.capability.resource,
        payload_hash: payloadHash(payload),
        ...opts.frame,
      },
      chain,
      caller: opts.caller ?? signer.did,
      cost: opts.cost ?? { uj: opts.costUj ?? 10n, provenance: 'Estimator' },
      now: opts.now ?? Math.floor(Date.now() / 1000),
      ...(payload !== undefined ? { payload } : {}),
    },
    // Signing as someone other than the caller is how impersonation is built.
    opts.caller !== undefined && opts.caller !== signer.did ? { ...signer, did: opts.caller } : signer,
  );
}

/**
 * Catches the worker threads this process posts a message of type `t` to (e.g. `nice`, asked of
 * each pool worker by `bootScheduling`; `snap-open`, of a snapshot worker): nothing outside a pool
 * can end one of its workers, so a test that stands in for a crash terminates the one caught.
 * `restore()` puts `Worker.prototype.postMessage` back.
 */
export function catchWorkers(t: string): { readonly workers: Worker[]; restore(): void } {
  const workers: Worker[] = [];
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (this: Worker, m: unknown, transfer?: Parameters<Worker['postMessage']>[1]) {
    if ((m as { t?: string } | null)?.t === t && !workers.includes(this)) workers.push(this);
    return post.call(this, m, transfer);
  };
  return {
    workers,
    restore: () => {
      Worker.prototype.postMessage = post;
    },
  };
}

type SnapshotterOptions = ConstructorParameters<typeof Snapshotter>[0];

/**
 * A {@link Snapshotter} for a test that asks for each snapshot itself (no trigger, 2
 * kept, none covered yet, receipts durable up to `durableSeq()`); `more` adds or overrides.
 */
export function manualSnapshotter(
  o: Pick<SnapshotterOptions, 'log' | 'dataDir' | 'steward' | 'windowS' | 'clockS' | 'durableSeq' | 'logger'>,
  more: Partial<SnapshotterOptions> = {},
): Snapshotter {
  return new Snapshotter({ everyReceipts: 0, everyS: 0, keep: 2, coveredSeq: -1, ...o, ...more });
}
