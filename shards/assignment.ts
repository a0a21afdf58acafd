/**
 * Shard assignments (spec §4.5 baseline: "one per enforcement point. Each point then enforces only
 * its own shard"). A shard is an ordinary grant (§4): nothing in it names the point it is for, so
 * the holder who minted the set says so in a signed record the points follow:
 *
 * - `ShardAssignment {parent_id, holder, generation, shards: [{grant_id, point}]}`, signed by
 *   `holder` (the parent's subject, hence the shards' issuer). It is the whole current set of the
 *   parent: a point that has taken it allows a child of `parent_id` issued by `holder` only if that
 *   child is in `shards` with `point` = itself (shards/binding.ts).
 * - `ShardAck {assignment, point}`, signed by `point` once the assignment is in force there.
 *   `jcp shards mint|rebalance --cluster` hands out the chain files only when every point has
 *   acknowledged, so no agent holds a shard that some point would still take for an ordinary child.
 *
 * Wire shape of both: `{body, signature}`, Ed25519 over `canonical_cbor(body)` (DESIGN's
 * signed-body pattern). `assignment` is the content id of the assignment body.
 */
import {
  type Actor,
  asArray,
  asCid,
  asDid,
  asObj,
  asSafeUint,
  check,
  contentId,
  type ContentId,
  decode,
  type Did,
  encode,
  type Obj,
  readSigned,
  signBody,
  type Signed,
  verifyBody,
} from '../core/index.ts';

/** The current shard set of one parent grant: which point each shard is for. */
export interface ShardAssignment {
  /** The sharded grant (the shards' parent). */
  readonly parent_id: ContentId;
  /** The parent's subject, who issued the shards; the signer. */
  readonly holder: Did;
  /** The manifest generation (1 for the first mint, +1 per rebalance); informative. */
  readonly generation: number;
  /** Every live shard of the parent and the one point (steward did) that may spend on it. */
  readonly shards: readonly { readonly grant_id: ContentId; readonly point: Did }[];
}

/** An assignment with the holder's signature. */
export type SignedShardAssignment = Signed<ShardAssignment>;

/** A point's acknowledgement that an assignment is in force there. */
export interface ShardAck {
  /** Content id of the assignment body ({@link assignmentId}). */
  readonly assignment: ContentId;
  /** The point (its steward did), and the signer. */
  readonly point: Did;
}

/** An acknowledgement with the point's signature. */
export type SignedShardAck = Signed<ShardAck>;

/** At most this many shards in one assignment (a split has at most one slice per point). */
const MAX_SHARDS = 1024;

function assignmentToCbor(a: ShardAssignment): Obj {
  return {
    parent_id: a.parent_id,
    holder: a.holder,
    generation: a.generation,
    shards: a.shards.map((s) => ({ grant_id: s.grant_id, point: s.point })),
  };
}

/** The content id of an assignment body (what acknowledgements cite). */
export function assignmentId(a: ShardAssignment): ContentId {
  return contentId(assignmentToCbor(a));
}

/** Signs an assignment as its holder. @throws JcpError `schema` if `holder.did` is not `a.holder`. */
export function signShardAssignment(a: ShardAssignment, holder: Actor): SignedShardAssignment {
  check(holder.did === a.holder, 'shard_assignment.holder', 'the signing actor is not the assignment holder');
  return { body: a, signature: signBody(assignmentToCbor(a), holder).signature };
}

/** Canonical CBOR bytes of a signed assignment. */
export function encodeShardAssignment(sa: SignedShardAssignment): Uint8Array {
  return encode({ body: assignmentToCbor(sa.body), signature: sa.signature });
}

/**
 * Decodes a signed assignment (the signature is not checked; see {@link verifyShardAssignment}).
 * @throws JcpError `cbor-*` / `schema` / `did-invalid` / `bad-length`
 */
export function decodeShardAssignment(bytes: Uint8Array): SignedShardAssignment {
  const { body, signature } = readSigned(decode(bytes), 'shard_assignment');
  const o = asObj(body, 'shard_assignment.body', ['parent_id', 'holder', 'generation', 'shards']);
  const shards = asArray(o['shards'], 'shard_assignment.body.shards', MAX_SHARDS).map((s, i) => {
    const so = asObj(s, `shard_assignment.body.shards[${i}]`, ['grant_id', 'point']);
    return {
      grant_id: asCid(so['grant_id'], `shard_assignment.body.shards[${i}].grant_id`),
      point: asDid(so['point'], `shard_assignment.body.shards[${i}].point`),
    };
  });
  return {
    body: {
      parent_id: asCid(o['parent_id'], 'shard_assignment.body.parent_id'),
      holder: asDid(o['holder'], 'shard_assignment.body.holder'),
      generation: asSafeUint(o['generation'], 'shard_assignment.body.generation'),
      shards,
    },
    signature,
  };
}

/** True when the signature verifies under `body.holder`. Never throws. */
export function verifyShardAssignment(sa: SignedShardAssignment): boolean {
  return verifyBody({ body: assignmentToCbor(sa.body), signature: sa.signature }, sa.body.holder);
}

/** Signs an acknowledgement as its point. @throws JcpError `schema` if `point.did` is not `a.point`. */
export function signShardAck(a: ShardAck, point: Actor): SignedShardAck {
  check(point.did === a.point, 'shard_ack.point', 'the signing actor is not the acknowledging point');
  return { body: a, signature: signBody({ assignment: a.assignment, point: a.point }, point).signature };
}

/** Canonical CBOR bytes of a signed acknowledgement. */
export function encodeShardAck(sa: SignedShardAck): Uint8Array {
  return encode({ body: { assignment: sa.body.assignment, point: sa.body.point }, signature: sa.signature });
}

/**
 * Decodes a signed acknowledgement (the signature is not checked; see {@link verifyShardAck}).
 * @throws JcpError `cbor-*` / `schema` / `did-invalid` / `bad-length`
 */
export function decodeShardAck(bytes: Uint8Array): SignedShardAck {
  const { body, signature } = readSigned(decode(bytes), 'shard_ack');
  const o = asObj(body, 'shard_ack.body', ['assignment', 'point']);
  return {
    body: { assignment: asCid(o['assignment'], 'shard_ack.body.assignment'), point: asDid(o['point'], 'shard_ack.body.point') },
    signature,
  };
}

/** True when the signature verifies under `body.point`. Never throws. */
export function verifyShardAck(sa: SignedShardAck): boolean {
  return verifyBody({ body: { assignment: sa.body.assignment, point: sa.body.point }, signature: sa.signature }, sa.body.point);
}
