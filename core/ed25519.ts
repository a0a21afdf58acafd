/**
 * Ed25519 (RFC 8032) on `node:crypto`, with the project's verification policy made explicit
 * rather than inherited from a library (docs/crypto-policy.md):
 *
 * - a public key must be a canonical encoding of a point that is not of small order; this is
 *   enforced when the key is parsed ({@link publicKeyFromBytes}, and so at did:key parse time),
 *   because a small-order key lets anyone forge signatures that some verifiers accept;
 * - a signature must be 64 bytes with S < L and R a canonical point encoding; both are checked
 *   here before OpenSSL sees the signature (no malleability, whatever the OpenSSL build does;
 *   OpenSSL 3 would also refuse both, since it compares R byte-for-byte with the recomputed point);
 * - the equation is the cofactorless one of RFC 8032 §5.1.7 ([S]B = R + [k]A), as OpenSSL does,
 *   so a signature valid only under the cofactored equation is refused; a key with a small-order
 *   component but not itself of small order ("mixed order") is accepted, and so is a canonical
 *   small-order R (RFC 8032 does not forbid it; forging one still needs the key's secret).
 *
 * Keys and randomness come in as arguments: nothing here draws randomness.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign as nodeSign, verify as nodeVerify } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { base64urlnopad } from '@scure/base';
import { bytesEqual } from './bytes.ts';
import { ErrorCodes, JcpError } from './errors.ts';

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** The Ed25519 group order L (RFC 8032 §5.1). */
export const ED25519_L = 2n ** 252n + 27742317777372353535851937790883648493n;
/** The field prime p = 2^255 − 19 (RFC 8032 §5.1). */
const ED25519_P = 2n ** 255n - 19n;

/** A validated Ed25519 public key: 32 canonical bytes of a point not of small order. */
export interface PublicKey {
  readonly bytes: Uint8Array;
  readonly keyObject: KeyObject;
}

/** An Ed25519 signing key: the 32-byte RFC 8032 seed and its public key. */
export interface SigningKey {
  readonly seed: Uint8Array;
  readonly publicKey: PublicKey;
  readonly keyObject: KeyObject;
}

const pubCache = new Map<string, PublicKey>();

/**
 * Validates 32 public-key bytes under the project's policy and wraps them for `node:crypto`.
 * @throws JcpError `bad-length` (not 32 bytes), `did-invalid` (not a canonical point encoding,
 *   or a point of small order).
 */
export function publicKeyFromBytes(bytes: Uint8Array): PublicKey {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 32) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, 'Ed25519 public key must be 32 bytes');
  }
  const key = Buffer.from(bytes.buffer, bytes.byteOffset, 32).toString('hex');
  const hit = pubCache.get(key);
  if (hit) return hit;
  let point: ReturnType<typeof ed25519.Point.fromBytes>;
  try {
    point = ed25519.Point.fromBytes(bytes, false);
  } catch (e) {
    throw new JcpError(ErrorCodes.DID_INVALID, `Ed25519 public key is not a canonical point: ${(e as Error).message}`);
  }
  if (!bytesEqual(point.toBytes(), bytes)) {
    throw new JcpError(ErrorCodes.DID_INVALID, 'Ed25519 public key is not canonically encoded');
  }
  if (point.isSmallOrder()) {
    throw new JcpError(ErrorCodes.DID_INVALID, 'Ed25519 public key is of small order (anyone could forge under it)');
  }
  const copy = new Uint8Array(bytes);
  const pk: PublicKey = {
    bytes: copy,
    keyObject: createPublicKey({ key: Buffer.concat([SPKI_PREFIX, copy]), format: 'der', type: 'spki' }),
  };
  if (pubCache.size > 100_000) pubCache.clear();
  pubCache.set(key, pk);
  return pk;
}

/**
 * Builds a signing key from a 32-byte seed (RFC 8032 §5.1.5).
 * @throws JcpError `bad-length` if `seed` is not 32 bytes.
 */
export function signingKeyFromSeed(seed: Uint8Array): SigningKey {
  if (!(seed instanceof Uint8Array) || seed.length !== 32) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, 'Ed25519 seed must be 32 bytes');
  }
  const copy = new Uint8Array(seed);
  const keyObject = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, copy]), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(keyObject).export({ format: 'der', type: 'spki' });
  const pub = new Uint8Array(spki.subarray(spki.length - 32));
  return { seed: copy, keyObject, publicKey: publicKeyFromBytes(pub) };
}

/** Ed25519 signature (64 bytes) of `msg` by `key` (RFC 8032 §5.1.6). */
export function sign(key: SigningKey, msg: Uint8Array): Uint8Array {
  return new Uint8Array(nodeSign(null, msg, key.keyObject));
}

function leInt(b: Uint8Array, from: number, to: number): bigint {
  let v = 0n;
  for (let i = to - 1; i >= from; i--) v = (v << 8n) | BigInt(b[i]!);
  return v;
}

/**
 * True when 32 bytes are the canonical encoding of a field element pair (RFC 8032 §5.1.2):
 * y < p, and no "negative zero" (the sign bit set with x = 0, which happens only for y = ±1).
 * It says nothing about whether the point is on the curve.
 */
export function isCanonicalPointEncoding(bytes: Uint8Array): boolean {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 32) return false;
  const y = leInt(bytes, 0, 32) & ((1n << 255n) - 1n);
  if (y >= ED25519_P) return false;
  const signBit = bytes[31]! >> 7;
  return !(signBit === 1 && (y === 1n || y === ED25519_P - 1n));
}

/**
 * True when `sig` has the shape the policy accepts before any curve work (RFC 8032 §5.1.7,
 * docs/crypto-policy.md): 64 bytes, R canonically encoded, S < L.
 */
export function isCanonicalSignature(sig: Uint8Array): boolean {
  if (!(sig instanceof Uint8Array) || sig.length !== 64) return false;
  // Fast paths: the top byte of S decides almost always (L ≈ 2^252), and R can only be
  // non-canonical when its top byte is 0x7f/0xff (y ≥ p, or y = p − 1 negative) or 0x80 (y = 1 negative).
  const sTop = sig[63]!;
  if (sTop > 0x10 || (sTop === 0x10 && leInt(sig, 32, 64) >= ED25519_L)) return false;
  const rTop = sig[31]!;
  if ((rTop & 0x7f) === 0x7f || rTop === 0x80) return isCanonicalPointEncoding(sig.subarray(0, 32));
  return true;
}

/**
 * Verifies an Ed25519 signature under the project's policy (module docs, docs/crypto-policy.md).
 * Never throws on bad signatures: returns false for wrong length, S ≥ L, non-canonical R, or a
 * failed cofactorless equation. The key was already checked when `pub` was built.
 */
export function verify(pub: PublicKey, msg: Uint8Array, sig: Uint8Array): boolean {
  if (!isCanonicalSignature(sig)) return false;
  try {
    return nodeVerify(null, msg, pub.keyObject, sig);
  } catch {
    return false;
  }
}

/** An RFC 8037 §2 OKP JSON Web Key for Ed25519: `x` the public key, `d` the seed, base64url. */
export interface Ed25519Jwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
  readonly d?: string;
}

function jwkBytes(jwk: Record<string, unknown>, name: 'x' | 'd'): Uint8Array {
  const v = jwk[name];
  if (typeof v !== 'string') throw new JcpError(ErrorCodes.SCHEMA, `jwk.${name}: missing`, { field: `jwk.${name}` });
  let raw: Uint8Array;
  try {
    raw = base64urlnopad.decode(v);
  } catch {
    throw new JcpError(ErrorCodes.BAD_LENGTH, `jwk.${name}: not unpadded base64url`, { field: `jwk.${name}` });
  }
  if (raw.length !== 32) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, `jwk.${name}: expected 32 bytes, got ${raw.length}`, { field: `jwk.${name}` });
  }
  return raw;
}

function jwkObject(jwk: unknown): Record<string, unknown> {
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) {
    throw new JcpError(ErrorCodes.SCHEMA, 'jwk: expected an object', { field: 'jwk' });
  }
  const o = jwk as Record<string, unknown>;
  if (o['kty'] !== 'OKP' || o['crv'] !== 'Ed25519') {
    throw new JcpError(ErrorCodes.SCHEMA, 'jwk: not an Ed25519 OKP key (RFC 8037)', { field: 'jwk.crv' });
  }
  return o;
}

/**
 * Reads the public key of an Ed25519 JWK (RFC 8037 §2) under the key policy of
 * {@link publicKeyFromBytes}. A JWK that carries `d` is refused: private material where a
 * public key is expected is a caller mistake that must not pass silently.
 * @throws JcpError `schema` (not an OKP/Ed25519 key, `x` missing, `d` present), `bad-length`
 *   (`x` not 32 bytes of base64url), `did-invalid` (non-canonical or small-order key).
 */
export function publicKeyFromJwk(jwk: unknown): PublicKey {
  const o = jwkObject(jwk);
  if ('d' in o) throw new JcpError(ErrorCodes.SCHEMA, 'jwk.d: a public key must not carry private material', { field: 'jwk.d' });
  return publicKeyFromBytes(jwkBytes(o, 'x'));
}

/**
 * Reads the signing key of an Ed25519 JWK (RFC 8037 §2): `d` is the 32-byte seed; `x`, when
 * present, must be the public key that `d` derives.
 * @throws JcpError `schema` (not an OKP/Ed25519 key, `d` missing, `x` not matching `d`),
 *   `bad-length` (`d` or `x` not 32 bytes of base64url).
 */
export function signingKeyFromJwk(jwk: unknown): SigningKey {
  const o = jwkObject(jwk);
  const key = signingKeyFromSeed(jwkBytes(o, 'd'));
  if ('x' in o && !bytesEqual(jwkBytes(o, 'x'), key.publicKey.bytes)) {
    throw new JcpError(ErrorCodes.SCHEMA, 'jwk.x: does not match the key derived from jwk.d', { field: 'jwk.x' });
  }
  return key;
}
