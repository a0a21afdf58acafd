/**
 * Handing a shard set to its points (spec §4.5 baseline, "one per enforcement point"): the holder
 * signs the set's assignment (shards/assignment.ts), stores it on the assignment stream, and waits
 * until every point has acknowledged that it is in force there. Only then may the chain files go
 * to agents: from that moment every point refuses a shard that is not its own, so the shards' sum
 * is a hard limit on the parent.
 */
import { type Actor, type ContentId, type Did, err, grantId, ok, type Result } from '../core/index.ts';
import { assignmentId, decodeShardAck, type ShardAssignment, signShardAssignment, verifyShardAck } from './assignment.ts';
import { parentOf, type ShardManifest } from './set.ts';
import type { AssignmentTransport } from './stream.ts';

/** Options of {@link assignShards}. Times in milliseconds. */
export interface AssignOpts {
  /** The set to hand out: its live shards, each with its `point`. */
  readonly manifest: ShardManifest;
  /** The shards' issuer (the parent's subject); signs the assignment. */
  readonly holder: Actor;
  readonly transport: AssignmentTransport;
  /**
   * Every enforcement point that must hold the assignment before the shards are handed out (their
   * steward dids): every point of the cluster, not only those with a shard. The shards' own points
   * are always included.
   */
  readonly points: readonly Did[];
  /** How long to wait for every acknowledgement. Default 15,000 ms. */
  readonly timeoutMs?: number;
  readonly pollMs?: number;
}

/** Why an assignment was not confirmed. An assignment already stored stays in force either way. */
export type AssignRefusal =
  | { readonly code: 'unassigned'; readonly why: string }
  | { readonly code: 'assign-timeout'; readonly why: string; readonly missing: readonly Did[] };

/** The assignment of a manifest's live shards (generation and points as recorded). Undefined if a shard has no point. */
export function assignmentOf(m: ShardManifest, holder: Did): ShardAssignment | undefined {
  if (m.shards.some((s) => s.point === undefined)) return undefined;
  return {
    parent_id: grantId(parentOf(m).grant),
    holder,
    generation: m.generation,
    shards: m.shards.map((s) => ({ grant_id: grantId(s.grant.grant), point: s.point!.did })),
  };
}

/**
 * Signs and stores the assignment of `manifest`'s live shards, then polls the points'
 * acknowledgements (verified under each point) until every point in `points` and every shard's
 * point has one. Resolves to the assignment's content id; refuses `unassigned` when a live shard
 * has no point (nothing stored), `assign-timeout` naming the points still missing.
 * @throws Error when the stream cannot be reached (the transport's deadline).
 */
export async function assignShards(opts: AssignOpts): Promise<Result<ContentId, AssignRefusal>> {
  const a = assignmentOf(opts.manifest, opts.holder.did);
  if (a === undefined) return err({ code: 'unassigned', why: 'a live shard has no point: mint with --cluster to bind shards to nodes' });
  const id = assignmentId(a);
  await opts.transport.publishAssignment(signShardAssignment(a, opts.holder));
  const wanted = [...new Set([...opts.points, ...a.shards.map((s) => s.point)])];
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  for (;;) {
    const acked = new Set<Did>();
    for (const bytes of await opts.transport.readAcks(id)) {
      try {
        const ack = decodeShardAck(bytes);
        if (ack.body.assignment === id && verifyShardAck(ack)) acked.add(ack.body.point);
      } catch {
        // an unreadable record is not an acknowledgement
      }
    }
    const missing = wanted.filter((p) => !acked.has(p));
    if (missing.length === 0) return ok(id);
    if (Date.now() >= deadline) {
      return err({
        code: 'assign-timeout',
        why: `${missing.length} point(s) have not acknowledged the shard assignment; run the command again once every point is reachable`,
        missing,
      });
    }
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 100));
  }
}
