/**
 * Shared fixtures for the authority tests (attenuation, chains, revocation, trust roots, the
 * decision): fixed actors (alice issues roots, bob/carol/dave hold, mallory attacks), two
 * resources, and builders for grants, chains, frames, requests and state. The builders are the
 * conformance kit's (`conformance/classes/authority-kit.ts`), drawn from this file's own seed.
 */
import { contentId, type ContentId, type Frame, grantId, seededRng, type SignedGrant } from '../../core/index.ts';
import { type Kit, kitFrom } from '../../conformance/internal.ts';

const k: Kit = kitFrom(seededRng('test/core/authority'), 'fixture');

export const { rng, alice, bob, carol, dave, erin, mallory } = k;

export const RESOURCE: ContentId = k.resource;
export const OTHER_RESOURCE: ContentId = k.otherResource;
export const PAYLOAD: ContentId = contentId(new Uint8Array(0));
/** A decision time (unix seconds) well inside every default expiry. */
export const NOW_S = 1_000;

/** A root grant alice → bob on RESOURCE, read+write, 1,000 µJ, expiry 5,000 s, unbounded depth. */
export const rootGrant: Kit['root'] = k.root;

/** Attenuates `parent` as `holder`; throws if the mint is refused (tests of refusals call `attenuate`). */
export const delegate: Kit['delegate'] = k.delegate;

/**
 * A child of `parent` built by hand (bypassing `attenuate`'s refusals) and signed by `signer`,
 * for chains that must fail verification.
 */
export const handChild: Kit['handChild'] = k.handChild;

/** The same grant with its signature made by `forger` (default mallory) instead of the issuer. */
export const forged: Kit['forged'] = k.forged;

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
export const requestFor: Kit['request'] = k.request;

/** A fresh, mutable state: an empty ledger, no revocations, no trust roots (everything open). */
export const freshState: Kit['state'] = k.state;

/** Ids of a chain, root first. */
export function idsOf(chain: readonly SignedGrant[]): ContentId[] {
  return chain.map((sg) => grantId(sg.grant));
}
