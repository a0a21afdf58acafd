/**
 * The node side of shard assignments (spec §4.5 baseline: "Each point then enforces only its own
 * shard"): the assignments a point has taken (shards/assignment.ts), and the check that refuses
 * an allow whose chain runs through a shard that is not this point's.
 *
 * The rule, for every link `i ≥ 1` of a chain the pure decision allowed: if the point holds an
 * assignment for (`chain[i-1]`'s id, `chain[i]`'s issuer) — i.e. that holder sharded that parent —
 * then `chain[i]` must be one of its shards with `point` = this point. Anything else is refused
 * as `budget-exceeded` (the spec has no other reason; this point's budget on a sibling's shard is
 * 0 µJ): a sibling's shard, a shard of an older set, or any other child the holder minted from a
 * sharded parent. The latest assignment (in stream order) per (parent, holder) is the one in
 * force; an assignment whose signature does not verify is refused, never applied.
 *
 * Until the point has read the assignment stream once since it started (`ready`), it cannot tell
 * a shard from an ordinary child, so it refuses every chain with more than one link (fail closed,
 * like a channel point that has not settled yet).
 */
import { type ContentId, type Deny, DenyReasons, type Did, err, ok, type Result, type SignedGrant } from '../core/index.ts';
import { assignmentId, type SignedShardAssignment, verifyShardAssignment } from './assignment.ts';

/** Why an assignment was not taken. */
export interface AssignmentRefusal {
  readonly code: 'forged';
  readonly why: string;
}

/** The assignments in force at one point, and the check on each allow. See the module docs. */
export class ShardBindings {
  /** `<parent id> <holder did>` → the latest assignment's shards (grant id → point). */
  readonly #sets = new Map<string, { readonly id: ContentId; readonly generation: number; readonly shards: ReadonlyMap<ContentId, Did> }>();
  #ready = false;
  /**
   * §4.7 steering (the node's amendments, structurally): the continuation of a steered shard is
   * bound to that shard's point, as the shard was (it spends what the shard had left there).
   */
  steering: { origin(id: ContentId): { readonly steeredId: ContentId } | undefined } | undefined;
  /** Assignments taken, refused (bad signature), and allows refused by {@link check}. */
  readonly counts = { taken: 0, refused: 0, denied: 0 };

  /**
   * Takes an assignment into force (replacing the holder's earlier one for the same parent).
   * Returns its content id, or `forged` when the holder's signature does not verify (not applied).
   */
  take(sa: SignedShardAssignment): Result<ContentId, AssignmentRefusal> {
    if (!verifyShardAssignment(sa)) {
      this.counts.refused++;
      return err({ code: 'forged', why: `assignment of ${sa.body.parent_id}: the signature does not verify under ${sa.body.holder}` });
    }
    const id = assignmentId(sa.body);
    this.#sets.set(`${sa.body.parent_id} ${sa.body.holder}`, {
      id,
      generation: sa.body.generation,
      shards: new Map(sa.body.shards.map((s) => [s.grant_id, s.point])),
    });
    this.counts.taken++;
    return ok(id);
  }

  /** Marks the assignment stream as read once (the backlog that existed at start is taken). */
  markReady(): void {
    this.#ready = true;
  }

  /** True once {@link markReady} was called. */
  get ready(): boolean {
    return this.#ready;
  }

  /** Every shard in force: its grant id, its parent, the one point that may spend on it, and the assignment's generation. */
  shards(): Array<{ grant_id: ContentId; parent_id: ContentId; point: Did; generation: number }> {
    const out: Array<{ grant_id: ContentId; parent_id: ContentId; point: Did; generation: number }> = [];
    for (const [key, set] of this.#sets) {
      const parent_id = key.slice(0, key.indexOf(' ')) as ContentId;
      for (const [grant_id, point] of set.shards) out.push({ grant_id, parent_id, point, generation: set.generation });
    }
    return out;
  }

  /** The ids of the assignments in force (one per sharded (parent, holder)). */
  inForce(): ContentId[] {
    return [...this.#sets.values()].map((s) => s.id);
  }

  /**
   * Spec §4.5, "each point enforces only its own shard": a Deny (`budget-exceeded`, `link` = the
   * shard's index, `requestedUj` = `costUj`, `remainingUj` = 0 µJ) when `chain` (root first, ids
   * `chainIds`, as the pure decision verified them) runs through a child of a sharded parent that
   * is not assigned to `point` (or `point` is still undefined), or when the stream was not read yet
   * and the chain has more than one link; else undefined. Pure and synchronous (no I/O).
   */
  check(chain: readonly SignedGrant[], chainIds: readonly ContentId[], point: Did | undefined, costUj: bigint): Deny | undefined {
    if (chain.length < 2) return undefined;
    const refuse = (link: number, why: string): Deny => {
      this.counts.denied++;
      return { reason: DenyReasons.BUDGET_EXCEEDED, link, why, requestedUj: costUj, remainingUj: 0n };
    };
    if (!this.#ready) {
      return refuse(
        1,
        'shard (assignments-not-read): this point has not read the shard assignments yet, so it cannot tell a shard from another child',
      );
    }
    for (let i = 1; i < chain.length; i++) {
      const parentId = chainIds[i - 1];
      const id = chainIds[i];
      const link = chain[i];
      if (parentId === undefined || id === undefined || link === undefined) continue;
      const set = this.#sets.get(`${parentId} ${link.grant.issuer}`);
      if (set === undefined) continue;
      const steered = set.shards.has(id) ? undefined : this.steering?.origin(id)?.steeredId;
      const assigned = set.shards.get(id) ?? (steered === undefined ? undefined : set.shards.get(steered));
      if (point === undefined)
        return refuse(
          i,
          `shard (not-attached): ${id} is a child of sharded grant ${parentId} and this point does not know its own did yet`,
        );
      if (assigned === point) continue;
      return refuse(
        i,
        assigned === undefined
          ? `shard (not-in-set): ${id} is a child of sharded grant ${parentId} but not in its current shard set (generation ${set.generation})`
          : `shard (assigned-elsewhere): ${id} is assigned to ${assigned}, not to this point`,
      );
    }
    return undefined;
  }
}
