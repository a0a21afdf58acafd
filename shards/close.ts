/**
 * Shard close records (spec §4.5 baseline, rebalancing = revocation + re-issuance): when an
 * enforcement point admits the revocation of a grant it may have spent on, it signs and publishes
 * how much it spent on that grant, `{grant_id, point, spent_uj, revocation}`. The revocation is
 * already in force at that point (every later decision is denied `revoked`), so the figure is
 * final. The rebalancer sums the close records of every point and re-issues only what is left:
 * no µJ is created by rebalancing.
 *
 * Wire shape: `{body, signature}`, Ed25519 by `body.point` over `canonical_cbor(body)` (the
 * DESIGN's signed-body pattern). `revocation` is the content id of the revocation body that
 * closed the grant.
 */
import {
  type Actor,
  asCid,
  asDid,
  asObj,
  asUint,
  check,
  type ContentId,
  decode,
  type Did,
  encode,
  type Obj,
  readSigned,
  signBody,
  type Signed,
  uintOut,
  type Uj,
  verifyBody,
} from '../core/index.ts';

/** A point's final spend on a revoked grant. */
export interface ShardClose {
  readonly grant_id: ContentId;
  /** The enforcement point (its steward did), and the signer. */
  readonly point: Did;
  /** µJ this point allowed on the grant, final once the revocation is in force. */
  readonly spent_uj: Uj;
  /** Content id of the revocation body that closed the grant. */
  readonly revocation: ContentId;
}

/** A close record with the point's signature. */
export type SignedShardClose = Signed<ShardClose>;

/** The plain CBOR map of a close record. */
export function shardCloseToCbor(c: ShardClose): Obj {
  return { grant_id: c.grant_id, point: c.point, spent_uj: uintOut(c.spent_uj), revocation: c.revocation };
}

/** Signs a close record as its point. @throws JcpError `schema` if `point.did` is not `c.point`. */
export function signShardClose(c: ShardClose, point: Actor): SignedShardClose {
  check(point.did === c.point, 'shard_close.point', 'the signing actor is not the close record point');
  return { body: c, signature: signBody(shardCloseToCbor(c), point).signature };
}

/** Canonical CBOR bytes of a signed close record. */
export function encodeShardClose(sc: SignedShardClose): Uint8Array {
  return encode({ body: shardCloseToCbor(sc.body), signature: sc.signature });
}

/**
 * Decodes a signed close record (the signature is not checked; see {@link verifyShardClose}).
 * @throws JcpError `cbor-*` / `schema` / `did-invalid` / `bad-length`
 */
export function decodeShardClose(bytes: Uint8Array): SignedShardClose {
  const { body, signature } = readSigned(decode(bytes), 'shard_close');
  const o = asObj(body, 'shard_close.body', ['grant_id', 'point', 'spent_uj', 'revocation']);
  return {
    body: {
      grant_id: asCid(o['grant_id'], 'shard_close.body.grant_id'),
      point: asDid(o['point'], 'shard_close.body.point'),
      spent_uj: asUint(o['spent_uj'], 'shard_close.body.spent_uj'),
      revocation: asCid(o['revocation'], 'shard_close.body.revocation'),
    },
    signature,
  };
}

/** True when the signature verifies under `body.point`. Never throws. */
export function verifyShardClose(sc: SignedShardClose): boolean {
  return verifyBody({ body: shardCloseToCbor(sc.body), signature: sc.signature }, sc.body.point);
}
