/**
 * What the audit console shows (docs/console.md), computed read-only from stopped nodes' data
 * folders and the transparency-log stream:
 *
 * - per node: receipts, allowed, refused by deny reason (§8.1 receipts, each verified under the
 *   steward's key), per-(grant, worker) attribution exactly as `jcp receipts attribute` computes
 *   it (node/replay.ts `replayLog` with measurements), each grant's budget, spend and what is
 *   left (µJ), decisions per minute of `at`, and the log's tree size and root (RFC 9162);
 * - the transparency log: each node's latest checkpoint on the stream, its cosigners, alarms;
 * - a receipt inspector: a receipt's fields, whether it verifies, and its inclusion proof in its
 *   node's log checked against the log's root.
 * All amounts are µJ as decimal strings (uint64 does not fit a JS number).
 */
import type { Did } from '../core/index.ts';
import { isJcpError } from '../core/index.ts';
import { openReceipt } from '../core/index.ts';
import { leafHash, type MerkleTree, verifyInclusion } from '../core/index.ts';
import { NodeFault, ReceiptLog, readDataMeta } from '../node/index.ts';
import { replayLog } from '../node/index.ts';
import { buildLogTree } from '../node/index.ts';
import { type TlogStream, type WitnessAudit, witnessAudit } from '../node/index.ts';

/** One attribution row, as `jcp receipts attribute --json` prints it (µJ as decimal text). */
export interface AttributionRow {
  readonly grant_id: string;
  readonly subject: Did;
  readonly allowed: number;
  readonly refused: number;
  readonly uj: string;
  readonly charged_uj: string;
}

/** A node as the console shows it; `error` (with its code) when its folder cannot be read. */
export interface NodeView {
  readonly dir: string;
  readonly steward?: Did;
  readonly error?: { readonly code: string; readonly why: string };
  readonly receipts?: number;
  readonly bad?: number;
  readonly allowed?: number;
  readonly refused?: number;
  readonly refused_by_reason?: Readonly<Record<string, number>>;
  readonly debited_uj?: string;
  readonly attribution?: readonly AttributionRow[];
  readonly grants?: ReadonlyArray<{ grant_id: string; budget_uj: string; spent_uj: string; left_uj: string }>;
  readonly per_minute?: ReadonlyArray<{ minute: number; allowed: number; refused: number }>;
  readonly tree?: { readonly size: number; readonly root: string };
}

/** The whole console state (`/api/state`). */
export interface ConsoleState {
  readonly at_s: number;
  readonly nodes: readonly NodeView[];
  readonly tlog: (WitnessAudit & { readonly error?: undefined }) | { readonly error: string } | null;
}

/** The console's sources: data folders, and the transparency-log stream when `--nats` was given. */
export class ConsoleData {
  readonly dirs: readonly string[];
  readonly #stream: TlogStream | undefined;
  readonly #trees = new Map<string, MerkleTree>();

  constructor(dirs: readonly string[], stream?: TlogStream) {
    this.dirs = dirs;
    this.#stream = stream;
  }

  /** Reads every source now. Never throws: a source that fails is shown with its error. */
  async state(): Promise<ConsoleState> {
    const nodes: NodeView[] = [];
    for (const d of this.dirs) nodes.push(await this.#node(d));
    let tlog: ConsoleState['tlog'] = null;
    if (this.#stream) {
      try {
        tlog = await witnessAudit(this.#stream);
      } catch (e) {
        tlog = { error: (e as Error).message };
      }
    }
    return { at_s: Math.floor(Date.now() / 1000), nodes, tlog };
  }

  async #node(dir: string): Promise<NodeView> {
    const meta = readDataMeta(dir);
    if (meta === undefined) return { dir, error: { code: 'not-a-data-folder', why: `${dir} is not a node data folder (no node.json)` } };
    let log: ReceiptLog;
    try {
      log = await ReceiptLog.open(dir, { steward: meta.steward, mustExist: true, nowS: 0 });
    } catch (e) {
      return { dir, steward: meta.steward, error: { code: e instanceof NodeFault ? e.code : 'log-unreadable', why: (e as Error).message } };
    }
    try {
      const byReason: Record<string, number> = {};
      const budgets = new Map<string, bigint>();
      const minutes = new Map<number, { allowed: number; refused: number }>();
      let allowed = 0;
      let refused = 0;
      let bad = 0;
      let debited = 0n;
      for await (const chunk of log.receiptChunks(4096, 0)) {
        for (const [, bytes] of chunk) {
          const r = openReceipt(bytes, meta.steward);
          if (!r.ok) {
            bad++;
            continue;
          }
          const c = r.value;
          budgets.set(c.grant_id, c.budget_uj);
          const m = minutes.get(Math.floor(c.at / 60) * 60) ?? { allowed: 0, refused: 0 };
          if (c.verdict === 'allow') {
            allowed++;
            m.allowed++;
            debited += c.cost_uj;
          } else {
            refused++;
            m.refused++;
            const reason = c.deny_reason ?? 'unknown';
            byReason[reason] = (byReason[reason] ?? 0) + 1;
          }
          minutes.set(Math.floor(c.at / 60) * 60, m);
        }
      }
      const r = await replayLog(log, { steward: meta.steward, measurements: true });
      const attribution = [...r.attribution.values()].map((a): AttributionRow => {
        const refunded = r.outcomes.attribution.get(`${a.grant_id} ${a.subject}`)?.refunded_uj ?? 0n;
        return {
          grant_id: a.grant_id,
          subject: a.subject,
          allowed: a.allowed,
          refused: a.refused,
          uj: String(a.uj),
          charged_uj: String(a.uj - refunded),
        };
      });
      const grants = [...budgets].map(([grant_id, budget]) => {
        const spent = r.ledger.spent(grant_id as never);
        return { grant_id, budget_uj: String(budget), spent_uj: String(spent), left_uj: String(budget > spent ? budget - spent : 0n) };
      });
      let tree: NodeView['tree'];
      try {
        const t = await buildLogTree(log);
        this.#trees.set(meta.steward, t);
        tree = { size: t.size, root: Buffer.from(t.root()).toString('hex') };
      } catch {
        tree = undefined; // archived receipts: the tree needs the segments
      }
      return {
        dir,
        steward: meta.steward,
        receipts: r.total,
        bad,
        allowed,
        refused,
        refused_by_reason: byReason,
        debited_uj: String(debited),
        attribution,
        grants,
        per_minute: [...minutes].sort((a, b) => a[0] - b[0]).map(([minute, v]) => ({ minute, ...v })),
        ...(tree ? { tree } : {}),
      };
    } catch (e) {
      return {
        dir,
        steward: meta.steward,
        error: {
          code: isJcpError(e) || e instanceof NodeFault ? (e as { code: string }).code : 'log-unreadable',
          why: (e as Error).message,
        },
      };
    } finally {
      await log.close();
    }
  }

  /**
   * The receipt inspector: decodes and verifies `hex` (a receipt's COSE_Sign1 bytes in hex) and,
   * when one of the console's nodes signed it, checks its RFC 9162 inclusion in that node's log.
   * Returns `{ok: false, code, why}` for input that is not hex (`hex-malformed`), not CBOR or not a
   * receipt (the receipt refusal code, e.g. `cbor-malformed`), or signed by no key it verifies under.
   */
  async inspect(hex: string): Promise<Record<string, unknown>> {
    const clean = hex.replace(/\s+/g, '').toLowerCase();
    if (clean.length === 0 || clean.length % 2 !== 0 || !/^[0-9a-f]+$/.test(clean)) {
      return { ok: false, code: 'hex-malformed', why: "paste the receipt's COSE_Sign1 bytes as hex (an even number of 0-9a-f digits)" };
    }
    const bytes = new Uint8Array(Buffer.from(clean, 'hex'));
    const r = openReceipt(bytes);
    if (!r.ok) return { ok: false, code: r.error.code, why: r.error.why };
    const c = r.value;
    const fields = JSON.parse(JSON.stringify(c, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))) as Record<string, unknown>;
    if (this.#trees.size === 0) await this.state();
    const t = this.#trees.get(c.steward);
    if (t === undefined)
      return { ok: true, verified: true, fields, inclusion: { checked: false, why: "no node of this console holds this steward's log" } };
    if (c.seq >= t.size)
      return {
        ok: true,
        verified: true,
        fields,
        inclusion: { checked: false, why: `seq ${c.seq} is past the log's tree of ${t.size} receipts` },
      };
    const proof = t.inclusionProof(c.seq);
    try {
      verifyInclusion(leafHash(bytes), c.seq, t.size, proof, t.root());
    } catch (e) {
      return { ok: true, verified: true, fields, inclusion: { checked: true, included: false, why: (e as Error).message } };
    }
    return {
      ok: true,
      verified: true,
      fields,
      inclusion: {
        checked: true,
        included: true,
        index: c.seq,
        size: t.size,
        root: Buffer.from(t.root()).toString('hex'),
        proof: proof.map((h) => Buffer.from(h).toString('hex')),
      },
    };
  }
}
