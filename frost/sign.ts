/**
 * Threshold signing as pure rounds (RFC 9591 §5): commit, check the signing package, sign a
 * share, verify every share, aggregate. The arithmetic is noble's `ed25519_FROST`; this module
 * adds the checks a participant and a coordinator must make around it, with faults that name
 * the misbehaving identifiers.
 *
 * Each nonce pair is used once: {@link signShare} zeroes it (noble does), and a zeroed pair is
 * refused. Keeping that promise across crashes is the nonce journal's job (`journal.ts`).
 * Pure: randomness is an argument; no I/O, no clock.
 */
import type { Nonces } from '@noble/curves/abstract/frost.js';
import { bytesEqual, err, ok, parseDid, type Result, type Rng, verify } from '../core/index.ts';
import { type Culprit, fault, FrostErrorCodes, type FrostFault } from './errors.ts';
import {
  decodeElement,
  Fn,
  groupDid,
  IDENTITY_ENCODING,
  idHex,
  nobleRng,
  idNumber,
  type PublicPackage,
  type ShareSecret,
  type SigningCommitment,
  suite,
  toNobleCommitments,
  toNoblePublic,
} from './group.ts';

export type { Nonces };

/** What a coordinator sends to each chosen signer (RFC 9591 §5.2 inputs). */
export interface SigningPackage {
  readonly message: Uint8Array;
  /** One commitment per chosen signer; order is not significant (RFC 9591 sorts by identifier). */
  readonly commitments: readonly SigningCommitment[];
}

/**
 * Round one (RFC 9591 §5.1): fresh hiding and binding nonces for `share`, and their public
 * commitments. `rng` supplies 32 bytes per nonce (hiding first), which RFC 9591 §4.1 hashes
 * with the secret share.
 */
export function commit(share: ShareSecret, rng: Rng): { nonces: Nonces; commitment: SigningCommitment } {
  const g = suite.commit({ identifier: idHex(share.identifier), signingShare: share.signingShare }, nobleRng(rng));
  return { nonces: g.nonces, commitment: { identifier: share.identifier, hiding: g.commitments.hiding, binding: g.commitments.binding } };
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
 * Round two (RFC 9591 §5.2): this participant's signature share. Runs {@link checkPackage}
 * first; then noble, which also refuses points off the prime-order subgroup and a nonce pair
 * already used (all-zero). Consumes `nonces` (zeroed) once noble has produced the share.
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
  if (Fn.is0(Fn.fromBytes(nonces.hiding)) || Fn.is0(Fn.fromBytes(nonces.binding))) {
    return err(fault(FrostErrorCodes.NONCE_USED, 'these nonces were already used'));
  }
  try {
    return ok(
      suite.signShare(
        { identifier: idHex(share.identifier), signingShare: share.signingShare },
        toNoblePublic(pub),
        nonces,
        toNobleCommitments(pkg.commitments),
        pkg.message,
      ),
    );
  } catch (e) {
    return err(fault(FrostErrorCodes.BAD_PACKAGE, `signing package refused: ${(e as Error).message}`));
  }
}

/**
 * Coordinator side (RFC 9591 §5.4): the identifiers whose share fails verification (or is
 * missing, or whose commitment is not a valid element). Empty when every share is good.
 * Elements are decoded once, by noble; only when that throws (an invalid element somewhere in the
 * list spoils every share's check) are the commitments decoded one by one to name the culprit.
 */
export function badShares(pub: PublicPackage, pkg: SigningPackage, shares: ReadonlyMap<number, Uint8Array>): Culprit[] {
  const invalid = pkg.commitments.filter(
    (c) =>
      c.hiding.length !== 32 ||
      c.binding.length !== 32 ||
      bytesEqual(c.hiding, IDENTITY_ENCODING) ||
      bytesEqual(c.binding, IDENTITY_ENCODING),
  );
  if (invalid.length) return invalid.map((c) => ({ identifier: c.identifier }));
  const list = toNobleCommitments(pkg.commitments);
  const noble = toNoblePublic(pub);
  const bad: Culprit[] = [];
  for (const c of pkg.commitments) {
    const s = shares.get(c.identifier);
    let good = false;
    if (s && s.length === 32) {
      try {
        good = suite.verifyShare(noble, list, pkg.message, idHex(c.identifier), s);
      } catch {
        const culprits = pkg.commitments
          .filter((x) => !decodeElement(x.hiding) || !decodeElement(x.binding))
          .map((x) => ({ identifier: x.identifier }));
        if (culprits.length) return culprits;
        good = false;
      }
    }
    if (!good) bad.push({ identifier: c.identifier });
  }
  return bad;
}

/**
 * Aggregates (RFC 9591 §5.3) after verifying every share (§5.4), then checks the result as an
 * ordinary Ed25519 signature under the group's did:key with the project's verifier
 * (`core/ed25519.ts`). Faults: `frost-bad-signature-share` naming every bad signer;
 * `frost-bad-signature` if the aggregate still does not verify.
 */
export function aggregate(
  pub: PublicPackage,
  pkg: SigningPackage,
  shares: ReadonlyMap<number, Uint8Array>,
): Result<Uint8Array, FrostFault> {
  const bad = badShares(pub, pkg, shares);
  if (bad.length) return err(fault(FrostErrorCodes.BAD_SIGNATURE_SHARE, 'signature share(s) failed verification', bad));
  let sig: Uint8Array;
  try {
    const byId: Record<string, Uint8Array> = {};
    for (const [id, s] of shares) byId[idHex(id)] = s;
    sig = suite.aggregate(toNoblePublic(pub), toNobleCommitments(pkg.commitments), pkg.message, byId);
  } catch (e) {
    const cheaters = ((e as { cheaters?: string[] }).cheaters ?? []).map((h) => ({ identifier: idNumber(h) }));
    return err(fault(FrostErrorCodes.BAD_SIGNATURE_SHARE, `aggregation failed: ${(e as Error).message}`, cheaters));
  }
  if (!verify(parseDid(groupDid(pub)), pkg.message, sig)) {
    return err(fault(FrostErrorCodes.BAD_SIGNATURE, 'the aggregate does not verify as Ed25519 under the group key'));
  }
  return ok(sig);
}

/**
 * What one share alone can produce: a Schnorr signature that uses the share as if it were the
 * group's secret key. It never verifies under the group key (unless the threshold is 1, which
 * {@link checkThreshold} forbids); conformance checks this rather than assuming it.
 */
export function soloSignature(share: ShareSecret, message: Uint8Array): Uint8Array {
  return suite.sign(message, share.signingShare);
}
