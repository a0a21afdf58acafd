/**
 * Distributed key generation as pure rounds (spec §2.2: the group's private key never exists
 * anywhere). The rounds are the frost-rs / noble split (Pedersen DKG with proofs of knowledge):
 *
 * 1. {@link dkgRound1}: draw a polynomial, broadcast its commitment and a proof of knowledge.
 * 2. {@link dkgRound2}: check everyone's round-1 package, compute one share `f_me(j)` per peer.
 * 3. {@link dkgRound3}: check every received share against its sender's commitment, sum them.
 *
 * The arithmetic is noble's `ed25519_FROST.DKG`. What this module adds is blame: noble stops at
 * the first bad proof or share with an anonymous error, so on failure each package and share is
 * checked on its own and the fault names every sender who misbehaved. Pure: no I/O, no clock;
 * randomness is an argument. Nothing here encrypts or authenticates: that is the actor's job.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import type { DKG_Secret } from '@noble/curves/abstract/frost.js';
import { sha512 } from '@noble/hashes/sha2.js';
import { concat, err, ok, type Result, type Rng, utf8 } from '../core/index.ts';
import { type Culprit, fault, FrostErrorCodes, type FrostFault } from './errors.ts';
import {
  checkThreshold,
  decodeElement,
  Fn,
  fromNoblePublic,
  idHex,
  nobleRng,
  idNumber,
  type PublicPackage,
  type ShareSecret,
  suite,
  type Threshold,
} from './group.ts';

/** A participant's public round-1 broadcast: its VSS commitment and proof of knowledge of `a0`. */
export interface Round1Package {
  readonly identifier: number;
  /** `min` points: `a_j · G` for the sender's polynomial coefficients. */
  readonly commitment: readonly Uint8Array[];
  /** Schnorr proof of knowledge of `a0` (R ‖ μ, 64 bytes). */
  readonly proof: Uint8Array;
}

/** A participant's private DKG state between rounds (mutable noble state inside; never serialize it). */
export interface DkgState {
  readonly identifier: number;
  readonly threshold: Threshold;
  readonly secret: DKG_Secret;
}

/** What a finished DKG leaves with one participant. */
export interface DkgResult {
  readonly public: PublicPackage;
  readonly secret: ShareSecret;
}

function toNobleRound1(p: Round1Package) {
  return { identifier: idHex(p.identifier), commitment: [...p.commitment], proofOfKnowledge: p.proof };
}

function checkIdentifier(id: number, t: Threshold): boolean {
  return Number.isSafeInteger(id) && id >= 1 && id <= t.max;
}

/**
 * Round 1: draws this participant's polynomial (degree `min − 1`) and proof of knowledge.
 * Returns `frost-bad-params` for a bad threshold or identifier.
 */
export function dkgRound1(identifier: number, t: Threshold, rng: Rng): Result<{ state: DkgState; package: Round1Package }, FrostFault> {
  const c = checkThreshold(t);
  if (!c.ok) return c;
  if (!checkIdentifier(identifier, t)) return err(fault(FrostErrorCodes.BAD_PARAMS, `identifier ${identifier} outside 1..${t.max}`));
  const r = suite.DKG.round1(idHex(identifier), { min: t.min, max: t.max }, undefined, nobleRng(rng));
  return ok({
    state: { identifier, threshold: t, secret: r.secret },
    package: { identifier, commitment: r.public.commitment, proof: r.public.proofOfKnowledge },
  });
}

/**
 * Rebuilds round-1 state from known coefficients `[a0, a1, …]` (32-byte scalars), as the
 * frost-rs DKG vectors require. No proof is produced (the vectors do not give its nonce).
 */
export function dkgStateFromCoefficients(identifier: number, t: Threshold, coefficients: readonly Uint8Array[]): DkgState {
  const [a0, ...rest] = coefficients;
  if (!a0 || coefficients.length !== t.min) throw new RangeError(`need ${t.min} coefficients`);
  const poly = suite.utils.generateSecretPolynomial(
    { min: t.min, max: t.max },
    a0,
    rest.map((b) => Fn.fromBytes(b)),
  );
  const secret: DKG_Secret = {
    identifier: BigInt(identifier),
    coefficients: poly.coefficients,
    commitment: poly.commitment,
    signers: { min: t.min, max: t.max },
    step: 1,
  };
  return { identifier, threshold: t, secret };
}

const HDKG_DST = utf8('FROST-ED25519-SHA512-v1dkg');

/** The proof-of-knowledge challenge: H_dkg(id ‖ a0·G ‖ R), SHA-512 little-endian mod L. */
function pokChallenge(identifier: number, phi: Uint8Array, r: Uint8Array): bigint {
  const h = sha512(concat(HDKG_DST, Fn.toBytes(BigInt(identifier)), phi, r));
  let n = 0n;
  for (let i = h.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(h[i]!);
  return Fn.create(n);
}

/**
 * Checks one round-1 package on its own: identifier in range, `min` valid commitment points
 * (RFC 9591 §3.1), and a valid proof of knowledge of the constant term. The fault names the sender.
 */
export function checkRound1(p: Round1Package, t: Threshold): Result<void, FrostFault> {
  const blame = (why: string) =>
    err(fault(FrostErrorCodes.BAD_COMMITMENT, `round-1 package from ${p.identifier}: ${why}`, [{ identifier: p.identifier }]));
  if (!checkIdentifier(p.identifier, t)) return blame(`identifier outside 1..${t.max}`);
  if (p.commitment.length !== t.min) return blame(`${p.commitment.length} commitments, expected ${t.min}`);
  const points = p.commitment.map(decodeElement);
  if (points.some((x) => x === undefined)) return blame('a commitment is not a valid element (identity, torsion or non-canonical)');
  if (!(p.proof instanceof Uint8Array) || p.proof.length !== 64) return blame('proof of knowledge is not 64 bytes');
  const R = decodeElement(p.proof.subarray(0, 32));
  if (!R) return blame('proof of knowledge R is not a valid element');
  let z: bigint;
  try {
    z = Fn.fromBytes(p.proof.subarray(32));
  } catch {
    return blame('proof of knowledge μ is not a canonical scalar');
  }
  const phi = points[0]!;
  const c = pokChallenge(p.identifier, p.commitment[0]!, p.proof.subarray(0, 32));
  const lhs = ed25519.Point.BASE.multiplyUnsafe(z).subtract(phi.multiplyUnsafe(c));
  if (!lhs.equals(R)) return blame('invalid proof of knowledge');
  return ok(undefined);
}

/**
 * Round 2: checks every other participant's round-1 package and computes the share `f_me(j)`
 * for each peer `j`. Returns the shares by recipient identifier, or a fault naming every sender
 * whose package is bad (`frost-bad-commitment`) or a duplicated identifier.
 */
export function dkgRound2(state: DkgState, others: readonly Round1Package[]): Result<Map<number, Uint8Array>, FrostFault> {
  const t = state.threshold;
  const ids = others.map((o) => o.identifier);
  if (others.length !== t.max - 1 || new Set([...ids, state.identifier]).size !== t.max) {
    return err(fault(FrostErrorCodes.BAD_PARAMS, `round 2 needs one package from each of the ${t.max - 1} other participants`));
  }
  let res: Record<string, { signingShare: Uint8Array }>;
  try {
    res = suite.DKG.round2(state.secret, others.map(toNobleRound1));
  } catch (e) {
    const culprits: Culprit[] = [];
    for (const o of others) if (!checkRound1(o, t).ok) culprits.push({ identifier: o.identifier });
    const why = culprits.length ? 'invalid round-1 package(s)' : `round 2 failed: ${(e as Error).message}`;
    return err(fault(FrostErrorCodes.BAD_COMMITMENT, why, culprits));
  }
  const out = new Map<number, Uint8Array>();
  for (const o of others) out.set(o.identifier, res[idHex(o.identifier)]!.signingShare);
  return ok(out);
}

/**
 * True when `share` (sent by `sender` to `recipient`) matches the sender's VSS commitment
 * (RFC 9591 App. C.2 `vss_verify`, via noble's `validateSecret`).
 */
export function checkRound2Share(recipient: number, t: Threshold, sender: Round1Package, share: Uint8Array): boolean {
  try {
    suite.validateSecret(
      { identifier: idHex(recipient), signingShare: share },
      { signers: { min: t.min, max: t.max }, commitments: [...sender.commitment], verifyingShares: {} },
    );
    return true;
  } catch {
    return false;
  }
}

/**
 * Round 3: checks each received share against its sender's commitment and sums them into this
 * participant's signing share; derives the group package. `received` maps sender identifier →
 * share. A bad share fails with `frost-inconsistent-share` naming every sender at fault.
 */
export function dkgRound3(
  state: DkgState,
  others: readonly Round1Package[],
  received: ReadonlyMap<number, Uint8Array>,
): Result<DkgResult, FrostFault> {
  const t = state.threshold;
  const missing = others.filter((o) => !received.has(o.identifier)).map((o) => ({ identifier: o.identifier }));
  if (missing.length || received.size !== others.length) {
    return err(fault(FrostErrorCodes.PARTICIPANT_LOST, 'round 3 lacks a share from some participants', missing));
  }
  let key: ReturnType<typeof suite.DKG.round3>;
  try {
    key = suite.DKG.round3(
      state.secret,
      others.map(toNobleRound1),
      others.map((o) => ({ identifier: idHex(o.identifier), signingShare: received.get(o.identifier)! })),
    );
  } catch (e) {
    const culprits: Culprit[] = [];
    for (const o of others) {
      if (!checkRound2Share(state.identifier, t, o, received.get(o.identifier)!)) culprits.push({ identifier: o.identifier });
    }
    if (culprits.length)
      return err(fault(FrostErrorCodes.INCONSISTENT_SHARE, 'share(s) inconsistent with the sender’s commitment', culprits));
    return err(fault(FrostErrorCodes.BAD_COMMITMENT, `round 3 failed: ${(e as Error).message}`));
  }
  const secret: ShareSecret = { identifier: idNumber(key.secret.identifier), signingShare: key.secret.signingShare };
  return ok({ public: fromNoblePublic(key.public), secret });
}

/** Best-effort erasure of an abandoned session's polynomial (noble `DKG.clean`). */
export function dkgAbandon(state: DkgState): void {
  try {
    suite.DKG.clean(state.secret);
  } catch {
    // already finished or cleaned
  }
}
