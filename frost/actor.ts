/**
 * A threshold actor as the rest of JCP sees it (spec §2.2): a did:key plus a signer function.
 * Nothing else changes: a threshold actor issues grants, revokes them and signs signed bodies
 * and jcp/1 requests (`core/wire.ts` `signWireRequest` takes the signer function directly) with
 * the same bytes as any other actor; only the signature comes from a signing session.
 */
import {
  asBytes,
  asCid,
  check,
  type ContentId,
  type Did,
  encode,
  type Grant,
  grantBytes,
  type Revocation,
  revocationToCbor,
  type Signed,
  type SignedGrant,
  type SignedRevocation,
} from '../core/index.ts';
import type { Signer } from './coordinator.ts';

/** A did:key whose signatures come from a signer function (a threshold group, or any remote signer). */
export interface ThresholdActor {
  readonly did: Did;
  readonly sign: Signer;
}

/**
 * Issues a grant as a threshold actor (spec §4): the signature is over `canonical_cbor(grant)`,
 * exactly as `core/grant.ts` `signGrant` does for a local key.
 * @throws JcpError `schema` when `g.issuer` is not the actor; FrostError from the signing session.
 */
export async function issueGrant(g: Grant, actor: ThresholdActor): Promise<SignedGrant> {
  check(actor.did === g.issuer, 'grant.issuer', 'the signing actor is not the grant issuer');
  return { grant: g, signature: await actor.sign(grantBytes(g)) };
}

/**
 * Revokes a grant as a threshold actor (spec §4.3), the same body and bytes as
 * `core/revocation.ts` `signRevocation`. @param nonce 16 random bytes.
 * @throws JcpError `schema`/`bad-length`; FrostError from the signing session.
 */
export async function revokeGrant(grantId: ContentId, actor: ThresholdActor, nonce: Uint8Array): Promise<SignedRevocation> {
  const body: Revocation = {
    grant_id: asCid(grantId, 'revocation.grant_id'),
    revoked_by: actor.did,
    nonce: asBytes(nonce, 'revocation.nonce', 16),
  };
  return { body, signature: await actor.sign(encode(revocationToCbor(body))) };
}

/** Signs any signed-body object (docs/design.md "Encodings": Ed25519 over `canonical_cbor(body)`) as a threshold actor. */
export async function signBodyAs<B>(body: B, actor: ThresholdActor): Promise<Signed<B>> {
  return { body, signature: await actor.sign(encode(body)) };
}
