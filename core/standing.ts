/**
 * Standing grants (spec §4.6 OPTIONAL, conformance C20): bounded authority for event-triggered
 * work. A standing grant is an ordinary grant (§4) plus a {@link MintPolicy} signed by that
 * grant's issuer, which fixes three bounds at once: the event class that may fire it (a content
 * id), the per-firing budget (µJ, no larger than the grant's budget) and the maximum number of
 * firings. Wire shape (docs/design.md "Encodings"): `{body, signature}` over `canonical_cbor(body)`.
 *
 * Who does what — our reading of §4.6. The spec says the issuer "holds" the standing grant and
 * that each firing mints a child "through the ordinary attenuation path (§4.1)". Attenuation
 * lets only a grant's subject mint children, so the two roles are:
 * - the **policy author** is the standing grant's issuer: the principal whose authority is being
 *   put on standing, and who alone may bound how a trigger spends it ({@link authorPolicy});
 * - the **firer** is the standing grant's subject (its holder in the §4.1 sense; typically the
 *   enforcement point or automation service that receives the webhook/schedule/ticket). Its
 *   firings mint children whose parent is the standing grant and whose issuer is that subject, so
 *   they chain-verify (§4.2) and their receipts trace back to the standing grant ({@link fire}).
 * "The issuer holds" is then literally true when an issuer puts its own authority on standing
 * by issuing the standing grant to itself (issuer = subject); nothing here forbids that.
 *
 * The {@link MintLedger} (firing count, cumulative µJ sliced out) is a plain value the
 * enforcement point keeps per standing grant; a firing returns the next ledger and a refused
 * firing returns none, so the caller's ledger is unchanged by construction.
 */
import type { Actor } from './actor.ts';
import type { Did } from './didkey.ts';
import type { Uj } from './energy.ts';
import { attenuate, grantId, type SignedGrant } from './grant.ts';
import { type ContentId, contentId } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asBytes, asCid, asObj, asSafeUint, asUint, type Obj, uintOut } from './schema.ts';
import { readSigned, type Signed, signBody, verifyBody } from './signed.ts';

/** How a trigger may turn a standing grant into work (§4.6). Signed by the grant's issuer. */
export interface MintPolicy {
  /** The standing grant's id. */
  readonly grant_id: ContentId;
  /** Content id of the event class permitted to fire (e.g. of `{source, kind}` of a webhook). */
  readonly event_class: ContentId;
  /** The budget of each child, in microjoules; at most the grant's budget_uj. */
  readonly per_firing_uj: Uj;
  /** The maximum number of firings. */
  readonly max_firings: number;
  /** 16 bytes, chosen by the author. */
  readonly nonce: Uint8Array;
}

/** A mint policy with the grant issuer's Ed25519 signature over `canonical_cbor(policy)`. */
export type SignedMintPolicy = Signed<MintPolicy>;

/** The plain CBOR map of a mint policy. */
export function mintPolicyToCbor(p: MintPolicy): Obj {
  return {
    grant_id: p.grant_id,
    event_class: p.event_class,
    per_firing_uj: uintOut(p.per_firing_uj),
    max_firings: p.max_firings,
    nonce: p.nonce,
  };
}

/** The plain CBOR map of a signed mint policy. */
export function signedMintPolicyToCbor(sp: SignedMintPolicy): Obj {
  return { body: mintPolicyToCbor(sp.body), signature: sp.signature };
}

/**
 * Reads a decoded CBOR map as a MintPolicy.
 * @throws JcpError `schema` / `bad-length`, naming the field.
 */
export function readMintPolicy(v: unknown, field = 'mint_policy'): MintPolicy {
  const o = asObj(v, field, ['grant_id', 'event_class', 'per_firing_uj', 'max_firings', 'nonce']);
  return {
    grant_id: asCid(o['grant_id'], `${field}.grant_id`),
    event_class: asCid(o['event_class'], `${field}.event_class`),
    per_firing_uj: asUint(o['per_firing_uj'], `${field}.per_firing_uj`),
    max_firings: asSafeUint(o['max_firings'], `${field}.max_firings`),
    nonce: asBytes(o['nonce'], `${field}.nonce`, 16),
  };
}

/** Reads a decoded `{body, signature}` map as a signed mint policy (signature not checked). */
export function readSignedMintPolicy(v: unknown, field = 'signed_mint_policy'): SignedMintPolicy {
  const s = readSigned(v, field);
  return { body: readMintPolicy(s.body, `${field}.body`), signature: s.signature };
}

/** The id of a signed policy: the content id of its body. */
export function mintPolicyId(sp: SignedMintPolicy): ContentId {
  return contentId(mintPolicyToCbor(sp.body));
}

/** Refusal codes of standing-grant authoring and firing, one per distinct outcome (§4.6, C20). */
export const StandingRefusals = {
  /** The policy is not signed by (or authored as) the standing grant's issuer. */
  WRONG_SIGNER: 'wrong-signer',
  /** The policy names another grant than the one presented. */
  WRONG_GRANT: 'wrong-grant',
  /** The policy would amplify its grant: per_firing_uj past the grant's budget_uj. */
  AMPLIFICATION: 'amplification',
  /** The event is not of the policy's event class. */
  WRONG_EVENT_CLASS: 'wrong-event-class',
  /** The ledger already holds max_firings firings. */
  FIRINGS_EXHAUSTED: 'firings-exhausted',
  /** The next firing would push cumulative spend past the grant's budget_uj. */
  BUDGET_EXHAUSTED: 'budget-exhausted',
  /** From the attenuation path: the firer is not the standing grant's subject (§4.1). */
  NOT_HOLDER: 'not-holder',
  /** From the attenuation path: the standing grant is leaf-only (§4.4). */
  DELEGATION_FORBIDDEN: 'delegation-forbidden',
  /** From the attenuation path: the requested child would amplify the standing grant (§4.1). */
  ATTENUATION_VIOLATION: 'attenuation-violation',
} as const;

/** One of {@link StandingRefusals}. */
export type StandingRefusalCode = (typeof StandingRefusals)[keyof typeof StandingRefusals];

/** Why a policy or a firing was refused. `why` is for people and logs, never parsed. */
export interface StandingRefusal {
  readonly code: StandingRefusalCode;
  readonly why: string;
}

/** The terms an issuer chooses when authoring a policy. */
export interface PolicyTerms {
  readonly event_class: ContentId;
  /** µJ per firing. */
  readonly per_firing_uj: Uj;
  readonly max_firings: number;
  readonly nonce: Uint8Array;
}

/**
 * Authors and signs a mint policy for `grant` as its issuer (§4.6, C20).
 * Refusals: `wrong-signer` (the author is not `grant.issuer`), `amplification`
 * (per_firing_uj > grant.budget_uj, or negative).
 */
export function authorPolicy(grant: SignedGrant, terms: PolicyTerms, issuer: Actor): Result<SignedMintPolicy, StandingRefusal> {
  const policy: MintPolicy = {
    grant_id: grantId(grant.grant),
    event_class: terms.event_class,
    per_firing_uj: terms.per_firing_uj,
    max_firings: terms.max_firings,
    nonce: terms.nonce,
  };
  if (issuer.did !== grant.grant.issuer) {
    return err({ code: StandingRefusals.WRONG_SIGNER, why: 'only the standing grant issuer may author its mint policy' });
  }
  const bad = amplification(policy, grant);
  if (bad) return err(bad);
  return ok(signBody(policy, issuer));
}

function amplification(p: MintPolicy, grant: SignedGrant): StandingRefusal | undefined {
  if (p.per_firing_uj < 0n) return { code: StandingRefusals.AMPLIFICATION, why: 'per_firing_uj is negative' };
  if (p.per_firing_uj > grant.grant.budget_uj) {
    return {
      code: StandingRefusals.AMPLIFICATION,
      why: `per_firing_uj ${p.per_firing_uj} exceeds the grant budget ${grant.grant.budget_uj}`,
    };
  }
  return undefined;
}

/**
 * Verifies a signed policy against its standing grant (§4.6): bound to it by id, signed by its
 * issuer, not amplifying it. Refusals: `wrong-grant`, `wrong-signer`, `amplification`.
 */
export function verifyPolicy(policy: SignedMintPolicy, grant: SignedGrant): Result<void, StandingRefusal> {
  if (policy.body.grant_id !== grantId(grant.grant)) {
    return err({ code: StandingRefusals.WRONG_GRANT, why: 'policy is bound to another grant' });
  }
  if (!verifyBody(policy, grant.grant.issuer)) {
    return err({ code: StandingRefusals.WRONG_SIGNER, why: 'policy signature does not verify under the grant issuer' });
  }
  const bad = amplification(policy.body, grant);
  return bad ? err(bad) : ok(undefined);
}

/** The enforcement point's per-standing-grant mint ledger (§4.6): firings so far, µJ sliced out. */
export interface MintLedger {
  readonly firings: number;
  /** Σ of the children's budgets, in microjoules. */
  readonly spent_uj: Uj;
}

/** The ledger of a standing grant that has never fired. */
export const EMPTY_MINT_LEDGER: MintLedger = Object.freeze({ firings: 0, spent_uj: 0n });

/** A trigger occurrence: its event class (content id) and, optionally, the event's own id. */
export interface FiringEvent {
  readonly event_class: ContentId;
  /** Content id of the event itself (for the caller's logs; not checked here). */
  readonly event_id?: ContentId;
}

/** What the firer chooses for the child; its budget is always the policy's per_firing_uj. */
export interface FiringParams {
  /** Who does the work: the child's subject. */
  readonly subject: Did;
  /** 16 bytes, chosen by the caller (core draws no randomness). */
  readonly nonce: Uint8Array;
  readonly actions?: readonly string[];
  /** Unix seconds; must not outlive the standing grant. */
  readonly expiry?: number;
  readonly delegate_depth?: number;
}

/** A successful firing: the new child and the ledger after it. */
export interface Firing {
  readonly child: SignedGrant;
  readonly ledger: MintLedger;
}

/**
 * Fires a standing grant once (§4.6, C20): mints one child of `standing` with budget
 * `policy.per_firing_uj` through {@link attenuate} as `holder` (the standing grant's subject),
 * and returns it with the next ledger `{firings + 1, spent_uj + per_firing_uj}`.
 *
 * Checks, in order — any refusal returns no ledger, so the caller's `ledger` stays as it was:
 * the policy verifies for this grant (`wrong-grant`, `wrong-signer`, `amplification`), the event
 * is of the policy's class (`wrong-event-class`), firings remain (`firings-exhausted`), the
 * cumulative spend stays within the grant (`budget-exhausted`), then the attenuation path
 * (`not-holder`, `delegation-forbidden`, `attenuation-violation`).
 */
export function fire(
  policy: SignedMintPolicy,
  standing: SignedGrant,
  ledger: MintLedger,
  event: FiringEvent,
  params: FiringParams,
  holder: Actor,
): Result<Firing, StandingRefusal> {
  const valid = verifyPolicy(policy, standing);
  if (!valid.ok) return valid;
  const p = policy.body;
  if (event.event_class !== p.event_class) {
    return err({ code: StandingRefusals.WRONG_EVENT_CLASS, why: `event class ${event.event_class} does not fire this policy` });
  }
  if (ledger.firings >= p.max_firings) {
    return err({ code: StandingRefusals.FIRINGS_EXHAUSTED, why: `${ledger.firings} of ${p.max_firings} firings used` });
  }
  const spentAfter = ledger.spent_uj + p.per_firing_uj;
  if (spentAfter > standing.grant.budget_uj) {
    return err({
      code: StandingRefusals.BUDGET_EXHAUSTED,
      why: `firing would bring cumulative spend to ${spentAfter} µJ, past the grant's ${standing.grant.budget_uj} µJ`,
    });
  }
  const child = attenuate(standing, { ...params, budget_uj: p.per_firing_uj }, holder);
  if (!child.ok) return err({ code: child.error.reason, why: child.error.why });
  return ok({ child: child.value, ledger: { firings: ledger.firings + 1, spent_uj: spentAfter } });
}
