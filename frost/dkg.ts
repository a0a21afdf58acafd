/**
 * Distributed key generation as pure rounds (spec §2.2: the group's private key never exists
 * anywhere). The rounds are the frost-rs / noble split (Pedersen DKG with proofs of knowledge):
 *
 * 1. {@link dkgRound1}: draw a polynomial, broadcast its commitment and a proof of knowledge.
 * 2. {@link dkgRound2}: check everyone's round-1 package, compute one share `f_me(j)` per peer.
 * 3. {@link dkgRound3}: check every received share against its sender's commitment, sum them.
 *
 * All three rounds are written here over the group operations of `curve.ts` (libsodium by
 * default, noble as the reference); round 1 draws its scalars exactly as noble's
 * `ed25519_FROST.DKG.round1` does, so both give the same package for the same randomness. Each
 * package and share is checked on its own, so a fault names every sender who misbehaved. Pure:
 * no I/O, no clock; randomness is an argument. Nothing here encrypts or authenticates: that is the actor's job.
 */
import type { DKG_Secret } from '@noble/curves/abstract/frost.js';
import { getMinHashLength, mapHashToField } from '@noble/curves/abstract/modular.js';
import { bytesToNumberLE } from '@noble/curves/utils.js';
import { sha512 } from '@noble/hashes/sha2.js';
import { bytesEqual, concat, err, ok, type Result, type Rng, utf8 } from '../core/index.ts';
import { curve } from './curve.ts';
import { type Culprit, fault, FrostErrorCodes, type FrostFault } from './errors.ts';
import { isCanonicalScalar } from './sign.ts';
import { checkThreshold, Fn, type PublicPackage, type ShareSecret, suite, type Threshold } from './group.ts';

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
  /** Set by round 2: the round-1 packages it checked (copied) and the shares it computed. */
  round2?: { readonly packages: readonly Round1Package[]; readonly shares: Map<number, Uint8Array> };
}

/** What a finished DKG leaves with one participant. */
export interface DkgResult {
  readonly public: PublicPackage;
  readonly secret: ShareSecret;
}

function checkIdentifier(id: number, t: Threshold): boolean {
  return Number.isSafeInteger(id) && id >= 1 && id <= t.max;
}

/**
 * A uniform non-zero scalar from `rng`, exactly as noble's `ed25519_FROST` draws its polynomial
 * coefficients and proof nonces (`mapHashToField` over 48 random bytes, so `1..L−1`): the same
 * `rng` gives the same round-1 output as noble's `DKG.round1` (test/frost/dkg.test.ts compares).
 */
function randomScalar(rng: Rng): bigint {
  return bytesToNumberLE(mapHashToField(rng(getMinHashLength(Fn.ORDER)), Fn.ORDER, true));
}

/**
 * Round 1: draws this participant's polynomial (degree `min − 1`), commits to every coefficient
 * (`a_j·G`, RFC 9591 App. C.2) and proves knowledge of `a_0` (Schnorr: `R = k·G`,
 * `μ = k + a_0·H_dkg(id ‖ a_0·G ‖ R)`), the frost-rs / noble round 1, with the base
 * multiplications on `curve.ts` (noble's constant-time blinded multiplication cost ≈ 2 ms each).
 * Returns `frost-bad-params` for a bad threshold or identifier.
 */
export function dkgRound1(identifier: number, t: Threshold, rng: Rng): Result<{ state: DkgState; package: Round1Package }, FrostFault> {
  const c = checkThreshold(t);
  if (!c.ok) return c;
  if (!checkIdentifier(identifier, t)) return err(fault(FrostErrorCodes.BAD_PARAMS, `identifier ${identifier} outside 1..${t.max}`));
  const coefficients = Array.from({ length: t.min }, () => randomScalar(rng));
  const commitment = coefficients.map((a) => curve.baseMul(Fn.toBytes(a)));
  const k = randomScalar(rng);
  const R = curve.baseMul(Fn.toBytes(k));
  const challenge = Fn.fromBytes(pokChallenge(identifier, commitment[0]!, R));
  const proof = concat(R, Fn.toBytes(Fn.add(k, Fn.mul(coefficients[0]!, challenge))));
  const secret: DKG_Secret = {
    identifier: BigInt(identifier),
    coefficients,
    commitment: commitment.map((x) => x.slice()),
    signers: { min: t.min, max: t.max },
    step: 1,
  };
  return ok({ state: { identifier, threshold: t, secret }, package: { identifier, commitment, proof } });
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
function pokChallenge(identifier: number, phi: Uint8Array, r: Uint8Array): Uint8Array {
  return curve.scalarReduce64(sha512(concat(HDKG_DST, Fn.toBytes(BigInt(identifier)), phi, r)));
}

/** Σ_j commitment[j] · i^j (RFC 9591 App. C.2 `vss_verify`'s right-hand side), valid elements only. */
export function evalCommitment(commitment: readonly Uint8Array[], i: number): Uint8Array {
  let acc = commitment[0]!;
  let pow = 1n;
  const x = BigInt(i);
  for (let j = 1; j < commitment.length; j++) {
    pow = Fn.mul(pow, x);
    acc = curve.add(acc, curve.mul(commitment[j]!, Fn.toBytes(pow)));
  }
  return acc;
}

function copyPackage(p: Round1Package): Round1Package {
  return { identifier: p.identifier, commitment: p.commitment.map((c) => c.slice()), proof: p.proof.slice() };
}

function samePackages(a: readonly Round1Package[], b: readonly Round1Package[]): boolean {
  const key = (l: readonly Round1Package[]) => [...l].sort((x, y) => x.identifier - y.identifier);
  const [x, y] = [key(a), key(b)];
  return (
    x.length === y.length &&
    x.every(
      (p, i) =>
        p.identifier === y[i]!.identifier &&
        bytesEqual(p.proof, y[i]!.proof) &&
        p.commitment.length === y[i]!.commitment.length &&
        p.commitment.every((c, j) => bytesEqual(c, y[i]!.commitment[j]!)),
    )
  );
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
  if (!p.commitment.every((c) => curve.isElement(c)))
    return blame('a commitment is not a valid element (identity, torsion or non-canonical)');
  if (!(p.proof instanceof Uint8Array) || p.proof.length !== 64) return blame('proof of knowledge is not 64 bytes');
  const R = p.proof.slice(0, 32);
  if (!curve.isElement(R)) return blame('proof of knowledge R is not a valid element');
  const z = p.proof.slice(32);
  if (!isCanonicalScalar(z)) return blame('proof of knowledge μ is not a canonical scalar');
  const c = pokChallenge(p.identifier, p.commitment[0]!, R);
  const lhs = curve.sub(curve.baseMul(z), curve.mul(p.commitment[0]!, c));
  if (!bytesEqual(lhs, R)) return blame('invalid proof of knowledge');
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
  if (state.round2) {
    if (!samePackages(state.round2.packages, others)) {
      return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'round-1 packages differ from the ones round 2 already checked'));
    }
    return ok(new Map([...state.round2.shares].map(([k, v]) => [k, v.slice()])));
  }
  if (!state.secret.coefficients) return err(fault(FrostErrorCodes.BAD_PARAMS, 'this DKG state is finished or abandoned'));
  const culprits: Culprit[] = [];
  for (const o of others) if (!checkRound1(o, t).ok) culprits.push({ identifier: o.identifier });
  if (culprits.length) return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'invalid round-1 package(s)', culprits));
  const out = new Map<number, Uint8Array>();
  for (const o of others) out.set(o.identifier, Fn.toBytes(evalPoly(state.secret.coefficients, BigInt(o.identifier))));
  state.round2 = { packages: others.map(copyPackage), shares: new Map([...out].map(([k, v]) => [k, v.slice()])) };
  return ok(out);
}

/** `f(x)` by Horner's rule in the scalar field. */
function evalPoly(coeffs: readonly bigint[], x: bigint): bigint {
  let acc = Fn.ZERO;
  for (let j = coeffs.length - 1; j >= 0; j--) acc = Fn.add(Fn.mul(acc, x), coeffs[j]!);
  return acc;
}

/**
 * True when `share` (sent by `sender` to `recipient`) matches the sender's VSS commitment
 * (RFC 9591 App. C.2 `vss_verify`, via noble's `validateSecret`).
 */
export function checkRound2Share(
  recipient: number,
  t: Threshold,
  sender: Round1Package,
  share: Uint8Array,
  /** Internal: the commitment was already decoded (round 2 checked this very package). */
  decoded = false,
): boolean {
  if (!isCanonicalScalar(share) || sender.commitment.length !== t.min) return false;
  if (!decoded && !sender.commitment.every((c) => curve.isElement(c))) return false;
  return bytesEqual(curve.baseMul(share), evalCommitment(sender.commitment, recipient));
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
  const r2 = state.round2;
  const coeffs = state.secret.coefficients;
  if (!r2 || !coeffs) return err(fault(FrostErrorCodes.BAD_PARAMS, 'round 3 before round 2, or on a finished DKG state'));
  if (!samePackages(r2.packages, others)) {
    return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'round-1 packages differ from the ones round 2 checked'));
  }
  const culprits: Culprit[] = [];
  for (const o of r2.packages) {
    if (!checkRound2Share(state.identifier, t, o, received.get(o.identifier)!, true)) culprits.push({ identifier: o.identifier });
  }
  if (culprits.length)
    return err(fault(FrostErrorCodes.INCONSISTENT_SHARE, 'share(s) inconsistent with the sender’s commitment', culprits));
  const own = state.secret.commitment;
  if (own.length !== t.min || !own.every((c) => curve.isElement(c))) {
    return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'own round-1 commitment is not valid'));
  }
  const ownShare = Fn.toBytes(evalPoly(coeffs, BigInt(state.identifier)));
  if (!bytesEqual(curve.baseMul(ownShare), evalCommitment(own, state.identifier))) {
    return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'own share does not match own commitment'));
  }
  let signingShare = ownShare;
  for (const o of r2.packages) signingShare = curve.scalarAdd(signingShare, received.get(o.identifier)!);
  const commitments = own.map((c, j) => r2.packages.reduce((acc, o) => curve.add(acc, o.commitment[j]!), c));
  if (!curve.isElement(commitments[0]!)) return err(fault(FrostErrorCodes.BAD_COMMITMENT, 'the group key is not a valid element'));
  const verifyingShares = Array.from({ length: t.max }, (_, i) => evalCommitment(commitments, i + 1));
  dkgAbandon(state);
  const secret: ShareSecret = { identifier: state.identifier, signingShare };
  return ok({ public: { min: t.min, max: t.max, commitments, verifyingShares }, secret });
}

/** Best-effort erasure of an abandoned session's polynomial (noble `DKG.clean`). */
export function dkgAbandon(state: DkgState): void {
  for (const v of state.round2?.shares.values() ?? []) v.fill(0);
  delete state.round2;
  try {
    suite.DKG.clean(state.secret);
  } catch {
    // already finished or cleaned
  }
  delete (state.secret as { coefficients?: bigint[] }).coefficients;
}
