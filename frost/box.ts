/**
 * Encryption of DKG round-2 shares to their recipient: ephemeral X25519 (RFC 7748) key agreement
 * per session, HKDF-SHA-256 (RFC 5869) bound to the session and both parties, AES-256-GCM, all
 * from `node:crypto`. Each participant draws a fresh X25519 key for each DKG session and signs
 * its public half (in its `dkg-hello`), so a share can only be read by the participant it was
 * meant for, and a ciphertext moved to another session or recipient does not decrypt.
 *
 * Because the keys are per session, a recipient who must prove that a sender misbehaved can
 * reveal its session key in a complaint: the session is aborted anyway, and anyone can then
 * recompute the pairwise key and read the share ({@link pairKey}).
 */
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
} from 'node:crypto';
import { type Did, encode } from '../core/index.ts';
import { FrostError, FrostErrorCodes } from './errors.ts';

const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');

/** An X25519 key pair, raw 32-byte halves, with the private half parsed once for reuse. */
export interface BoxKeyPair {
  readonly secret: Uint8Array;
  readonly public: Uint8Array;
  /** The private half as a key object (parsing a raw key costs ≈ 0.1–0.4 ms each time). */
  readonly key?: KeyObject;
}

/** A fresh X25519 key pair from the OS CSPRNG (per DKG session). */
export function newBoxKey(): BoxKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const d = privateKey.export({ format: 'jwk' }).d;
  const x = publicKey.export({ format: 'jwk' }).x;
  if (d === undefined || x === undefined) throw new Error('X25519 key export lacks its raw halves');
  return { secret: new Uint8Array(Buffer.from(d, 'base64url')), public: new Uint8Array(Buffer.from(x, 'base64url')), key: privateKey };
}

/** Who encrypts to whom, in which session: bound into the key derivation and the AEAD. */
export interface BoxContext {
  readonly session: string;
  readonly from: Did;
  readonly to: Did;
  /** The sender's and recipient's X25519 public keys (as signed in their hellos). */
  readonly fromKey: Uint8Array;
  readonly toKey: Uint8Array;
}

/**
 * X25519(mine, theirPublic) (RFC 7748), 32 bytes; `mine` is the raw secret or its key object.
 * The peer's key is imported as a raw JWK half (the DER decoder costs several times more per key).
 * @throws FrostError `frost-bad-message` blaming `blame` if the agreement fails, or if the peer
 *   key is of low order (all-zero shared secret).
 */
export function sharedSecret(mine: Uint8Array | KeyObject, theirPublic: Uint8Array, blame?: Did): Uint8Array {
  if (theirPublic.length !== 32 || (mine instanceof Uint8Array && mine.length !== 32))
    throw new FrostError(FrostErrorCodes.BAD_MESSAGE, 'X25519 keys must be 32 bytes');
  let shared: Buffer;
  try {
    const x = Buffer.from(theirPublic).toString('base64url');
    // A raw secret (a complaint's revealed key; rare) goes through the DER decoder; the
    // session's own key is parsed once, when it is made.
    const privateKey =
      mine instanceof Uint8Array ? createPrivateKey({ key: Buffer.concat([PKCS8_X25519, mine]), format: 'der', type: 'pkcs8' }) : mine;
    shared = diffieHellman({ privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x }, format: 'jwk' }) });
  } catch (e) {
    throw new FrostError(FrostErrorCodes.BAD_MESSAGE, `X25519 agreement failed: ${(e as Error).message}`, blame ? [{ did: blame }] : []);
  }
  if (shared.every((b) => b === 0)) throw new FrostError(FrostErrorCodes.BAD_MESSAGE, 'X25519 peer key is of low order', []);
  return new Uint8Array(shared);
}

/**
 * The 32-byte AES-256-GCM key for `ctx` from an X25519 shared secret ({@link sharedSecret}):
 * HKDF-SHA-256 with salt "jcp-frost/1 dkg-share" and info = canonical CBOR of the context.
 */
export function pairKeyFrom(shared: Uint8Array, ctx: BoxContext): Uint8Array {
  const info = encode({ session: ctx.session, from: ctx.from, to: ctx.to, from_key: ctx.fromKey, to_key: ctx.toKey });
  return new Uint8Array(hkdfSync('sha256', shared, Buffer.from('jcp-frost/1 dkg-share'), info, 32));
}

/**
 * The 32-byte AES-256-GCM key for `ctx`: HKDF-SHA-256 over X25519(mySecret, theirPublic), with
 * salt "jcp-frost/1 dkg-share" and info = canonical CBOR of the context.
 * @throws FrostError `frost-bad-message` if the peer key is of low order (all-zero secret).
 */
export function pairKey(mySecret: Uint8Array, theirPublic: Uint8Array, ctx: BoxContext): Uint8Array {
  return pairKeyFrom(sharedSecret(mySecret, theirPublic, ctx.from), ctx);
}

function aad(ctx: BoxContext): Buffer {
  return Buffer.from(encode({ session: ctx.session, round: 2, from: ctx.from, to: ctx.to }));
}

/** AES-256-GCM encryption of `plaintext` under `key` with a 12-byte `nonce`; returns ciphertext ‖ 16-byte tag. */
export function seal(key: Uint8Array, nonce: Uint8Array, ctx: BoxContext, plaintext: Uint8Array): Uint8Array {
  const c = createCipheriv('aes-256-gcm', key, nonce);
  c.setAAD(aad(ctx));
  const out = Buffer.concat([c.update(plaintext), c.final(), c.getAuthTag()]);
  return new Uint8Array(out);
}

/** Decrypts what {@link seal} produced; undefined when the key, nonce, context or bytes are wrong. */
export function open(key: Uint8Array, nonce: Uint8Array, ctx: BoxContext, sealed: Uint8Array): Uint8Array | undefined {
  if (nonce.length !== 12 || sealed.length < 16) return undefined;
  try {
    const d = createDecipheriv('aes-256-gcm', key, nonce);
    d.setAAD(aad(ctx));
    d.setAuthTag(sealed.subarray(sealed.length - 16));
    return new Uint8Array(Buffer.concat([d.update(sealed.subarray(0, sealed.length - 16)), d.final()]));
  } catch {
    return undefined;
  }
}
