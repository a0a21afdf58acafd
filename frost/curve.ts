/**
 * The Ed25519 group arithmetic under FROST (RFC 9591 §3.1, §6.1 FROST(Ed25519, SHA-512)), behind
 * one small interface with two implementations:
 *
 * - `sodium` (the default): libsodium's Ed25519 group operations through `libsodium-wrappers-sumo`
 *   (WASM). Its scalar multiplications are constant-time; `crypto_core_ed25519_is_valid_point`
 *   is exactly RFC 9591 DeserializeElement (canonical, on the curve, not of small order — which
 *   excludes the identity — and in the prime-order subgroup).
 * - `noble`: `@noble/curves`, the reference the property tests compare the default against.
 *
 * Elements are their 32-byte encodings; scalars are 32-byte little-endian, canonical (< L).
 * Every function that takes an element expects one that {@link Curve.isElement} accepts (an
 * element already decoded under RFC 9591), except that sums may be the identity: `add`/`sub`
 * accept and return the identity encoding. `mul`/`baseMul` by the zero scalar give the identity.
 *
 * Which one runs is chosen once per process: `JCP_FROST_GROUP=noble` selects the reference
 * (benches and cross-checks); anything else, or unset, selects sodium.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import sodium from 'libsodium-wrappers-sumo';

await sodium.ready;

/** Ed25519 group operations on encoded elements and 32-byte little-endian scalars. */
export interface Curve {
  /** `'sodium'` or `'noble'`. */
  readonly name: string;
  /** RFC 9591 §3.1 DeserializeElement: canonical, on the curve, not the identity, prime order. */
  isElement(p: Uint8Array): boolean;
  /** `s·G` (identity for `s = 0`). Constant-time in `s` (secret nonces, shares). */
  baseMul(s: Uint8Array): Uint8Array;
  /** `s·P` for a valid element `P` (identity for `s = 0`). */
  mul(p: Uint8Array, s: Uint8Array): Uint8Array;
  /** `P + Q` (either may be the identity). */
  add(p: Uint8Array, q: Uint8Array): Uint8Array;
  /** `P − Q` (either may be the identity). */
  sub(p: Uint8Array, q: Uint8Array): Uint8Array;
  /** `a + b mod L`. */
  scalarAdd(a: Uint8Array, b: Uint8Array): Uint8Array;
  /** `a − b mod L`. */
  scalarSub(a: Uint8Array, b: Uint8Array): Uint8Array;
  /** `a · b mod L`. */
  scalarMul(a: Uint8Array, b: Uint8Array): Uint8Array;
  /** `a⁻¹ mod L`. @throws RangeError for `a = 0`. */
  scalarInvert(a: Uint8Array): Uint8Array;
  /** A 64-byte little-endian number (a SHA-512 digest) reduced mod L (RFC 9591 §6.1 H1–H3). */
  scalarReduce64(h: Uint8Array): Uint8Array;
}

/** The encoding of the identity element (y = 1). */
export const IDENTITY: Uint8Array = (() => {
  const b = new Uint8Array(32);
  b[0] = 1;
  return b;
})();

function isZeroScalar(s: Uint8Array): boolean {
  let acc = 0;
  for (const x of s) acc |= x;
  return acc === 0;
}

/** libsodium (WASM): constant-time scalar multiplication, RFC 9591 element checks. */
export const sodiumCurve: Curve = {
  name: 'sodium',
  isElement: (p) => p instanceof Uint8Array && p.length === 32 && sodium.crypto_core_ed25519_is_valid_point(p),
  // libsodium refuses a zero scalar (the result would be the identity); we return the identity.
  baseMul: (s) => (isZeroScalar(s) ? IDENTITY.slice() : sodium.crypto_scalarmult_ed25519_base_noclamp(s)),
  mul: (p, s) => (isZeroScalar(s) ? IDENTITY.slice() : sodium.crypto_scalarmult_ed25519_noclamp(s, p)),
  // libsodium adds any on-curve encodings, the identity included (no subgroup check: sums only).
  add: (p, q) => sodium.crypto_core_ed25519_add(p, q),
  sub: (p, q) => sodium.crypto_core_ed25519_sub(p, q),
  scalarAdd: (a, b) => sodium.crypto_core_ed25519_scalar_add(a, b),
  scalarSub: (a, b) => sodium.crypto_core_ed25519_scalar_sub(a, b),
  scalarMul: (a, b) => sodium.crypto_core_ed25519_scalar_mul(a, b),
  scalarInvert: (a) => {
    if (isZeroScalar(a)) throw new RangeError('inverse of zero');
    return sodium.crypto_core_ed25519_scalar_invert(a);
  },
  scalarReduce64: (h) => sodium.crypto_core_ed25519_scalar_reduce(h),
};

const Point = ed25519.Point;
const Fn = Point.Fn;
const leToBig = (b: Uint8Array): bigint => {
  let n = 0n;
  for (let i = b.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(b[i]!);
  return n;
};

/** `@noble/curves`: the reference implementation. */
export const nobleCurve: Curve = {
  name: 'noble',
  isElement: (p) => {
    if (!(p instanceof Uint8Array) || p.length !== 32) return false;
    try {
      const q = Point.fromBytes(p, false);
      if (q.is0() || !q.isTorsionFree()) return false;
      const e = q.toBytes();
      return e.every((x, i) => x === p[i]);
    } catch {
      return false;
    }
  },
  baseMul: (s) => {
    const k = Fn.fromBytes(s);
    return k === 0n ? IDENTITY.slice() : Point.BASE.multiply(k).toBytes();
  },
  mul: (p, s) => {
    const k = Fn.fromBytes(s);
    return k === 0n ? IDENTITY.slice() : Point.fromBytes(p).multiply(k).toBytes();
  },
  add: (p, q) => Point.fromBytes(p).add(Point.fromBytes(q)).toBytes(),
  sub: (p, q) => Point.fromBytes(p).subtract(Point.fromBytes(q)).toBytes(),
  scalarAdd: (a, b) => Fn.toBytes(Fn.add(Fn.fromBytes(a), Fn.fromBytes(b))),
  scalarSub: (a, b) => Fn.toBytes(Fn.sub(Fn.fromBytes(a), Fn.fromBytes(b))),
  scalarMul: (a, b) => Fn.toBytes(Fn.mul(Fn.fromBytes(a), Fn.fromBytes(b))),
  scalarInvert: (a) => {
    const k = Fn.fromBytes(a);
    if (k === 0n) throw new RangeError('inverse of zero');
    return Fn.toBytes(Fn.inv(k));
  },
  scalarReduce64: (h) => Fn.toBytes(Fn.create(leToBig(h))),
};

/** The implementations by name. */
export const curves: Readonly<Record<'sodium' | 'noble', Curve>> = { sodium: sodiumCurve, noble: nobleCurve };

/**
 * The implementation FROST uses in this process: `JCP_FROST_GROUP=noble` selects the reference,
 * anything else (or unset) sodium. A live binding: {@link useCurve} changes it.
 */
export let curve: Curve = process.env['JCP_FROST_GROUP'] === 'noble' ? nobleCurve : sodiumCurve;

/** Switches this process's implementation (benches compare both in one run); returns the previous one. */
export function useCurve(c: Curve): Curve {
  const was = curve;
  curve = c;
  return was;
}
