/**
 * A real enforcement node for the conformance classes that §9 ties to stateful paths (C3, C4,
 * C7, C8, C14, C16, C-neg): `startNode` on a loopback port and a temporary data folder, called
 * over jcp/1 by signed clients, and read back afterwards (its live ledger, its receipt log, the
 * ledger boot replay rebuilds after a restart). The classes assert on what the node did, not on
 * a ledger of their own. Not a conformance class itself.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import {
  type Actor,
  type ContentId,
  decodeWireMessage,
  type Did,
  openReceipt,
  type ReceiptCore,
  sign,
  type WireMessage,
  wireRequestSigningBytes,
} from '../../core/index.ts';
import { type CallParams, JcpClient, WireErrorReply } from '../../client/index.ts';
import { configFromJson, type NodeOptions, resourceIdOf, type RunningNode, startNode } from '../../node/index.ts';

/** The outcome of one call: `allow`, the deny reason, or `error:<code>` (no decision, no receipt). */
export interface LiveCall {
  readonly verdict: string;
  readonly receipt?: ReceiptCore;
}

/** A node started for one class; {@link LiveNode.close} stops it and deletes its folder. */
export class LiveNode {
  /** The resource the node serves (`resourceIdOf(name)`), trust-rooted at the given issuers. */
  readonly resource: ContentId;
  readonly dir: string;
  #node: RunningNode;
  #running = true;
  readonly #clients = new Map<Did, JcpClient>();
  readonly #opts: NodeOptions;
  readonly #name: string;
  readonly #roots: readonly Did[];
  readonly #nowS: number;

  private constructor(node: RunningNode, dir: string, name: string, roots: readonly Did[], nowS: number, opts: NodeOptions) {
    this.#node = node;
    this.dir = dir;
    this.#name = name;
    this.#roots = roots;
    this.#nowS = nowS;
    this.#opts = opts;
    this.resource = resourceIdOf(name);
  }

  /**
   * Starts a node serving resource `name` (no endpoint: a pure decision point) whose only trust
   * roots are `roots`, with its clock fixed at `nowS` (unix seconds) and a 0 µJ estimate, so the
   * claimed cost is what is charged.
   */
  static async start(name: string, roots: readonly Did[], nowS: number): Promise<LiveNode> {
    const dir = mkdtempSync(path.join(tmpdir(), `jcp-conf-${name}-`));
    const opts: NodeOptions = { logger: pino({ level: 'silent' }), clockS: () => nowS };
    try {
      const node = await startNode(LiveNode.#config(dir, name, roots), opts);
      return new LiveNode(node, dir, name, roots, nowS, opts);
    } catch (e) {
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }

  static #config(dir: string, name: string, roots: readonly Did[]) {
    return configFromJson({
      listen: '127.0.0.1:0',
      data_dir: dir,
      resources: [{ name, trust_roots: [...roots] }],
      meter: { default_estimate_uj: 0, rungs: ['estimator'] },
    });
  }

  /** The running node (its ledger, log, steward). */
  get node(): RunningNode {
    return this.#node;
  }

  /** µJ the node's own ledger holds against `grantId`. */
  spent(grantId: ContentId): bigint {
    return this.#node.ledger.spent(grantId);
  }

  async #client(signer: Actor): Promise<JcpClient> {
    let c = this.#clients.get(signer.did);
    if (c === undefined) {
      c = await JcpClient.connect({ host: '127.0.0.1', port: this.#node.port, signer, clockS: () => this.#nowS });
      this.#clients.set(signer.did, c);
    }
    return c;
  }

  /**
   * Signs (as `signer`) and sends one call for the leaf of `params.chain`; by default action
   * `read`, the leaf's resource, `costUj` as an Estimator claim. Returns the verdict and the
   * opened receipt (checked under this node's steward; a receipt that does not verify is `bad-receipt`).
   * `signWith`: the key that actually signs (a forged caller signature), instead of `signer`'s.
   */
  async call(
    signer: Actor,
    params: Omit<CallParams, 'action'> & { action?: string; costUj?: bigint; signWith?: Actor },
  ): Promise<LiveCall> {
    const { costUj, signWith, ...rest } = params;
    const c = await this.#client(signer);
    try {
      let req = await c.request({ action: 'read', cost: { uj: costUj ?? 10n, provenance: 'Estimator' }, ...rest });
      if (signWith !== undefined) {
        const { signature: _, ...unsigned } = req;
        req = { ...req, signature: sign(signWith.key, wireRequestSigningBytes(unsigned)) };
      }
      const r = await c.callRequest(req);
      const opened = openReceipt(r.receipt, this.#node.did);
      if (!opened.ok) return { verdict: `bad-receipt:${opened.error.code}` };
      const verdict = r.decision.verdict === 'allow' ? 'allow' : (r.decision.deny_reason ?? 'deny');
      return { verdict, receipt: opened.value };
    } catch (e) {
      if (e instanceof WireErrorReply) return { verdict: `error:${e.code}` };
      throw e;
    }
  }

  /** Sends raw message bytes (no re-encoding) and decodes the reply. */
  async raw(signer: Actor, body: Uint8Array): Promise<WireMessage> {
    return decodeWireMessage(await (await this.#client(signer)).roundTrip(body));
  }

  /** Every receipt in the node's log, in seq order, opened under its steward (throws if one does not verify). */
  async receipts(): Promise<ReceiptCore[]> {
    const out: ReceiptCore[] = [];
    for await (const chunk of this.#node.log.receiptChunks()) {
      for (const [seq, bytes] of chunk) {
        const r = openReceipt(bytes, this.#node.did);
        if (!r.ok) throw new Error(`receipt ${seq} in the node's log does not verify: ${r.error.code}`);
        out.push(r.value);
      }
    }
    return out;
  }

  async #stop(): Promise<void> {
    for (const c of this.#clients.values()) await c.close();
    this.#clients.clear();
    if (!this.#running) return;
    this.#running = false;
    await this.#node.close();
  }

  /** Stops the node and starts it again on the same folder: its ledger is then what boot replay rebuilt (§8.1). */
  async restart(opts: Partial<NodeOptions> = {}): Promise<void> {
    await this.#stop();
    await this.start(opts);
  }

  /** Starts the (stopped) node again on the same folder. @throws NodeFault when it refuses to start. */
  async start(opts: Partial<NodeOptions> = {}): Promise<void> {
    if (this.#running) throw new Error('LiveNode: already running');
    this.#node = await startNode(LiveNode.#config(this.dir, this.#name, this.#roots), { ...this.#opts, ...opts });
    this.#running = true;
  }

  /** Stops the node (if still running) without starting it again. */
  async stop(): Promise<void> {
    await this.#stop();
  }

  /** Stops the node and deletes its data folder. */
  async close(): Promise<void> {
    try {
      await this.#stop();
    } catch {
      // already stopped
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
