/**
 * Shared fixtures for the authority tests (attenuation, chains, revocation, trust roots, the
 * decision): fixed actors (alice issues roots, bob/carol/dave hold, mallory attacks), two
 * resources, and builders for grants, chains, frames, requests and state.
 */
import { type Actor, newActor, seededRng } from '../../core/actor.ts';
import type { DecisionRequest, DecisionState } from '../../core/decision.ts';
import type { Did } from '../../core/didkey.ts';
import { sign } from '../../core/ed25519.ts';
import type { Frame } from '../../core/frame.ts';
import {
  type AttenuationParams,
  type Grant,
  type SignedGrant,
  attenuate,
  grantBytes,
  grantId,
  signGrant,
} from '../../core/grant.ts';
import { type ContentId, contentId } from '../../core/hash.ts';
import { Ledger } from '../../core/ledger.ts';
import { TrustRoots } from '../../core/trust.ts';

export const rng = seededRng('test/core/authority');
export const alice = newActor(rng);
export const bob = newActor(rng);
export const carol = newActor(rng);
export const dave = newActor(rng);
export const erin = newActor(rng);
export const mallory = newActor(rng);

export const RESOURCE: ContentId = contentId({ tool: 'fs', root: '/srv/data' });
export const OTHER_RESOURCE: ContentId = contentId({ tool: 'fs', root: '/etc' });
export const PAYLOAD: ContentId = contentId(new Uint8Array(0));
/** A decision time (unix seconds) well inside every default expiry. */
export const NOW_S = 1_000;

/** A root grant alice → bob on RESOURCE, read+write, 1,000 µJ, expiry 5,000 s, unbounded depth. */
export function rootGrant(over: Partial<Grant> = {}, issuer: Actor = alice): SignedGrant {
  const g: Grant = {
    issuer: issuer.did,
    subject: bob.did,
    capability: { resource: RESOURCE, actions: ['read', 'write'] },
    budget_uj: 1_000n,
    expiry: 5_000,
    nonce: rng(16),
    ...over,
  };
  return signGrant(g, issuer);
}

/** Attenuates `parent` as `holder`; throws if the mint is refused (tests of refusals call `attenuate`). */
export function delegate(
  parent: SignedGrant,
  holder: Actor,
  params: Partial<AttenuationParams> & { subject: Did },
): SignedGrant {
  const r = attenuate(parent, { nonce: rng(16), ...params }, holder);
  if (!r.ok) throw new Error(`fixture: attenuation refused: ${r.error.reason} (${r.error.why})`);
  return r.value;
}

/**
 * A child of `parent` built by hand (bypassing `attenuate`'s refusals) and signed by `signer`,
 * for chains that must fail verification.
 */
export function handChild(parent: SignedGrant, over: Partial<Grant>, signer: Actor): SignedGrant {
  const p = parent.grant;
  const g: Grant = {
    issuer: p.subject,
    subject: dave.did,
    capability: p.capability,
    budget_uj: p.budget_uj,
    expiry: p.expiry,
    parent: grantId(p),
    ...(p.delegate_depth !== undefined && p.delegate_depth > 0 ? { delegate_depth: p.delegate_depth - 1 } : {}),
    nonce: rng(16),
    ...over,
  };
  return { grant: g, signature: sign(signer.key, grantBytes(g)) };
}

/** The same grant with its signature made by `forger` instead of the issuer. */
export function forged(sg: SignedGrant, forger: Actor = mallory): SignedGrant {
  return { grant: sg.grant, signature: sign(forger.key, grantBytes(sg.grant)) };
}

/** A control tool-call frame exercising `leaf` (read on its resource). */
export function frameFor(leaf: SignedGrant, over: Partial<Frame> = {}): Frame {
  return {
    kind: 'tool-call',
    trust: 'control',
    grant_id: grantId(leaf.grant),
    action: 'read',
    resource: leaf.grant.capability.resource,
    payload_hash: PAYLOAD,
    ...over,
  };
}

/** A request by the leaf's subject, costing `costUj` (default 10 µJ, Estimator), at NOW_S. */
export function requestFor(
  chain: readonly SignedGrant[],
  over: Partial<DecisionRequest> & { costUj?: bigint } = {},
): DecisionRequest {
  const leaf = chain[chain.length - 1]!;
  const { costUj, ...rest } = over;
  return {
    frame: frameFor(leaf),
    chain,
    caller: leaf.grant.subject,
    cost: { uj: costUj ?? 10n, provenance: 'Estimator' },
    nowS: NOW_S,
    ...rest,
  };
}

/** A fresh, mutable state: an empty ledger, no revocations, no trust roots (everything open). */
export function freshState(over: { revoked?: Iterable<ContentId>; roots?: Record<ContentId, Did[]> } = {}): DecisionState & {
  ledger: Ledger;
} {
  return { ledger: new Ledger(), revoked: new Set(over.revoked ?? []), trust: new TrustRoots(over.roots ?? {}) };
}

/** Ids of a chain, root first. */
export function idsOf(chain: readonly SignedGrant[]): ContentId[] {
  return chain.map((sg) => grantId(sg.grant));
}
