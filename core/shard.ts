/**
 * Sharded budgets (spec §4.5 baseline, conformance C11): one grant enforced at N points with no
 * coordination, by minting N sibling children whose budgets sum to no more than the parent's.
 *
 * Every shard is minted through the ordinary attenuation path ({@link attenuate}, §4.1), so a
 * shard is a strictly weaker child of the parent that chain-verifies like any delegation. The
 * mint-time arithmetic is what conserves the root: each point enforces only its own slice.
 * Rebalancing is revocation + re-issuance; a holder that mints a second set of shards without
 * revoking the first passes what is still live as `allocatedUj`, so the running total never
 * passes the parent.
 */
import type { Actor } from './actor.ts';
import type { Did } from './didkey.ts';
import type { Uj } from './energy.ts';
import { attenuate, grantId, type SignedGrant } from './grant.ts';
import { type Result, err, ok } from './result.ts';

/** Refusal codes of shard minting and split planning, one per distinct outcome. */
export const ShardRefusals = {
  /** The slices (plus what is already allocated) sum past the parent's budget (§4.5, C11). */
  OVER_SUM: 'over-sum',
  /** A slice budget is negative, or a split percentage is not a finite, non-negative multiple of 0.01. */
  BAD_SLICE: 'bad-slice',
  /** Two slices would mint the same grant (same subject, budget and nonce): one shard counted twice. */
  DUPLICATE_SHARD: 'duplicate-shard',
  /** The minting actor is not the parent's subject (§4.1). */
  NOT_HOLDER: 'not-holder',
  /** The parent is leaf-only (delegate_depth 0, §4.4). */
  DELEGATION_FORBIDDEN: 'delegation-forbidden',
  /** A slice amplifies the parent on another axis (action, expiry, depth; §4.1). */
  ATTENUATION_VIOLATION: 'attenuation-violation',
} as const;

/** One of {@link ShardRefusals}. */
export type ShardRefusalCode = (typeof ShardRefusals)[keyof typeof ShardRefusals];

/** Why a shard operation was refused. `why` is for people and logs, never parsed. */
export interface ShardRefusal {
  readonly code: ShardRefusalCode;
  readonly why: string;
  /** For `over-sum`: the requested total and the parent budget still unallocated (µJ). */
  readonly requestedUj?: Uj;
  readonly availableUj?: Uj;
}

/**
 * One shard to mint: who holds it (usually an enforcement point's agent) and its slice in µJ.
 * The optional axes narrow further, as in any attenuation; omitted ones inherit the parent's.
 */
export interface ShardSlice {
  readonly subject: Did;
  /** The shard's budget, in microjoules. */
  readonly budget_uj: Uj;
  /** 16 bytes, chosen by the caller (core draws no randomness). */
  readonly nonce: Uint8Array;
  readonly actions?: readonly string[];
  /** Unix seconds; must not outlive the parent. */
  readonly expiry?: number;
  readonly delegate_depth?: number;
}

/** Options for {@link mintShards}. */
export interface MintShardsOpts {
  /** µJ of the parent already sliced out to shards that are still live (not revoked). Default 0. */
  readonly allocatedUj?: Uj;
}

/**
 * Mints one sibling child per slice from `parent`, as its holder (spec §4.5, C11).
 * All or nothing: either every shard is returned, in slice order, or none.
 *
 * Refusals: `bad-slice` (a negative budget), `over-sum` (Σ slices + `allocatedUj` > parent budget),
 * `duplicate-shard`, and from the attenuation path `not-holder`, `delegation-forbidden`,
 * `attenuation-violation`.
 */
export function mintShards(
  parent: SignedGrant,
  holder: Actor,
  slices: readonly ShardSlice[],
  opts: MintShardsOpts = {},
): Result<SignedGrant[], ShardRefusal> {
  const allocated = opts.allocatedUj ?? 0n;
  if (allocated < 0n) return err({ code: ShardRefusals.BAD_SLICE, why: 'allocatedUj is negative' });
  let total = 0n;
  for (const [i, s] of slices.entries()) {
    if (s.budget_uj < 0n) return err({ code: ShardRefusals.BAD_SLICE, why: `slice ${i} has a negative budget` });
    total += s.budget_uj;
  }
  const budget = parent.grant.budget_uj;
  const available = budget > allocated ? budget - allocated : 0n;
  if (total > available) {
    return err({
      code: ShardRefusals.OVER_SUM,
      why: `slices sum to ${total} µJ but only ${available} µJ of the parent's ${budget} µJ is unallocated`,
      requestedUj: total,
      availableUj: available,
    });
  }
  const shards: SignedGrant[] = [];
  const seen = new Set<string>();
  for (const [i, s] of slices.entries()) {
    const minted = attenuate(parent, s, holder);
    if (!minted.ok) return err({ code: minted.error.reason, why: `slice ${i}: ${minted.error.why}` });
    const id = grantId(minted.value.grant);
    if (seen.has(id)) return err({ code: ShardRefusals.DUPLICATE_SHARD, why: `slice ${i} mints the same grant as an earlier slice` });
    seen.add(id);
    shards.push(minted.value);
  }
  return ok(shards);
}

/** Where the rounding remainder of {@link planSplit} goes. */
export type Remainder = 'last' | 'unallocated';

/**
 * Plans slice budgets (µJ) for `percents` of `budgetUj`, in integer arithmetic (spec §4.5).
 *
 * Each percentage must be a finite, non-negative multiple of 0.01 (it is taken as basis points),
 * and together they must not pass 100. Slice i is ⌊budget · bps_i / 10 000⌋. The rounding dust —
 * ⌊budget · Σbps / 10 000⌋ − Σ slices, always < number of slices µJ — goes to the last slice
 * (`remainder: 'last'`, default) or stays unallocated. Either way the slices never sum past
 * ⌊budget · Σbps / 10 000⌋ ≤ budget, so {@link mintShards} accepts them.
 *
 * Refusals: `bad-slice` (negative budget, bad percentage), `over-sum` (percentages past 100).
 */
export function planSplit(budgetUj: Uj, percents: readonly number[], remainder: Remainder = 'last'): Result<Uj[], ShardRefusal> {
  if (budgetUj < 0n) return err({ code: ShardRefusals.BAD_SLICE, why: 'budget is negative' });
  const bps: bigint[] = [];
  for (const [i, p] of percents.entries()) {
    const scaled = p * 100;
    const rounded = Math.round(scaled);
    if (!Number.isFinite(p) || p < 0 || Math.abs(scaled - rounded) > 1e-6) {
      return err({ code: ShardRefusals.BAD_SLICE, why: `percentage ${i} (${p}) is not a non-negative multiple of 0.01` });
    }
    bps.push(BigInt(rounded));
  }
  const sumBps = bps.reduce((a, b) => a + b, 0n);
  if (sumBps > 10_000n) {
    return err({ code: ShardRefusals.OVER_SUM, why: `percentages sum to ${Number(sumBps) / 100}%, past 100%` });
  }
  const slices = bps.map((b) => (budgetUj * b) / 10_000n);
  if (remainder === 'last' && slices.length > 0) {
    const target = (budgetUj * sumBps) / 10_000n;
    const dust = target - slices.reduce((a, b) => a + b, 0n);
    slices[slices.length - 1] = (slices[slices.length - 1] ?? 0n) + dust;
  }
  return ok(slices);
}
