/**
 * did:key for Ed25519 actors (spec §2): `did:key:z` + base58btc(0xed 0x01 ‖ 32-byte public key).
 * Parsing applies the key policy of `ed25519.ts`: a non-canonical or small-order key is refused.
 */
import { base58 } from '@scure/base';
import { ErrorCodes, JcpError } from './errors.ts';
import { type PublicKey, publicKeyFromBytes } from './ed25519.ts';

/**
 * A did:key string for an Ed25519 key. A flavoured brand: a plain string is accepted (parsed input
 * is checked where it enters), but a {@link ContentId} is refused where a Did is wanted.
 */
export type Did = string & { readonly __kind?: 'did' };

const PREFIX = 'did:key:z';
const cache = new Map<string, PublicKey>();

/** Encodes 32 Ed25519 public-key bytes as a did:key (§2). */
export function didFromPublicKey(pub: Uint8Array | PublicKey): Did {
  const bytes = pub instanceof Uint8Array ? pub : pub.bytes;
  if (bytes.length !== 32) throw new JcpError(ErrorCodes.BAD_LENGTH, 'Ed25519 public key must be 32 bytes');
  const mc = new Uint8Array(34);
  mc[0] = 0xed;
  mc[1] = 0x01;
  mc.set(bytes, 2);
  return PREFIX + base58.encode(mc);
}

/**
 * Parses a did:key into a validated Ed25519 public key (§2). Results are cached by string.
 * @throws JcpError `did-invalid` when the string is not `did:key:z…`, not base58btc, not the
 *   0xed01 multicodec, not 32 key bytes, or the key is non-canonical or of small order.
 */
export function parseDid(did: unknown): PublicKey {
  if (typeof did !== 'string') throw new JcpError(ErrorCodes.DID_INVALID, 'did:key must be a string');
  const hit = cache.get(did);
  if (hit) return hit;
  if (!did.startsWith(PREFIX) || did.length > 64) {
    throw new JcpError(ErrorCodes.DID_INVALID, `not an Ed25519 did:key: ${did.slice(0, 64)}`);
  }
  let raw: Uint8Array;
  try {
    raw = base58.decode(did.slice(PREFIX.length));
  } catch {
    throw new JcpError(ErrorCodes.DID_INVALID, 'did:key: bad base58btc');
  }
  if (raw.length !== 34 || raw[0] !== 0xed || raw[1] !== 0x01) {
    throw new JcpError(ErrorCodes.DID_INVALID, 'did:key: not the ed25519-pub multicodec (0xed01) with a 32-byte key');
  }
  let pk: PublicKey;
  try {
    pk = publicKeyFromBytes(raw.subarray(2));
  } catch (e) {
    throw new JcpError(ErrorCodes.DID_INVALID, `did:key: ${(e as Error).message}`, undefined, { cause: e });
  }
  if (didFromPublicKey(pk.bytes) !== did) throw new JcpError(ErrorCodes.DID_INVALID, 'did:key: not canonical base58');
  if (cache.size > 100_000) cache.clear();
  cache.set(did, pk);
  return pk;
}

/** True when `did` parses as a valid Ed25519 did:key. */
export function isDid(did: unknown): did is Did {
  try {
    parseDid(did);
    return true;
  } catch {
    return false;
  }
}
