/**
 * Trusted-dealer key generation (spec §2.2, RFC 9591 Appendix C): one party draws the group
 * secret and a polynomial of degree `min − 1`, and hands participant `i` the share `f(i)`.
 * The dealer also draws each participant's own Ed25519 identity (used to sign its protocol
 * messages), so every share it writes is a complete credential.
 *
 * Pure: randomness is an argument. The polynomial and commitment come from noble
 * (`utils.generateSecretPolynomial`); shares are `f(i)` in noble's scalar field, each checked
 * with noble's `validateSecret` (RFC 9591 App. C.2 `vss_verify`) before it is returned.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { type Actor, actorFromSeed, type Did, err, ok, type Result, type Rng } from '../core/index.ts';
import { fault, FrostErrorCodes, type FrostFault } from './errors.ts';
import {
  checkThreshold,
  Fn,
  type GroupPublic,
  groupDid,
  idHex,
  nobleRng,
  type ShareSecret,
  suite,
  type Threshold,
  toNoblePublic,
} from './group.ts';

/** One participant's output of a deal: its share, its identity, and the group package. */
export interface DealtShare extends ShareSecret {
  /** The participant's own Ed25519 identity seed (32 bytes), listed in `group.roster`. */
  readonly identitySeed: Uint8Array;
  readonly group: GroupPublic;
}

/** A finished deal. */
export interface Deal {
  readonly did: Did;
  readonly group: GroupPublic;
  /** One per participant, identifier order (`shares[i − 1]` is identifier `i`). */
  readonly shares: readonly DealtShare[];
}

/** Options that pin the polynomial (RFC 9591 App. E vectors): otherwise both are drawn from `rng`. */
export interface DealFixed {
  /** The group secret scalar `f(0)` (32 bytes, little-endian). */
  readonly secret?: Uint8Array;
  /** The coefficients after the constant term (`min − 1` scalars, 32 bytes each). */
  readonly coefficients?: readonly Uint8Array[];
  /** Participants' identities; drawn from `rng` when absent. */
  readonly identities?: readonly Actor[];
}

/** `f(x)` by Horner's rule in the scalar field. */
function evalPoly(coeffs: readonly bigint[], x: bigint): bigint {
  let acc = Fn.ZERO;
  for (let j = coeffs.length - 1; j >= 0; j--) acc = Fn.add(Fn.mul(acc, x), coeffs[j]!);
  return acc;
}

/**
 * Splits a fresh (or given) group secret `min`-of-`max` (RFC 9591 Appendix C).
 * Returns `frost-bad-params` for a threshold outside 2 ≤ min ≤ max ≤ MAX_PARTICIPANTS.
 */
export function deal(t: Threshold, rng: Rng, fixed: DealFixed = {}): Result<Deal, FrostFault> {
  const c = checkThreshold(t);
  if (!c.ok) return c;
  const signers = { min: t.min, max: t.max };
  const coeffs = fixed.coefficients?.map((b) => Fn.fromBytes(b));
  const poly = suite.utils.generateSecretPolynomial(signers, fixed.secret, coeffs, nobleRng(rng));
  const identities = fixed.identities ?? Array.from({ length: t.max }, () => actorFromSeed(rng(32)));
  if (identities.length !== t.max) throw new RangeError(`deal: ${identities.length} identities for ${t.max} participants`);
  const secrets: ShareSecret[] = [];
  const verifyingShares: Uint8Array[] = [];
  for (let i = 1; i <= t.max; i++) {
    const s = evalPoly(poly.coefficients, BigInt(i));
    const signingShare = Fn.toBytes(s);
    secrets.push({ identifier: i, signingShare });
    verifyingShares.push(ed25519.Point.BASE.multiply(s).toBytes());
  }
  poly.coefficients.fill(Fn.ZERO);
  const group: GroupPublic = {
    min: t.min,
    max: t.max,
    commitments: poly.commitment,
    verifyingShares,
    roster: identities.map((a) => a.did),
  };
  const pub = toNoblePublic(group);
  for (const s of secrets) suite.validateSecret({ identifier: idHex(s.identifier), signingShare: s.signingShare }, pub);
  const shares = secrets.map((s, i) => ({ ...s, identitySeed: identities[i]!.key.seed, group }));
  let did: Did;
  try {
    did = groupDid(group);
  } catch (e) {
    // A group key of small order has probability ~2^-250; refuse rather than hand it out.
    return err(fault(FrostErrorCodes.BAD_PARAMS, `drawn group key unusable: ${(e as Error).message}`));
  }
  return ok({ did, group, shares });
}
