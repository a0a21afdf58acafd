/**
 * Revocation (spec §4.3, conformance C6): the issuer of a grant withdraws it with a signed
 * statement, and an enforcement point honours it only after checking its authority.
 *
 * Wire shape (docs/design.md "Encodings"): `SignedRevocation = {body, signature}`, `body` the
 * {@link Revocation} map, the signature Ed25519 by `body.revoked_by` over `canonical_cbor(body)`.
 *
 * Authority (§4.3): the ids match, the revoker is the grant's issuer, the signature verifies.
 * A revocation that fails any of these is refused with a distinct code and never admitted, so a
 * forged or non-issuer revocation can neither kill a grant nor be mistaken for one that did.
 * Subtree death (a revoked ancestor kills every descendant) is enforced by the decision, which
 * checks every link of a chain against the admitted set (see `decision.ts`).
 */
import type { Actor } from './actor.ts';
import { encode } from './cbor.ts';
import type { Did } from './didkey.ts';
import { type Grant, grantId } from './grant.ts';
import { type ContentId, contentIdOfBytes } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asBytes, asCid, asDid, asObj, type Obj } from './schema.ts';
import { type Signed, readSigned, signBody, verifyBody } from './signed.ts';

/** A revocation (§4.3): which grant, by whom (MUST be that grant's issuer), and 16 random bytes. */
export interface Revocation {
  /** Content id of the grant being revoked. */
  readonly grant_id: ContentId;
  /** The revoker; MUST equal the revoked grant's issuer. */
  readonly revoked_by: Did;
  /** 16 random bytes, so two revocations of one grant have distinct ids. */
  readonly nonce: Uint8Array;
}

/** A revocation with `revoked_by`'s Ed25519 signature over `canonical_cbor(body)`. */
export type SignedRevocation = Signed<Revocation>;

/** Why a revocation was not honoured (§4.3). */
export interface RevocationRefusal {
  /**
   * `wrong-grant`: the revocation names another grant id than the grant offered;
   * `not-issuer`: `revoked_by` is not the grant's issuer;
   * `bad-signature`: the signature does not verify under `revoked_by`.
   */
  readonly code: 'wrong-grant' | 'not-issuer' | 'bad-signature';
  readonly why: string;
}

/** The plain CBOR map of a revocation body. */
export function revocationToCbor(r: Revocation): Obj {
  return { grant_id: r.grant_id, revoked_by: r.revoked_by, nonce: r.nonce };
}

/** The plain CBOR map `{body, signature}` of a signed revocation. */
export function signedRevocationToCbor(sr: SignedRevocation): Obj {
  return { body: revocationToCbor(sr.body), signature: sr.signature };
}

/** Content id of a revocation: `blake3(canonical_cbor(body))` (§3). Useful to deduplicate broadcasts. */
export function revocationId(r: Revocation): ContentId {
  return contentIdOfBytes(encode(revocationToCbor(r)));
}

/**
 * Signs a revocation of `grantId` as `revoker` (§4.3). Signing does not check authority: a
 * revocation by anyone but the grant's issuer is refused when verified ({@link verifyRevocation}).
 * @param nonce 16 random bytes (from the caller's RNG).
 * @throws JcpError `schema` (grant id not a content id) / `bad-length` (nonce not 16 bytes)
 */
export function signRevocation(grantId: ContentId, revoker: Actor, nonce: Uint8Array): SignedRevocation {
  const body: Revocation = {
    grant_id: asCid(grantId, 'revocation.grant_id'),
    revoked_by: revoker.did,
    nonce: asBytes(nonce, 'revocation.nonce', 16),
  };
  const signed = signBody(revocationToCbor(body), revoker);
  return { body, signature: signed.signature };
}

/**
 * Reads a decoded `{body, signature}` map as a signed revocation, checking every field (§4.3).
 * Does not check authority; see {@link verifyRevocation}.
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readSignedRevocation(v: unknown, field = 'revocation'): SignedRevocation {
  const { body, signature } = readSigned(v, field);
  const o = asObj(body, `${field}.body`, ['grant_id', 'revoked_by', 'nonce']);
  return {
    body: {
      grant_id: asCid(o['grant_id'], `${field}.body.grant_id`),
      revoked_by: asDid(o['revoked_by'], `${field}.body.revoked_by`),
      nonce: asBytes(o['nonce'], `${field}.body.nonce`, 16),
    },
    signature,
  };
}

/**
 * Checks a revocation's authority over `grant` (§4.3), in this order: the ids match
 * (`wrong-grant`), the revoker is the grant's issuer (`not-issuer`), the signature verifies
 * under the revoker (`bad-signature`). Never throws.
 */
export function verifyRevocation(sr: SignedRevocation, grant: Grant): Result<void, RevocationRefusal> {
  if (sr.body.grant_id !== grantId(grant)) {
    return err({ code: 'wrong-grant', why: 'the revocation names another grant' });
  }
  if (sr.body.revoked_by !== grant.issuer) {
    return err({ code: 'not-issuer', why: 'only the grant issuer may revoke it' });
  }
  if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {
    return err({ code: 'bad-signature', why: 'the revocation signature does not verify under revoked_by' });
  }
  return ok(undefined);
}

/**
 * The set of revoked grant ids an enforcement point honours (§4.3). Only a revocation that
 * passes {@link verifyRevocation} is admitted; the first admitted revocation of a grant is kept
 * (so it can be persisted or re-broadcast), later ones are accepted as no-ops.
 */
export class RevocationSet {
  readonly #byGrant = new Map<ContentId, SignedRevocation>();

  /**
   * Admits `sr` against the grant it names, after checking authority (§4.3).
   * Returns the refusal (`wrong-grant` | `not-issuer` | `bad-signature`) and leaves the set
   * unchanged when authority fails. Never throws.
   */
  admit(sr: SignedRevocation, grant: Grant): Result<void, RevocationRefusal> {
    const v = verifyRevocation(sr, grant);
    if (!v.ok) return v;
    if (!this.#byGrant.has(sr.body.grant_id)) this.#byGrant.set(sr.body.grant_id, sr);
    return v;
  }

  /** True when a verified revocation of `grantId` has been admitted. */
  has(grantId: ContentId): boolean {
    return this.#byGrant.has(grantId);
  }

  /** The admitted revocation of `grantId`, if any. */
  get(grantId: ContentId): SignedRevocation | undefined {
    return this.#byGrant.get(grantId);
  }

  /** Every revoked grant id, in admission order. */
  ids(): ContentId[] {
    return [...this.#byGrant.keys()];
  }

  /** Every admitted signed revocation, in admission order. */
  revocations(): SignedRevocation[] {
    return [...this.#byGrant.values()];
  }

  /** Number of revoked grants. */
  get size(): number {
    return this.#byGrant.size;
  }
}
