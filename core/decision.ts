/**
 * The decision (spec §7; chains §4.2; conformance C3, C4, C7, C15, C-neg): Allow or Deny(reason)
 * for one frame, made outside the model, pure and deterministic. Inputs are the request (frame,
 * chain, caller, cost, `nowS`) and a read-only state (ledger, revocations, trust roots); the
 * decision never mutates anything. The caller MUST debit only on Allow, from every link:
 * `if (d.verdict === 'allow') ledger.debit(d.chainIds, req.cost.uj)`.
 *
 * Direct path — a one-link chain whose grant has no parent (an un-delegated grant, §11). The
 * spec's §7 order exactly, the first failure naming the reason:
 *  1. frame `trust` is not `control`                        → `untrusted-control`
 *  2. the grant id is revoked                               → `revoked`
 *  3. the issuer is not a trust root for the frame resource → `untrusted-root`
 *  4. frame `grant_id` ≠ the grant id                       → `wrong-resource`
 *  5. caller ≠ grant subject                                → `wrong-subject`
 *  6. issuer signature does not verify                      → `bad-signature`
 *  7. expired (see {@link isExpired})                       → `expired`
 *  8. frame resource ≠ capability resource                  → `wrong-resource`;
 *     action ∉ capability actions                           → `action-not-granted`
 *  9. prior spend + cost > `budget_uj`                      → `budget-exceeded`
 *
 * Chained path — any other chain, root first (§4.2 and §7's last paragraph, which lists
 * "structure and signatures first, then revocation against every link, expiry of every link,
 * the leaf-level checks above, and budget against every link"). Exactly:
 *  1. frame `trust` is not `control`                        → `untrusted-control`
 *  2. structure then signatures, root first (`verifyChain`) → `chain-broken` |
 *     `attenuation-violation` | `bad-signature` (link = the failing hop). A lone grant that
 *     names a parent lands here too: a delegated grant without its chain is `chain-broken`.
 *  3. any link revoked, root first                          → `revoked` (link = the first revoked;
 *     a revoked ancestor kills its whole subtree, §4.3)
 *  4. any link expired, root first                          → `expired` (link = the first expired)
 *  5. the ROOT issuer is not a trust root for the frame resource → `untrusted-root` (link 0)
 *  6. frame `grant_id` ≠ the LEAF id                        → `wrong-resource`
 *  7. caller ≠ leaf subject                                 → `wrong-subject`
 *  8. frame resource ≠ leaf resource                        → `wrong-resource`;
 *     action ∉ leaf actions                                 → `action-not-granted`
 *  9. for every link, root first: its spend + cost > its `budget_uj` → `budget-exceeded`
 *     (link = the first that cannot pay). Conservation: the cost must fit every link, and the
 *     caller debits every link, so siblings share their ancestors' budgets.
 * Within the leaf-level checks (5–8) the chained order keeps the direct order.
 *
 * Numbers: µJ as bigint; `nowS` and `expiry` in unix seconds.
 */
import type { Deny } from './deny.ts';
import { DenyReasons } from './deny.ts';
import type { Did } from './didkey.ts';
import type { Cost, Uj } from './energy.ts';
import { check } from './errors.ts';
import type { Frame } from './frame.ts';
import { type Grant, type SignedGrant, grantId, verifyGrantSignature } from './grant.ts';
import type { ContentId } from './hash.ts';
import type { LedgerView } from './ledger.ts';
import { verifyChain } from './chain.ts';
import type { TrustRoots } from './trust.ts';

/** One request to decide (§7): the frame, the full chain (root first, leaf last), who calls, the cost, the time. */
export interface DecisionRequest {
  readonly frame: Frame;
  /** Root first, leaf last; an un-delegated grant is a one-link chain (§11). */
  readonly chain: readonly SignedGrant[];
  /** The authenticated caller (the wire layer checks the caller signature before deciding). */
  readonly caller: Did;
  /** The metered cost; `cost.uj` (µJ) is what must fit and what is debited. */
  readonly cost: Cost;
  /** Decision time, unix seconds. */
  readonly nowS: number;
}

/** What the decision reads (never writes): spend per grant, admitted revocations, trust roots. */
export interface DecisionState {
  readonly ledger: LedgerView;
  readonly revoked: { has(grantId: ContentId): boolean };
  readonly trust: Pick<TrustRoots, 'allows'>;
}

/**
 * The outcome. `chainIds`: the ids of the presented chain, root first (what an Allow debits;
 * a Deny debits nothing). `leaf`: the last grant. `remainingUj`: leaf budget − leaf spend, after
 * the debit on Allow (never below 0).
 */
export type Decision =
  | { readonly verdict: 'allow'; readonly chainIds: ContentId[]; readonly leaf: Grant; readonly remainingUj: Uj }
  | {
      readonly verdict: 'deny';
      readonly deny: Deny;
      readonly chainIds: ContentId[];
      readonly leaf: Grant;
      readonly remainingUj: Uj;
    };

/**
 * True when `g` is expired at `nowS` (§4, §7 check 7): `expiry` ≠ 0 and `nowS ≥ expiry`.
 * Boundary choice: `expiry` is the first second at which the grant is no longer valid (as a
 * JWT `exp`, RFC 7519 §4.1.4), so a grant with `expiry = T` is honoured up to `T − 1` and denied at `T`.
 */
export function isExpired(g: Grant, nowS: number): boolean {
  return g.expiry !== 0 && nowS >= g.expiry;
}

/**
 * Decides `req` against `state` (§7, §4.2) in the order documented on this module. Pure: reads
 * the state, mutates nothing. Returns Allow or Deny with the spec's reason and, when the failure
 * is tied to one link, its index (`link`, 0 = root).
 * @throws JcpError `schema` for an empty chain or a negative cost (bad input, not a decision).
 */
export function decide(req: DecisionRequest, state: DecisionState): Decision {
  const chain = req.chain;
  check(chain.length > 0, 'chain', 'a decision needs at least one grant');
  check(req.cost.uj >= 0n, 'cost.uj', 'negative cost');
  const only = chain[0]!;
  if (chain.length === 1 && only.grant.parent === undefined) return decideDirect(req, state, only);
  return decideChained(req, state);
}

/**
 * Builds a Deny for `req` with a reason found outside {@link decide} (e.g. the wire layer's
 * failed caller signature → `bad-signature`, §11), with the same `chainIds`/`leaf`/`remainingUj`
 * a decision would carry. Debits nothing.
 * @throws JcpError `schema` for an empty chain.
 */
export function denied(req: DecisionRequest, state: DecisionState, deny: Deny): Decision {
  check(req.chain.length > 0, 'chain', 'a decision needs at least one grant');
  const ids = idsOf(req.chain);
  const leaf = req.chain[req.chain.length - 1]!.grant;
  return denyWith(deny, ids, leaf, state.ledger.spent(ids[ids.length - 1]!));
}

function decideDirect(req: DecisionRequest, state: DecisionState, sg: SignedGrant): Decision {
  const g = sg.grant;
  const id = grantId(g);
  const spent = state.ledger.spent(id);
  const deny = directDeny(req, state, sg, id, spent);
  if (deny !== undefined) return denyWith(deny, [id], g, spent);
  return { verdict: 'allow', chainIds: [id], leaf: g, remainingUj: g.budget_uj - spent - req.cost.uj };
}

function directDeny(req: DecisionRequest, state: DecisionState, sg: SignedGrant, id: ContentId, spent: Uj): Deny | undefined {
  const g = sg.grant;
  const f = req.frame;
  if (f.trust !== 'control') return { reason: DenyReasons.UNTRUSTED_CONTROL, why: 'a data frame cannot exercise a capability' };
  if (state.revoked.has(id)) return { reason: DenyReasons.REVOKED, link: 0, why: 'the grant is revoked' };
  if (!state.trust.allows(f.resource, g.issuer)) {
    return { reason: DenyReasons.UNTRUSTED_ROOT, link: 0, why: 'the issuer is not a trust root for the resource' };
  }
  if (f.grant_id !== id) return { reason: DenyReasons.WRONG_RESOURCE, link: 0, why: 'frame grant_id is not the grant id' };
  if (req.caller !== g.subject) return { reason: DenyReasons.WRONG_SUBJECT, link: 0, why: 'the caller is not the grant subject' };
  if (!verifyGrantSignature(sg)) return { reason: DenyReasons.BAD_SIGNATURE, link: 0, why: 'issuer signature does not verify' };
  if (isExpired(g, req.nowS)) return { reason: DenyReasons.EXPIRED, link: 0, expiredAtS: g.expiry, why: 'the grant has expired' };
  const leafDeny = leafScopeDeny(f, g, 0);
  if (leafDeny !== undefined) return leafDeny;
  if (spent + req.cost.uj > g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, 0);
  return undefined;
}

function decideChained(req: DecisionRequest, state: DecisionState): Decision {
  const chain = req.chain;
  const n = chain.length;
  const leaf = chain[n - 1]!.grant;
  const f = req.frame;
  if (f.trust !== 'control') {
    return denyOf(state, chain, leaf, { reason: DenyReasons.UNTRUSTED_CONTROL, why: 'a data frame cannot exercise a capability' });
  }
  const verified = verifyChain(chain);
  if (!verified.ok) return denyOf(state, chain, leaf, verified.error);
  const ids = verified.value;
  const leafId = ids[n - 1]!;
  const leafSpent = state.ledger.spent(leafId);
  const deny = chainedDeny(req, state, ids);
  if (deny !== undefined) return denyWith(deny, ids, leaf, leafSpent);
  return { verdict: 'allow', chainIds: ids, leaf, remainingUj: leaf.budget_uj - leafSpent - req.cost.uj };
}

function chainedDeny(req: DecisionRequest, state: DecisionState, ids: readonly ContentId[]): Deny | undefined {
  const chain = req.chain;
  const n = chain.length;
  const f = req.frame;
  const leaf = chain[n - 1]!.grant;
  for (let i = 0; i < n; i++) {
    if (state.revoked.has(ids[i]!)) {
      return { reason: DenyReasons.REVOKED, link: i, why: i === n - 1 ? 'the grant is revoked' : 'an ancestor grant is revoked' };
    }
  }
  for (let i = 0; i < n; i++) {
    const g = chain[i]!.grant;
    if (isExpired(g, req.nowS)) return { reason: DenyReasons.EXPIRED, link: i, expiredAtS: g.expiry, why: 'a chain link has expired' };
  }
  if (!state.trust.allows(f.resource, chain[0]!.grant.issuer)) {
    return { reason: DenyReasons.UNTRUSTED_ROOT, link: 0, why: 'the root issuer is not a trust root for the resource' };
  }
  if (f.grant_id !== ids[n - 1]) {
    return { reason: DenyReasons.WRONG_RESOURCE, link: n - 1, why: 'frame grant_id is not the leaf grant id' };
  }
  if (req.caller !== leaf.subject) return { reason: DenyReasons.WRONG_SUBJECT, link: n - 1, why: 'the caller is not the leaf subject' };
  const leafDeny = leafScopeDeny(f, leaf, n - 1);
  if (leafDeny !== undefined) return leafDeny;
  for (let i = 0; i < n; i++) {
    const g = chain[i]!.grant;
    const spent = state.ledger.spent(ids[i]!);
    if (spent + req.cost.uj > g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, i);
  }
  return undefined;
}

/** §7 check 8: the frame's resource and action against the (leaf) capability. */
function leafScopeDeny(f: Frame, g: Grant, link: number): Deny | undefined {
  if (f.resource !== g.capability.resource) {
    return { reason: DenyReasons.WRONG_RESOURCE, link, why: 'frame resource is not the capability resource' };
  }
  if (!g.capability.actions.includes(f.action)) {
    return { reason: DenyReasons.ACTION_NOT_GRANTED, link, why: `action ${f.action.slice(0, 64)} is not granted` };
  }
  return undefined;
}

function budgetDeny(costUj: Uj, budgetUj: Uj, spentUj: Uj, link: number): Deny {
  const remainingUj = nonNegative(budgetUj - spentUj);
  return {
    reason: DenyReasons.BUDGET_EXCEEDED,
    link,
    requestedUj: costUj,
    remainingUj,
    why: `cost ${costUj} µJ exceeds the ${remainingUj} µJ remaining`,
  };
}

function denyOf(state: DecisionState, chain: readonly SignedGrant[], leaf: Grant, deny: Deny): Decision {
  const ids = idsOf(chain);
  return denyWith(deny, ids, leaf, state.ledger.spent(ids[ids.length - 1]!));
}

function denyWith(deny: Deny, chainIds: ContentId[], leaf: Grant, leafSpent: Uj): Decision {
  return { verdict: 'deny', deny, chainIds, leaf, remainingUj: nonNegative(leaf.budget_uj - leafSpent) };
}

function idsOf(chain: readonly SignedGrant[]): ContentId[] {
  const ids: ContentId[] = new Array(chain.length);
  for (let i = 0; i < chain.length; i++) ids[i] = grantId(chain[i]!.grant);
  return ids;
}

function nonNegative(v: Uj): Uj {
  return v < 0n ? 0n : v;
}
