/**
 * Ed25519 (RFC 8032) on `node:crypto`, with the project's verification policy made explicit
 * rather than inherited from a library (docs/crypto-policy.md):
 *
 * - a public key must be a canonical encoding of a point that is not of small order; this is
 *   enforced when the key is parsed ({@link publicKeyFromBytes}, and so at did:key parse time),
 *   because a small-order key lets anyone forge signatures that some verifiers accept;
 * - a signature must be 64 bytes with S < L (refused before OpenSSL sees it: no malleability);
 * - R must be canonical (OpenSSL compares R byte-for-byte against the recomputed point, so a
 *   non-canonical R never verifies); the equation is the cofactorless one of RFC 8032 §5.1.7.
 *
 * Keys and randomness come in as arguments: nothing here draws randomness.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign as nodeSign, verify as nodeVerify } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { bytesEqual } from './bytes.ts';
import { ErrorCodes, JcpError } from './errors.ts';

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** The Ed25519 group order L (RFC 8032 §5.1). */
export const ED25519_L = 2n ** 252n + 27742317777372353535851937790883648493n;

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

function sBelowL(sig: Uint8Array): boolean {
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i]!);
  return s < ED25519_L;
}

/**
 * Verifies an Ed25519 signature under the project's policy (module docs). Never throws on bad
 * signatures: returns false for wrong length, S ≥ L, non-canonical R, or a failed equation.
 */
export function verify(pub: PublicKey, msg: Uint8Array, sig: Uint8Array): boolean {
  if (!(sig instanceof Uint8Array) || sig.length !== 64) return false;
  // Fast path: the top byte of S decides almost always (L ≈ 2^252).
  const top = sig[63]!;
  if (top >= 0x20 || (top === 0x10 && !sBelowL(sig))) return false;
  try {
    return nodeVerify(null, msg, pub.keyObject, sig);
  } catch {
    return false;
  }
}
