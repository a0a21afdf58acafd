/**
 * Rebalancing (spec §4.5 baseline: "Rebalancing is revocation + re-issuance"):
 *
 *  1. the holder signs a revocation of every live shard (§4.3) and broadcasts it on the
 *     revocation stream, which every node follows;
 *  2. each node, once the revocation is in force there, publishes a signed close record of its
 *     final spend on the shard (shards/close.ts);
 *  3. when every point has closed every shard, the spend is summed into `consumed_uj`, and new
 *     shards are minted from what is left: budget − consumed, with core's over-sum check.
 *
 * Nothing is re-issued until every point has closed: a point that is down or cut off holds the
 * rebalance up (it fails with the points still missing; running it again resumes). Close records
 * claim at least the receipts' spend, so rebalancing never creates µJ.
 *
 * If the closed shards spent more than the parent's budget (shards that were not bound to their
 * points, shards/binding.ts, and were spent at several), nothing is re-issued: the report carries
 * the overspend (`overspentUj`) and a manifest with no live shards that records what was spent.
 */
import {
  type Actor,
  type ContentId,
  type Did,
  encode,
  err,
  grantId,
  ok,
  type Result,
  revocationId,
  type Rng,
  type ShardRefusal,
  type SignedRevocation,
  signedRevocationToCbor,
  signRevocation,
  type Uj,
} from '../core/index.ts';
import { decodeShardClose, verifyShardClose } from './close.ts';
import { type ClosedShard, mintShardSet, type ShardManifest, type SplitEntry } from './set.ts';

/** What a rebalance needs from NATS (the channel bus implements it). */
export interface RebalanceTransport {
  publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void>;
  readCloses(grantId: ContentId): Promise<Uint8Array[]>;
}

/** Options of {@link rebalance}. Times in milliseconds. */
export interface RebalanceOpts {
  readonly manifest: ShardManifest;
  /** The shards' issuer: the parent's subject. */
  readonly holder: Actor;
  readonly transport: RebalanceTransport;
  /** Every enforcement point that may have spent on the shards (their steward dids). */
  readonly points: readonly Did[];
  /** The new split; default: the live shards' names with their current shares. */
  readonly split?: readonly SplitEntry[];
  /** The new shards' subject(s); default: each live shard's subject by name. */
  readonly subject?: Did | Readonly<Record<string, Did>>;
  readonly rng: Rng;
  /** How long to wait for every close record. Default 15,000 ms. */
  readonly timeoutMs?: number;
  readonly pollMs?: number;
}

/** Why a rebalance stopped. The revocations already broadcast stay in force either way. */
export type RebalanceRefusal =
  | { readonly code: 'close-timeout'; readonly why: string; readonly missing: readonly { shard: string; point: Did }[] }
  | { readonly code: 'no-shards'; readonly why: string }
  | ShardRefusal;

/** What a rebalance did. */
export interface RebalanceReport {
  readonly manifest: ShardManifest;
  readonly revocations: readonly SignedRevocation[];
  /** The shards revoked, with their spend (µJ). */
  readonly closed: readonly ClosedShard[];
  /** µJ still available to the new shards: parent budget − consumed. */
  readonly leftUj: Uj;
  /** µJ spent past the parent's budget (consumed − budget; 0 when within it). Nothing is re-issued when positive. */
  readonly overspentUj: Uj;
}

/**
 * Rebalances a shard set (spec §4.5, revocation + re-issuance). See the module docs. Refusals:
 * `no-shards`, `close-timeout` (naming the missing (shard, point) pairs), or core's shard
 * refusals from the re-issue. Amounts in µJ.
 */
export async function rebalance(opts: RebalanceOpts): Promise<Result<RebalanceReport, RebalanceRefusal>> {
  const m = opts.manifest;
  if (m.shards.length === 0) return err({ code: 'no-shards', why: 'the manifest has no live shards' });
  const revocations = m.shards.map((s) => signRevocation(grantId(s.grant.grant), opts.holder, opts.rng(16)));
  for (const sr of revocations) {
    await opts.transport.publishRevocation(sr.body.grant_id, encode(signedRevocationToCbor(sr)), `rev.${revocationId(sr.body)}`);
  }
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  const pollMs = opts.pollMs ?? 100;
  const wanted = new Set(opts.points);
  let spent = new Map<ContentId, Map<Did, Uj>>();
  let missing: { shard: string; point: Did }[] = [];
  for (;;) {
    spent = new Map();
    missing = [];
    for (const s of m.shards) {
      const id = grantId(s.grant.grant);
      const byPoint = new Map<Did, Uj>();
      for (const bytes of await opts.transport.readCloses(id)) {
        try {
          const sc = decodeShardClose(bytes);
          if (sc.body.grant_id === id && wanted.has(sc.body.point) && verifyShardClose(sc)) byPoint.set(sc.body.point, sc.body.spent_uj);
        } catch {
          // an unreadable record is not a close
        }
      }
      spent.set(id, byPoint);
      for (const p of opts.points) if (!byPoint.has(p)) missing.push({ shard: s.name, point: p });
    }
    if (missing.length === 0 || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  if (missing.length > 0) {
    return err({
      code: 'close-timeout',
      why: `${missing.length} close record(s) missing; run rebalance again once every point is reachable`,
      missing,
    });
  }
  const closed: ClosedShard[] = m.shards.map((s) => {
    const id = grantId(s.grant.grant);
    let total = 0n;
    for (const v of spent.get(id)?.values() ?? []) total += v;
    return { name: s.name, id, generation: m.generation, budgetUj: s.grant.grant.budget_uj, spentUj: total };
  });
  const consumedUj = m.consumedUj + closed.reduce((a, c) => a + c.spentUj, 0n);
  const parentBudget = m.parentChain[m.parentChain.length - 1]!.grant.budget_uj;
  if (consumedUj > parentBudget) {
    const manifest: ShardManifest = {
      parentChain: m.parentChain,
      generation: m.generation + 1,
      consumedUj,
      shards: [],
      closed: [...m.closed, ...closed],
    };
    return ok({ manifest, revocations, closed, leftUj: 0n, overspentUj: consumedUj - parentBudget });
  }
  const total = m.shards.reduce((a, s) => a + s.grant.grant.budget_uj, 0n);
  const split =
    opts.split ??
    m.shards.map((s) => ({
      name: s.name,
      percent: total === 0n ? 100 / m.shards.length : Number((s.grant.grant.budget_uj * 10_000n) / total) / 100,
    }));
  const subject = opts.subject ?? Object.fromEntries(m.shards.map((s) => [s.name, s.grant.grant.subject]));
  const points = Object.fromEntries(m.shards.filter((s) => s.point).map((s) => [s.name, s.point!]));
  const fixed = fixShares(split);
  const minted = mintShardSet(m.parentChain, opts.holder, fixed, { subject, points, consumedUj, rng: opts.rng });
  if (!minted.ok) return minted;
  const manifest: ShardManifest = {
    parentChain: m.parentChain,
    generation: m.generation + 1,
    consumedUj,
    shards: minted.value,
    closed: [...m.closed, ...closed],
  };
  return ok({ manifest, revocations, closed, leftUj: parentBudget - consumedUj, overspentUj: 0n });
}

/** Shares computed from current budgets are truncated to 0.01%; they never sum past 100. */
function fixShares(split: readonly SplitEntry[]): SplitEntry[] {
  return split.map((s) => ({ name: s.name, percent: Math.floor(s.percent * 100) / 100 }));
}
