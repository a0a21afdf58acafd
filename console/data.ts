/**
 * What the audit console shows (docs/console.md), computed read-only from stopped nodes' data
 * folders and the transparency-log stream:
 *
 * - per node: receipts, allowed, refused by deny reason (§8.1 receipts, each verified under the
 *   steward's key), per-(grant, worker) attribution exactly as `jcp receipts attribute` computes
 *   it (node/replay.ts `replayLog` with measurements), each grant's budget, spend and what is
 *   left (µJ), decisions per minute of `at`, and the log's tree size and root (RFC 9162);
 * - the grant tree over every node: root → delegations and shards (from the receipts' `chain_ids`
 *   and the signed shard assignments), each grant's spend (µJ, net of refunds, summed over the
 *   points that spent on it) and what is left, and the points it was spent at;
 * - budget channels: each point's latest settled statement, spend against the budget and the
 *   overdraft bound, the proven overdraft (the figures of `jcp channel audit`);
 * - the transparency log: each node's latest checkpoint on the stream, its cosigners, alarms;
 * - a receipt inspector: a receipt's fields, whether it verifies, and its inclusion proof in its
 *   node's log checked against the log's root.
 * All amounts are µJ as decimal strings (uint64 does not fit a JS number).
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { ContentId, Did, Uj } from '../core/index.ts';
import { isJcpError, overdraftBound } from '../core/index.ts';
import { auditChannel, channelAuditJson, type StatementBus } from '../channel/index.ts';
import { decodeShardAssignment, ShardAssignmentStream, ShardBindings } from '../shards/index.ts';
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
  /** µJ charged: the allows' debits net of the refunds of their reversals (Σ `charged_uj` of `jcp receipts attribute`). */
  readonly debited_uj?: string;
  readonly attribution?: readonly AttributionRow[];
  readonly grants?: ReadonlyArray<{ grant_id: string; budget_uj: string; spent_uj: string; left_uj: string }>;
  readonly per_minute?: ReadonlyArray<{ minute: number; allowed: number; refused: number }>;
  readonly tree?: { readonly size: number; readonly root: string };
}

/**
 * One grant of the grant tree, in depth-first order from its root (`depth` 0). `kind`: `root` (no
 * parent in any chain), `shard` (a child the holder's signed assignment binds to `shard_point`),
 * `delegation` (any other child). `budget_uj` is known for a leaf (from its receipts) or a channel
 * grant whose signed grant is on the stream, else null, and then `left_uj` is null too. `spent_uj`
 * is Σ over the points of each point's replayed ledger (µJ, refunds credited back); `points` lists
 * them, with `settled_uj` the point's latest settled statement when the grant is a channel.
 */
export interface GrantNode {
  readonly grant_id: ContentId;
  readonly parent: ContentId | null;
  readonly depth: number;
  readonly kind: 'root' | 'delegation' | 'shard';
  readonly issuer: Did | null;
  readonly subject: Did | null;
  readonly budget_uj: string | null;
  readonly spent_uj: string;
  readonly left_uj: string | null;
  readonly shard_point?: Did;
  readonly channel: boolean;
  readonly points: ReadonlyArray<{ readonly steward: Did; readonly spent_uj: string; readonly settled_uj?: string }>;
}

/**
 * A budget channel's ledger: exactly `jcp channel audit --json`'s fields, plus the configured
 * per-point window (µJ; `--channel grant=window`), the overdraft bound Σ windows − the smallest
 * (docs/design.md "Budget channels: the bound we prove") and `max_total_uj` = budget + bound (null when
 * the window or the budget is unknown).
 */
export type ChannelView = ReturnType<typeof channelAuditJson> & {
  readonly window_uj: string | null;
  readonly bound_uj: string | null;
  readonly max_total_uj: string | null;
};

/** The whole console state (`/api/state`). */
export interface ConsoleState {
  readonly at_s: number;
  readonly nodes: readonly NodeView[];
  readonly grant_tree: readonly GrantNode[];
  /** The channels' ledgers, `{error}` when the statement stream cannot be read, null without `--nats`. */
  readonly channels: readonly ChannelView[] | { readonly error: string } | null;
  /** Why the shard assignments are not shown (no stream yet, NATS unreachable), when they are not. */
  readonly shards_error?: string;
  readonly tlog: (WitnessAudit & { readonly error?: undefined }) | { readonly error: string } | null;
}

/** What one node's folder adds to the grant tree: its chains, its leaves, and its ledger's spend per grant id. */
interface NodeFacts {
  readonly steward: Did;
  /** Every chain its receipts name, root first. */
  readonly chains: ReadonlyArray<readonly ContentId[]>;
  readonly leaves: ReadonlyMap<ContentId, { issuer: Did; subject: Did; budget: Uj }>;
  readonly spent: (id: ContentId) => Uj;
}

/** Sources beside the data folders, all read-only. */
export interface ConsoleSources {
  /** The statement stream: budget channels (the audit of `jcp channel audit`). */
  readonly statements?: StatementBus;
  /** A NATS connection and subject root to read the shard assignments from (the stream is never created). */
  readonly shards?: { readonly nc: NatsConnection; readonly root: string };
  /** Channel grants to audit even before they appear in a receipt, with their per-point window (µJ) when known. */
  readonly channels?: ReadonlyArray<{ readonly grant_id: ContentId; readonly window_uj?: Uj }>;
}

/** At most this many grant ids seen in receipts are looked up on the statement stream per read. */
const MAX_CHANNEL_PROBES = 256;

/** The console's sources: data folders, and the transparency-log stream when `--nats` was given. */
export class ConsoleData {
  readonly dirs: readonly string[];
  readonly #stream: TlogStream | undefined;
  readonly #sources: ConsoleSources;
  readonly #trees = new Map<string, MerkleTree>();
  readonly #bindings = new ShardBindings();
  #shardFollow: Promise<unknown> | undefined;
  #shardError: string | undefined;

  constructor(dirs: readonly string[], stream?: TlogStream, sources: ConsoleSources = {}) {
    this.dirs = dirs;
    this.#stream = stream;
    this.#sources = sources;
  }

  /** Reads every source now. Never throws: a source that fails is shown with its error. */
  async state(): Promise<ConsoleState> {
    const nodes: NodeView[] = [];
    const facts: NodeFacts[] = [];
    for (const d of this.dirs) {
      const n = await this.#node(d);
      nodes.push(n.view);
      if (n.facts) facts.push(n.facts);
    }
    let tlog: ConsoleState['tlog'] = null;
    if (this.#stream) {
      try {
        tlog = await witnessAudit(this.#stream);
      } catch (e) {
        tlog = { error: (e as Error).message };
      }
    }
    await this.#followShards();
    const channels = await this.#channels(facts);
    const grant_tree = grantTree(facts, this.#bindings.shards(), Array.isArray(channels) ? channels : []);
    return {
      at_s: Math.floor(Date.now() / 1000),
      nodes,
      grant_tree,
      channels,
      ...(this.#shardError !== undefined ? { shards_error: this.#shardError } : {}),
      tlog,
    };
  }

  /** Starts following the shard assignments once (read-only); a failure is kept and retried on the next read. */
  async #followShards(): Promise<void> {
    const src = this.#sources.shards;
    if (src === undefined || this.#shardFollow !== undefined) return;
    const stream = new ShardAssignmentStream(src.nc, { root: src.root, deadlineMs: 1_000 });
    const f = stream
      .watch((bytes) => {
        try {
          this.#bindings.take(decodeShardAssignment(bytes));
        } catch {
          // an undecodable assignment binds nothing (a forged one is refused by take)
        }
      })
      .then(async (w) => {
        await w.caughtUp;
        this.#shardError = undefined;
      });
    this.#shardFollow = f;
    try {
      await f;
    } catch (e) {
      this.#shardError = `shard assignments not read: ${(e as Error).message}`;
      this.#shardFollow = undefined;
    }
  }

  /** The ledgers of the channel grants: the given ones, and every grant id of a receipt that has statements on the stream. */
  async #channels(facts: readonly NodeFacts[]): Promise<ConsoleState['channels']> {
    const bus = this.#sources.statements;
    if (bus === undefined) return null;
    const windows = new Map<ContentId, Uj | undefined>((this.#sources.channels ?? []).map((c) => [c.grant_id, c.window_uj]));
    const probe = new Set<ContentId>();
    for (const f of facts) for (const c of f.chains) for (const id of c) if (probe.size < MAX_CHANNEL_PROBES) probe.add(id);
    const out: ChannelView[] = [];
    try {
      for (const id of new Set([...windows.keys(), ...probe])) {
        const a = await auditChannel(bus, id);
        if (a.lines.length === 0 && a.refused.length === 0 && !windows.has(id)) continue;
        const w = windows.get(id);
        const bound = w === undefined ? undefined : overdraftBound(a.lines.map(() => w));
        out.push({
          ...channelAuditJson(a),
          window_uj: w === undefined ? null : String(w),
          bound_uj: bound === undefined ? null : String(bound),
          max_total_uj: bound === undefined || a.budgetUj === undefined ? null : String(a.budgetUj + bound),
        });
      }
    } catch (e) {
      return { error: `statement stream: ${(e as Error).message}` };
    }
    return out;
  }

  async #node(dir: string): Promise<{ view: NodeView; facts?: NodeFacts }> {
    let meta: ReturnType<typeof readDataMeta>;
    try {
      meta = readDataMeta(dir);
    } catch (e) {
      return { view: { dir, error: { code: e instanceof NodeFault ? e.code : 'log-unreadable', why: (e as Error).message } } };
    }
    if (meta === undefined)
      return { view: { dir, error: { code: 'not-a-data-folder', why: `${dir} is not a node data folder (no node.json)` } } };
    let log: ReceiptLog;
    try {
      log = await ReceiptLog.open(dir, { steward: meta.steward, mustExist: true, nowS: 0 });
    } catch (e) {
      return {
        view: {
          dir,
          steward: meta.steward,
          error: { code: e instanceof NodeFault ? e.code : 'log-unreadable', why: (e as Error).message },
        },
      };
    }
    try {
      const byReason: Record<string, number> = {};
      const budgets = new Map<string, bigint>();
      const leaves = new Map<ContentId, { issuer: Did; subject: Did; budget: Uj }>();
      const chains = new Map<string, readonly ContentId[]>();
      const minutes = new Map<number, { allowed: number; refused: number }>();
      let allowed = 0;
      let refused = 0;
      let bad = 0;
      for await (const chunk of log.receiptChunks(4096, 0)) {
        for (const [, bytes] of chunk) {
          const r = openReceipt(bytes, meta.steward);
          if (!r.ok) {
            bad++;
            continue;
          }
          const c = r.value;
          budgets.set(c.grant_id, c.budget_uj);
          leaves.set(c.grant_id, { issuer: c.issuer, subject: c.subject, budget: c.budget_uj });
          const chain = c.chain_ids ?? [c.grant_id];
          chains.set(chain.join(' '), chain);
          const m = minutes.get(Math.floor(c.at / 60) * 60) ?? { allowed: 0, refused: 0 };
          if (c.verdict === 'allow') {
            allowed++;
            m.allowed++;
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
      // Net of refunds, as `jcp receipts attribute`'s charged_uj: a reversed call charged nothing.
      const debited = attribution.reduce((sum, a) => sum + BigInt(a.charged_uj), 0n);
      let tree: NodeView['tree'];
      try {
        const t = await buildLogTree(log);
        this.#trees.set(meta.steward, t);
        tree = { size: t.size, root: Buffer.from(t.root()).toString('hex') };
      } catch {
        tree = undefined; // archived receipts: the tree needs the segments
      }
      const ledger = r.ledger;
      const facts: NodeFacts = { steward: meta.steward, chains: [...chains.values()], leaves, spent: (id) => ledger.spent(id) };
      const view: NodeView = {
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
      return { view, facts };
    } catch (e) {
      return {
        view: {
          dir,
          steward: meta.steward,
          error: {
            code: isJcpError(e) || e instanceof NodeFault ? (e as { code: string }).code : 'log-unreadable',
            why: (e as Error).message,
          },
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

/**
 * The grant tree (see {@link GrantNode}) from the nodes' chains, the shards in force and the
 * channels' ledgers. Pure. Children are ordered by grant id; roots too.
 */
function grantTree(
  facts: readonly NodeFacts[],
  shards: ReadonlyArray<{ grant_id: ContentId; parent_id: ContentId; point: Did }>,
  channels: readonly ChannelView[],
): GrantNode[] {
  const parent = new Map<ContentId, ContentId | null>();
  const children = new Map<ContentId, Set<ContentId>>();
  for (const f of facts)
    for (const chain of f.chains)
      chain.forEach((id, i) => {
        const p = i === 0 ? null : chain[i - 1]!;
        if (!parent.has(id) || parent.get(id) === null) parent.set(id, p);
        if (p !== null) {
          const set = children.get(p) ?? new Set<ContentId>();
          set.add(id);
          children.set(p, set);
        }
      });
  const shardOf = new Map(shards.map((s) => [s.grant_id, s]));
  const channelOf = new Map(channels.map((c) => [c.grant_id, c]));
  const out: GrantNode[] = [];
  const visit = (id: ContentId, depth: number, seen: Set<ContentId>) => {
    if (seen.has(id)) return;
    seen.add(id);
    const leaf = facts.map((f) => f.leaves.get(id)).find((l) => l !== undefined);
    const ch = channelOf.get(id);
    const budget = leaf?.budget ?? (ch?.budget_uj != null ? BigInt(ch.budget_uj) : undefined);
    let spent = 0n;
    const points: Array<{ steward: Did; spent_uj: string; settled_uj?: string }> = [];
    for (const f of facts) {
      if (!f.chains.some((c) => c.includes(id))) continue;
      const s = f.spent(id);
      spent += s;
      const settled = ch?.points.find((p) => p.point === f.steward)?.spent_uj;
      points.push({ steward: f.steward, spent_uj: String(s), ...(settled !== undefined ? { settled_uj: settled } : {}) });
    }
    const sh = shardOf.get(id);
    const p = parent.get(id) ?? null;
    out.push({
      grant_id: id,
      parent: p,
      depth,
      kind: p === null ? 'root' : sh !== undefined && sh.parent_id === p ? 'shard' : 'delegation',
      issuer: leaf?.issuer ?? null,
      subject: leaf?.subject ?? null,
      budget_uj: budget === undefined ? null : String(budget),
      spent_uj: String(spent),
      left_uj: budget === undefined ? null : String(budget > spent ? budget - spent : 0n),
      ...(sh !== undefined && sh.parent_id === p ? { shard_point: sh.point } : {}),
      channel: ch !== undefined,
      points,
    });
    for (const c of [...(children.get(id) ?? [])].sort()) visit(c, depth + 1, seen);
  };
  const seen = new Set<ContentId>();
  for (const id of [...parent]
    .filter(([, p]) => p === null)
    .map(([id]) => id)
    .sort())
    visit(id, 0, seen);
  return out;
}
