/**
 * A threshold group's public package (spec §2.2): the VSS commitment (its first point is the
 * group's Ed25519 key, so the group is an ordinary did:key), every participant's verifying share,
 * and the roster that binds each FROST identifier to its holder's own Ed25519 identity.
 *
 * Identifiers are the 1-based roster index: identifier `i` is the scalar `i` (RFC 9591 §3,
 * encoded 32-byte little-endian), as in RFC 9591 Appendix C dealer output. The arithmetic is
 * `@noble/curves` `ed25519_FROST`; this module converts between its hex-keyed packages and ours.
 */
import { ed25519, ed25519_FROST } from '@noble/curves/ed25519.js';
import type { FrostPublic, NonceCommitments, RNG } from '@noble/curves/abstract/frost.js';
import type { TArg } from '@noble/curves/utils.js';
import {
  asArray,
  asBytes,
  asDid,
  asObj,
  asSafeUint,
  blake3,
  bytesEqual,
  type ContentId,
  contentIdOfBytes,
  type Did,
  didFromPublicKey,
  encode,
  err,
  ok,
  type Result,
  type Rng,
  toHex,
  utf8,
} from '../core/index.ts';
import { fault, FrostErrorCodes, type FrostFault } from './errors.ts';

/** The FROST ciphersuite used throughout: FROST(Ed25519, SHA-512), RFC 9591 §6.1. */
export const suite = ed25519_FROST;
const Point = ed25519.Point;
/** Scalar field of the suite (mod L). */
export const Fn = ed25519_FROST.utils.Fn;

/** Our `Rng` in the shape noble's functions take. */
export function nobleRng(rng: Rng): RNG {
  return ((n?: number) => rng(n ?? 32)) as RNG;
}

/** The largest group this implementation forms or signs for (the Zcash big-identifier vector uses 257). */
export const MAX_PARTICIPANTS = 1000;

/**
 * Pays noble's one-time costs up front (the base-point table, about 130 ms here), so the first
 * DKG or signing session of a process is not slower than the rest.
 */
export function warmUp(): void {
  const p = Point.BASE.multiply(3n);
  p.multiply(5n);
  decodeElement(p.toBytes());
}

/** Threshold parameters: `min` signers out of `max` participants. */
export interface Threshold {
  readonly min: number;
  readonly max: number;
}

/** The public key material of a group; identifier `i` is at index `i − 1`. */
export interface PublicPackage extends Threshold {
  /** VSS commitment (RFC 9591 App. C.2): `min` points; `commitments[0]` is the group key. */
  readonly commitments: readonly Uint8Array[];
  /** Verifying share of identifier `i` at index `i − 1` (`max` points). */
  readonly verifyingShares: readonly Uint8Array[];
}

/** A group's public package plus its roster: identifier `i` is held by `roster[i − 1]`. */
export interface GroupPublic extends PublicPackage {
  readonly roster: readonly Did[];
}

/** A participant's secret: its identifier and RFC 9591 signing share (32-byte scalar). */
export interface ShareSecret {
  readonly identifier: number;
  readonly signingShare: Uint8Array;
}

/**
 * Checks threshold parameters: 2 ≤ min ≤ max ≤ {@link MAX_PARTICIPANTS} (noble and frost-rs
 * refuse 1-of-n; a single signer needs no FROST).
 */
export function checkThreshold(t: Threshold): Result<void, FrostFault> {
  const good = Number.isSafeInteger(t.min) && Number.isSafeInteger(t.max) && t.min >= 2 && t.min <= t.max && t.max <= MAX_PARTICIPANTS;
  return good
    ? ok(undefined)
    : err(fault(FrostErrorCodes.BAD_PARAMS, `need 2 ≤ threshold ≤ participants ≤ ${MAX_PARTICIPANTS}, got ${t.min}-of-${t.max}`));
}

/** The noble (hex) form of identifier `i` (RFC 9591 §3: scalar `i`, 32-byte little-endian). */
export function idHex(i: number): string {
  return suite.Identifier.fromNumber(i);
}

/** The 1-based identifier number of a noble hex identifier, if it is below 2^32. */
export function idNumber(hex: string): number {
  const n = Fn.fromBytes(Buffer.from(hex, 'hex'));
  return Number(n);
}

/** The group's did:key: the Ed25519 key `commitments[0]` (spec §2.2: an ordinary did:key). */
export function groupDid(p: PublicPackage): Did {
  return didFromPublicKey(p.commitments[0]!);
}

/** A short stable tag for a group did, used in NATS subjects and file names (16 hex chars). */
export function groupTag(did: Did): string {
  return toHex(blake3(utf8(did))).slice(0, 16);
}

/** The noble `FrostPublic` form of a package. */
export function toNoblePublic(p: PublicPackage): TArg<FrostPublic> {
  const verifyingShares: Record<string, Uint8Array> = {};
  p.verifyingShares.forEach((v, i) => {
    verifyingShares[idHex(i + 1)] = v;
  });
  return { signers: { min: p.min, max: p.max }, commitments: [...p.commitments], verifyingShares };
}

/** Our package from noble's `FrostPublic` (identifiers must be exactly 1..max). */
export function fromNoblePublic(p: TArg<FrostPublic>): PublicPackage {
  const verifyingShares: Uint8Array[] = [];
  for (let i = 1; i <= p.signers.max; i++) {
    const v = p.verifyingShares[idHex(i)];
    if (!v) throw new Error(`public package lacks verifying share ${i}`);
    verifyingShares.push(v);
  }
  return { min: p.signers.min, max: p.signers.max, commitments: [...p.commitments], verifyingShares };
}

/** Canonical CBOR map of a group package (field names snake_case, as on the wire). */
export function groupToCbor(g: GroupPublic): Record<string, unknown> {
  return {
    min: g.min,
    max: g.max,
    commitments: [...g.commitments],
    verifying_shares: [...g.verifyingShares],
    roster: [...g.roster],
  };
}

/** Canonical bytes of a group package. */
export function groupBytes(g: GroupPublic): Uint8Array {
  return encode(groupToCbor(g));
}

/** Content id of the package's canonical bytes: what participants confirm and coordinators compare. */
export function groupDigest(g: GroupPublic): ContentId {
  return contentIdOfBytes(groupBytes(g));
}

/**
 * Reads a decoded group package (shape only; see {@link checkGroup} for the algebra).
 * @throws JcpError `schema` / `bad-length` / `did-invalid` naming the field.
 */
export function readGroup(v: unknown, field = 'group'): GroupPublic {
  const o = asObj(v, field, ['min', 'max', 'commitments', 'verifying_shares', 'roster']);
  const min = asSafeUint(o['min'], `${field}.min`);
  const max = asSafeUint(o['max'], `${field}.max`);
  const commitments = asArray(o['commitments'], `${field}.commitments`, MAX_PARTICIPANTS).map((c, i) =>
    asBytes(c, `${field}.commitments[${i}]`, 32),
  );
  const verifyingShares = asArray(o['verifying_shares'], `${field}.verifying_shares`, MAX_PARTICIPANTS).map((c, i) =>
    asBytes(c, `${field}.verifying_shares[${i}]`, 32),
  );
  const roster = asArray(o['roster'], `${field}.roster`, MAX_PARTICIPANTS).map((d, i) => asDid(d, `${field}.roster[${i}]`));
  return { min, max, commitments, verifyingShares, roster };
}

/**
 * Decodes a point under RFC 9591 §3.1 DeserializeElement: canonical encoding, on the curve, not
 * the identity, in the prime-order subgroup. Returns undefined when any of these fails.
 */
export function decodeElement(bytes: Uint8Array): ReturnType<typeof Point.fromBytes> | undefined {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 32) return undefined;
  try {
    const p = Point.fromBytes(bytes, false);
    if (p.is0() || !p.isTorsionFree() || !bytesEqual(p.toBytes(), bytes)) return undefined;
    return p;
  } catch {
    return undefined;
  }
}

/** The encoding of the identity element (y = 1), which RFC 9591 §3.1 forbids on the wire. */
export const IDENTITY_ENCODING: Uint8Array = Point.ZERO.toBytes();

/** Σ_j commitments[j] · i^j (RFC 9591 App. C.2 `vss_verify`'s right-hand side). */
function evalCommitment(points: readonly ReturnType<typeof Point.fromBytes>[], i: number): ReturnType<typeof Point.fromBytes> {
  let acc = Point.ZERO;
  let pow = 1n;
  const x = BigInt(i);
  for (const p of points) {
    acc = acc.add(p.multiplyUnsafe(pow));
    pow = Fn.mul(pow, x);
  }
  return acc;
}

/**
 * Checks a group package end to end: threshold, sizes, every point a valid element, every
 * verifying share equal to the VSS commitment evaluated at its identifier, roster without
 * duplicates, and (when given) the group key equal to `expected`'s key. Costs about
 * `max · min` point multiplications: callers cache the verdict by {@link groupDigest}.
 */
export function checkGroup(g: GroupPublic, expected?: Did): Result<Did, FrostFault> {
  const t = checkThreshold(g);
  if (!t.ok) return t;
  const bad = (why: string) => err(fault(FrostErrorCodes.UNKNOWN_GROUP, `group package: ${why}`));
  if (g.commitments.length !== g.min) return bad(`${g.commitments.length} commitments for threshold ${g.min}`);
  if (g.verifyingShares.length !== g.max || g.roster.length !== g.max)
    return bad(`verifying shares/roster do not list ${g.max} participants`);
  if (new Set(g.roster).size !== g.roster.length) return bad('a did appears twice in the roster');
  const points = [];
  for (const c of g.commitments) {
    const p = decodeElement(c);
    if (!p) return bad('a commitment is not a valid element');
    points.push(p);
  }
  for (let i = 1; i <= g.max; i++) {
    const v = decodeElement(g.verifyingShares[i - 1]!);
    if (!v?.equals(evalCommitment(points, i))) return bad(`verifying share ${i} does not match the commitment`);
  }
  let did: Did;
  try {
    did = groupDid(g);
  } catch (e) {
    return bad(`group key is not a usable did:key: ${(e as Error).message}`);
  }
  if (expected !== undefined && did !== expected) return bad(`its key is ${did}, not ${expected}`);
  return ok(did);
}

/** A signing commitment (RFC 9591 §5.1 round one output) with a numeric identifier. */
export interface SigningCommitment {
  readonly identifier: number;
  readonly hiding: Uint8Array;
  readonly binding: Uint8Array;
}

/** noble's form of a commitment list. */
export function toNobleCommitments(list: readonly SigningCommitment[]): TArg<NonceCommitments[]> {
  return list.map((c) => ({ identifier: idHex(c.identifier), hiding: c.hiding, binding: c.binding }));
}

/** A commitment's stable id: content id of its canonical CBOR (used by the nonce journal). */
export function commitmentId(c: SigningCommitment): ContentId {
  return contentIdOfBytes(encode({ identifier: c.identifier, hiding: c.hiding, binding: c.binding }));
}
