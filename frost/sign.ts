/**
 * Threshold signing as pure rounds (RFC 9591 §5): commit, check the signing package, sign a
 * share, verify every share, aggregate. The rounds are written here (RFC 9591 §4, §5, §6.1
 * FROST(Ed25519, SHA-512)) over the group operations of `curve.ts` (libsodium by default,
 * `@noble/curves` as the reference), with the checks a participant and a coordinator must make
 * around them and faults that name the misbehaving identifiers.
 *
 * Each nonce pair is used once: {@link signShare} zeroes it, and a zeroed pair is
 * refused. Keeping that promise across crashes is the nonce journal's job (`journal.ts`).
 * Pure: randomness is an argument; no I/O, no clock.
 */
import { sha512 } from '@noble/hashes/sha2.js';
import { bytesEqual, concat, err, ok, parseDid, type Result, type Rng, utf8, verify } from '../core/index.ts';
import { curve } from './curve.ts';
import { type Culprit, fault, FrostErrorCodes, type FrostFault } from './errors.ts';
import { groupDid, IDENTITY_ENCODING, type PublicPackage, type ShareSecret, type SigningCommitment, suite } from './group.ts';

/** A signer's secret round-one nonces (RFC 9591 §5.1): two 32-byte little-endian scalars. */
export interface Nonces {
  readonly hiding: Uint8Array;
  readonly binding: Uint8Array;
}

/** What a coordinator sends to each chosen signer (RFC 9591 §5.2 inputs). */
export interface SigningPackage {
  readonly message: Uint8Array;
  /** One commitment per chosen signer; order is not significant (RFC 9591 sorts by identifier). */
  readonly commitments: readonly SigningCommitment[];
}

const CONTEXT = 'FROST-ED25519-SHA512-v1';
const DST = { rho: utf8(`${CONTEXT}rho`), nonce: utf8(`${CONTEXT}nonce`), msg: utf8(`${CONTEXT}msg`), com: utf8(`${CONTEXT}com`) };
/** The group order L, little-endian. */
const L_BYTES = Uint8Array.from(Buffer.from('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010', 'hex'));

/** True when `s` is 32 bytes encoding an integer below L (RFC 9591 §3.1 DeserializeScalar). */
export function isCanonicalScalar(s: Uint8Array): boolean {
  if (!(s instanceof Uint8Array) || s.length !== 32) return false;
  for (let i = 31; i >= 0; i--) {
    if (s[i]! < L_BYTES[i]!) return true;
    if (s[i]! > L_BYTES[i]!) return false;
  }
  return false;
}

/** RFC 9591 §3 SerializeScalar of identifier `i`: 32-byte little-endian. */
function idScalar(i: number): Uint8Array {
  const b = new Uint8Array(32);
  let n = BigInt(i);
  for (let k = 0; k < 32 && n > 0n; k++) {
    b[k] = Number(n & 0xffn);
    n >>= 8n;
  }
  return b;
}

const isZero = (s: Uint8Array): boolean => s.every((x) => x === 0);

/** RFC 9591 §4.1 nonce_generate: H3(random_bytes(32) ‖ SerializeScalar(secret)). */
function nonceGenerate(secret: Uint8Array, rng: Rng): Uint8Array {
  const k = curve.scalarReduce64(sha512(concat(DST.nonce, rng(32), secret)));
  // Probability 2^-252; a zero nonce would publish the identity as a commitment.
  if (isZero(k)) throw new Error('nonce_generate produced zero');
  return k;
}

/**
 * Round one (RFC 9591 §5.1): fresh hiding and binding nonces for `share`, and their public
 * commitments. `rng` supplies 32 bytes per nonce (hiding first), which RFC 9591 §4.1 hashes
 * with the secret share.
 */
export function commit(share: ShareSecret, rng: Rng): { nonces: Nonces; commitment: SigningCommitment } {
  const hiding = nonceGenerate(share.signingShare, rng);
  const binding = nonceGenerate(share.signingShare, rng);
  return {
    nonces: { hiding, binding },
    commitment: { identifier: share.identifier, hiding: curve.baseMul(hiding), binding: curve.baseMul(binding) },
  };
}

/** What RFC 9591 §4.4–§4.6 derive from a signing package, per signer and for the group. */
interface Prepared {
  /** The group commitment R. */
  readonly R: Uint8Array;
  /** The challenge c = H2(R ‖ PK ‖ msg). */
  readonly c: Uint8Array;
  /** Per signer: binding factor ρ_i, commitment share R_i = D_i + ρ_i·E_i, Lagrange λ_i. */
  readonly signers: ReadonlyMap<number, { rho: Uint8Array; Ri: Uint8Array; lambda: Uint8Array }>;
}

/**
 * RFC 9591 §4.4 binding factors, §4.5 group commitment, §4.2 Lagrange coefficients and §4.6
 * challenge for a package whose commitments are all valid elements (callers check). The list is
 * sorted by identifier first, as the RFC encodes it.
 */
function prepare(pub: PublicPackage, pkg: SigningPackage): Prepared {
  const list = [...pkg.commitments].sort((a, b) => a.identifier - b.identifier);
  const gpk = pub.commitments[0]!;
  const ids = list.map((c) => idScalar(c.identifier));
  const encoded = concat(...list.flatMap((c, k) => [ids[k]!, c.hiding, c.binding]));
  const prefix = concat(gpk, sha512(concat(DST.msg, pkg.message)), sha512(concat(DST.com, encoded)));
  let R: Uint8Array | undefined;
  const rows: { id: number; rho: Uint8Array; Ri: Uint8Array }[] = [];
  list.forEach((c, k) => {
    const rho = curve.scalarReduce64(sha512(concat(DST.rho, prefix, ids[k]!)));
    const Ri = curve.add(c.hiding, curve.mul(c.binding, rho));
    R = R === undefined ? Ri : curve.add(R, Ri);
    rows.push({ id: c.identifier, rho, Ri });
  });
  const c = curve.scalarReduce64(sha512(concat(R!, gpk, pkg.message)));
  const signers = new Map<number, { rho: Uint8Array; Ri: Uint8Array; lambda: Uint8Array }>();
  rows.forEach((row, k) => {
    let num = idScalar(1);
    let den = idScalar(1);
    ids.forEach((x, j) => {
      if (j === k) return;
      num = curve.scalarMul(num, x);
      den = curve.scalarMul(den, curve.scalarSub(x, ids[k]!));
    });
    signers.set(row.id, { rho: row.rho, Ri: row.Ri, lambda: curve.scalarMul(num, curve.scalarInvert(den)) });
  });
  return { R: R!, c, signers };
}

/** The identifiers whose hiding or binding commitment is not a valid element (RFC 9591 §3.1). */
function invalidCommitments(pkg: SigningPackage): Culprit[] {
  return pkg.commitments
    .filter((c) => !curve.isElement(c.hiding) || !curve.isElement(c.binding))
    .map((c) => ({ identifier: c.identifier }));
}

/**
 * The participant-side check of a signing package before any share is produced: the number of
 * signers is within `min..max`; every identifier is in `1..max` (never zero) and appears once;
 * this participant's commitment is present and byte-equal to the one it handed out; no
 * commitment is the identity element. Returns `frost-bad-package` naming the offending entries.
 * (Subgroup and canonical-encoding checks of the points happen inside {@link signShare}.)
 */
export function checkPackage(pub: PublicPackage, mine: SigningCommitment, pkg: SigningPackage): Result<void, FrostFault> {
  const bad = (why: string, culprits: Culprit[] = []) =>
    err(fault(FrostErrorCodes.BAD_PACKAGE, `signing package refused: ${why}`, culprits));
  const n = pkg.commitments.length;
  if (n < pub.min || n > pub.max) return bad(`${n} signers, need ${pub.min}..${pub.max}`);
  const seen = new Set<number>();
  for (const c of pkg.commitments) {
    if (c.identifier === 0) return bad('zero identifier');
    if (!Number.isSafeInteger(c.identifier)) return bad('identifier is not an integer');
    if (c.identifier < 1 || c.identifier > pub.max) return bad(`identifier ${c.identifier} outside 1..${pub.max}`);
    if (seen.has(c.identifier)) return bad(`identifier ${c.identifier} appears twice`, [{ identifier: c.identifier }]);
    seen.add(c.identifier);
    if (bytesEqual(c.hiding, IDENTITY_ENCODING) || bytesEqual(c.binding, IDENTITY_ENCODING)) {
      return bad(`commitment of ${c.identifier} is the identity element`, [{ identifier: c.identifier }]);
    }
    if (c.hiding.length !== 32 || c.binding.length !== 32) return bad(`commitment of ${c.identifier} is not 2 × 32 bytes`);
  }
  const own = pkg.commitments.find((c) => c.identifier === mine.identifier);
  if (!own) return bad(`my commitment (identifier ${mine.identifier}) is missing`);
  if (!bytesEqual(own.hiding, mine.hiding) || !bytesEqual(own.binding, mine.binding)) return bad('my commitment was altered');
  return ok(undefined);
}

/**
 * Round two (RFC 9591 §5.2): this participant's signature share
 * `z_i = d_i + e_i·ρ_i + λ_i·s_i·c`. Runs {@link checkPackage} first; then refuses commitments
 * that are not valid elements (RFC 9591 §3.1: off the curve, small order, non-canonical), a nonce
 * pair already used (all-zero) or one that does not match `mine`. Consumes `nonces` (zeroed)
 * once the share is produced. Faults: `frost-bad-package`, `frost-nonce-used`.
 */
export function signShare(
  pub: PublicPackage,
  share: ShareSecret,
  nonces: Nonces,
  mine: SigningCommitment,
  pkg: SigningPackage,
): Result<Uint8Array, FrostFault> {
  const c = checkPackage(pub, mine, pkg);
  if (!c.ok) return c;
  if (isZero(nonces.hiding) || isZero(nonces.binding)) {
    return err(fault(FrostErrorCodes.NONCE_USED, 'these nonces were already used'));
  }
  const refuse = (why: string, culprits: Culprit[] = []) =>
    err(fault(FrostErrorCodes.BAD_PACKAGE, `signing package refused: ${why}`, culprits));
  if (!isCanonicalScalar(nonces.hiding) || !isCanonicalScalar(nonces.binding) || !isCanonicalScalar(share.signingShare)) {
    return refuse('nonces or signing share are not canonical scalars');
  }
  if (!bytesEqual(curve.baseMul(nonces.hiding), mine.hiding) || !bytesEqual(curve.baseMul(nonces.binding), mine.binding)) {
    return refuse('incorrect signer commitment (the nonces are not the ones committed to)');
  }
  // My own commitment is checked above (byte-equal to `mine`, which is baseMul of my nonces:
  // a valid element by construction); every other one is decoded under RFC 9591 §3.1 here.
  const others = pkg.commitments.filter((x) => x.identifier !== share.identifier);
  const invalid = invalidCommitments({ message: pkg.message, commitments: others });
  if (invalid.length) return refuse('a commitment is not a valid element', invalid);
  const p = prepare(pub, pkg);
  const me = p.signers.get(share.identifier)!;
  const t = curve.scalarMul(curve.scalarMul(me.lambda, share.signingShare), p.c);
  const z = curve.scalarAdd(curve.scalarAdd(nonces.hiding, curve.scalarMul(nonces.binding, me.rho)), t);
  (nonces.hiding as Uint8Array).fill(0);
  (nonces.binding as Uint8Array).fill(0);
  return ok(z);
}

/**
 * The commitment checks a coordinator makes before anything is derived from a package: every
 * commitment 2 × 32 bytes and not the identity, every point a valid element (RFC 9591 §3.1),
 * identifiers in `1..max` and distinct. Returns the offending identifiers (all of them when the
 * identifiers are wrong), empty when the package is sound.
 */
function packageCulprits(pub: PublicPackage, pkg: SigningPackage): Culprit[] {
  const malformed = pkg.commitments.filter(
    (c) =>
      c.hiding.length !== 32 ||
      c.binding.length !== 32 ||
      bytesEqual(c.hiding, IDENTITY_ENCODING) ||
      bytesEqual(c.binding, IDENTITY_ENCODING),
  );
  if (malformed.length) return malformed.map((c) => ({ identifier: c.identifier }));
  const invalid = invalidCommitments(pkg);
  if (invalid.length) return invalid;
  const ids = pkg.commitments.map((c) => c.identifier);
  const inRange = ids.every((i) => Number.isSafeInteger(i) && i >= 1 && i <= pub.max);
  if (!inRange || new Set(ids).size !== ids.length) return ids.map((identifier) => ({ identifier }));
  return [];
}

/** RFC 9591 §5.4 for one signer: `z_i` present, canonical, and `z_i·G = R_i + (c·λ_i)·PK_i`. */
function shareVerifies(pub: PublicPackage, prepared: Prepared, id: number, z: Uint8Array | undefined): boolean {
  const me = prepared.signers.get(id)!;
  const pk = pub.verifyingShares[id - 1]!;
  return (
    z !== undefined &&
    isCanonicalScalar(z) &&
    bytesEqual(curve.baseMul(z), curve.add(me.Ri, curve.mul(pk, curve.scalarMul(prepared.c, me.lambda))))
  );
}

/** The identifiers of the package whose share fails {@link shareVerifies}. */
function failingShares(pub: PublicPackage, prepared: Prepared, pkg: SigningPackage, shares: ReadonlyMap<number, Uint8Array>): Culprit[] {
  return pkg.commitments
    .map((c) => c.identifier)
    .filter((id) => !shareVerifies(pub, prepared, id, shares.get(id)))
    .map((identifier) => ({ identifier }));
}

/**
 * Coordinator side (RFC 9591 §5.4): the identifiers whose share fails verification (or is
 * missing, or whose commitment is not a valid element). Empty when every share is good.
 */
export function badShares(pub: PublicPackage, pkg: SigningPackage, shares: ReadonlyMap<number, Uint8Array>): Culprit[] {
  const culprits = packageCulprits(pub, pkg);
  if (culprits.length) return culprits;
  return failingShares(pub, prepare(pub, pkg), pkg, shares);
}

/**
 * What a coordinator derives from a signing package before any share exists (see
 * {@link planAggregate}). Opaque: pass it to {@link aggregatePlanned} with the same `pub`.
 */
export interface AggregationPlan {
  readonly pkg: SigningPackage;
  /** The package's commitment checks failed: these identifiers are at fault. */
  readonly culprits: readonly Culprit[];
  readonly prepared?: Prepared;
}

/**
 * The part of aggregation that needs only the package (RFC 9591 §5.3–§5.4): the commitment
 * checks (sizes, identity, valid elements per §3.1, identifiers) and the binding factors, group
 * commitment, Lagrange coefficients and challenge. Never fails: a bad package is carried in the
 * plan and reported by {@link aggregatePlanned}, so a coordinator can compute this while the
 * signers compute their shares, off the session's critical path.
 */
export function planAggregate(pub: PublicPackage, pkg: SigningPackage): AggregationPlan {
  const culprits = packageCulprits(pub, pkg);
  return culprits.length ? { pkg, culprits } : { pkg, culprits, prepared: prepare(pub, pkg) };
}

/**
 * Aggregates (RFC 9591 §5.3) the shares of a planned package and checks the result as an
 * ordinary Ed25519 signature under the group's did:key with the project's verifier
 * (`core/ed25519.ts`). Every share must be present and a canonical scalar (§5.3
 * DeserializeScalar); the sum is then verified as a whole, and only when it does not verify is
 * each share checked on its own (§5.4 identifiable abort) to name the signers at fault, as
 * frost-rs does: a signature that verifies under the group key is a valid one whoever's shares
 * made it, and a failed one names exactly the signers the per-share check would. Faults:
 * `frost-bad-signature-share` naming every bad signer (or none, when the signer count is outside
 * `min..max` or a share comes from outside the package; or the commitments the plan refused);
 * `frost-bad-signature` if the aggregate does not verify and no single share is at fault.
 */
export function aggregatePlanned(
  pub: PublicPackage,
  plan: AggregationPlan,
  shares: ReadonlyMap<number, Uint8Array>,
): Result<Uint8Array, FrostFault> {
  const pkg = plan.pkg;
  const n = pkg.commitments.length;
  const listed = new Set(pkg.commitments.map((c) => c.identifier));
  if (n < pub.min || n > pub.max || [...shares.keys()].some((id) => !listed.has(id))) {
    return err(fault(FrostErrorCodes.BAD_SIGNATURE_SHARE, `aggregation failed: ${n} signers, ${shares.size} shares`, []));
  }
  const prepared = plan.prepared;
  const badShare = (culprits: Culprit[]) =>
    err(fault(FrostErrorCodes.BAD_SIGNATURE_SHARE, 'signature share(s) failed verification', culprits));
  if (!prepared || plan.culprits.length) return badShare([...plan.culprits]);
  const zs = pkg.commitments.map((c) => shares.get(c.identifier));
  if (zs.some((z) => z === undefined || !isCanonicalScalar(z))) return badShare(failingShares(pub, prepared, pkg, shares));
  let z: Uint8Array = new Uint8Array(32);
  for (const zi of zs) z = curve.scalarAdd(z, zi!);
  const sig = concat(prepared.R, z);
  if (verify(parseDid(groupDid(pub)), pkg.message, sig)) return ok(sig);
  const culprits = failingShares(pub, prepared, pkg, shares);
  if (culprits.length) return badShare(culprits);
  return err(fault(FrostErrorCodes.BAD_SIGNATURE, 'the aggregate does not verify as Ed25519 under the group key'));
}

/**
 * Aggregates (RFC 9591 §5.3): {@link planAggregate} then {@link aggregatePlanned}, in one call.
 * Faults: `frost-bad-signature-share` naming every bad signer (or none, when the signer count
 * is outside `min..max` or a share comes from outside the package); `frost-bad-signature` if
 * the aggregate does not verify and no single share is at fault.
 */
export function aggregate(
  pub: PublicPackage,
  pkg: SigningPackage,
  shares: ReadonlyMap<number, Uint8Array>,
): Result<Uint8Array, FrostFault> {
  const n = pkg.commitments.length;
  const listed = new Set(pkg.commitments.map((c) => c.identifier));
  // The cheap count checks first, as before: no point arithmetic for a package of the wrong size.
  if (n < pub.min || n > pub.max || [...shares.keys()].some((id) => !listed.has(id))) {
    return err(fault(FrostErrorCodes.BAD_SIGNATURE_SHARE, `aggregation failed: ${n} signers, ${shares.size} shares`, []));
  }
  return aggregatePlanned(pub, planAggregate(pub, pkg), shares);
}

/**
 * What one share alone can produce: a Schnorr signature that uses the share as if it were the
 * group's secret key. It never verifies under the group key (unless the threshold is 1, which
 * {@link checkThreshold} forbids); conformance checks this rather than assuming it.
 */
export function soloSignature(share: ShareSecret, message: Uint8Array): Uint8Array {
  return suite.sign(message, share.signingShare);
}
