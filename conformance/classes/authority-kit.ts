/**
 * Builders shared by the authority conformance classes (C2–C4, C6, C7, C10, C15, C-neg): a
 * deterministic cast of actors per class, grants, hand-built (unchecked) children, forged
 * signatures, frames, requests and fresh decision state. Not a conformance class itself.
 */
import {
  type Actor,
  attenuate,
  type AttenuationParams,
  contentId,
  type ContentId,
  type Decision,
  type DecisionRequest,
  type DecisionState,
  type Did,
  type Grant,
  grantBytes,
  grantId,
  Ledger,
  newActor,
  type Rng,
  seededRng,
  sign,
  type SignedGrant,
  signGrant,
  TrustRoots,
} from '../../core/index.ts';

/** A deterministic cast for one class: `alice` issues roots to `bob`; `carol`, `dave`, `erin` hold; `mallory` attacks. */
export interface Kit {
  readonly rng: Rng;
  readonly alice: Actor;
  readonly bob: Actor;
  readonly carol: Actor;
  readonly dave: Actor;
  readonly erin: Actor;
  readonly mallory: Actor;
  /** The guarded resource and an unrelated one. */
  readonly resource: ContentId;
  readonly otherResource: ContentId;
  /** A root grant alice → bob, read+write, 1,000 µJ, expiry 5,000 s (override any field). */
  root(over?: Partial<Grant>, issuer?: Actor): SignedGrant;
  /** Attenuates through the real mint path; throws if refused (use `attenuate` to test refusals). */
  delegate(parent: SignedGrant, holder: Actor, params: Partial<AttenuationParams> & { subject: Did }): SignedGrant;
  /** A child of `parent` built by hand (no mint checks) and signed by `signer`. */
  handChild(parent: SignedGrant, over: Partial<Grant>, signer: Actor): SignedGrant;
  /** The same grant with a signature by `forger` (default mallory). */
  forged(sg: SignedGrant, forger?: Actor): SignedGrant;
  /** A control tool-call frame exercising the leaf of `chain`, by its subject, 10 µJ, at 1,000 s. */
  request(chain: readonly SignedGrant[], over?: Partial<DecisionRequest> & { costUj?: bigint }): DecisionRequest;
  /** An empty ledger, no revocations, the given trust roots (none = every resource open). */
  state(over?: { revoked?: Iterable<ContentId>; roots?: Record<ContentId, Did[]> }): DecisionState & { ledger: Ledger };
}

/** A new kit seeded by `seed` (use the class id). */
export function kit(seed: string): Kit {
  return kitFrom(seededRng(`conformance/${seed}`));
}

/**
 * A kit drawing its actors (in cast order) and every nonce from `rng`; `label` prefixes the
 * error `delegate` throws when the mint refuses.
 */
export function kitFrom(rng: Rng, label = 'kit'): Kit {
  const [alice, bob, carol, dave, erin, mallory] = Array.from({ length: 6 }, () => newActor(rng)) as [
    Actor,
    Actor,
    Actor,
    Actor,
    Actor,
    Actor,
  ];
  const resource = contentId({ tool: 'fs', root: '/srv/data' });
  const otherResource = contentId({ tool: 'fs', root: '/etc' });
  return {
    rng,
    alice,
    bob,
    carol,
    dave,
    erin,
    mallory,
    resource,
    otherResource,
    root(over = {}, issuer = alice) {
      const g: Grant = {
        issuer: issuer.did,
        subject: bob.did,
        capability: { resource, actions: ['read', 'write'] },
        budget_uj: 1_000n,
        expiry: 5_000,
        nonce: rng(16),
        ...over,
      };
      return signGrant(g, issuer);
    },
    delegate(parent, holder, params) {
      const r = attenuate(parent, { nonce: rng(16), ...params }, holder);
      if (!r.ok) throw new Error(`${label}: attenuation refused: ${r.error.reason} (${r.error.why})`);
      return r.value;
    },
    handChild(parent, over, signer) {
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
    },
    forged(sg, forger = mallory) {
      return { grant: sg.grant, signature: sign(forger.key, grantBytes(sg.grant)) };
    },
    request(chain, over = {}) {
      const leaf = chain[chain.length - 1]!.grant;
      const { costUj, ...rest } = over;
      return {
        frame: {
          kind: 'tool-call',
          trust: 'control',
          grant_id: grantId(leaf),
          action: 'read',
          resource: leaf.capability.resource,
          payload_hash: contentId(new Uint8Array(0)),
        },
        chain,
        caller: leaf.subject,
        cost: { uj: costUj ?? 10n, provenance: 'Estimator' },
        nowS: 1_000,
        ...rest,
      };
    },
    state(over = {}) {
      return { ledger: new Ledger(), revoked: new Set(over.revoked ?? []), trust: new TrustRoots(over.roots ?? {}) };
    },
  };
}

/** `allow`, or the deny reason — and `@link` when `withLink`. */
export function verdict(d: Decision, withLink = false): string {
  if (d.verdict === 'allow') return 'allow';
  return withLink ? `${d.deny.reason}@${d.deny.link ?? '-'}` : d.deny.reason;
}
