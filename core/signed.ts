/**
 * The signed-body pattern shared by Revocation, Statement, KeyEvent, MintPolicy, Checkpoint and
 * Amendment (docs/design.md "Encodings"): `{body, signature}`, Ed25519 over `canonical_cbor(body)`.
 */
import type { Actor } from './actor.ts';
import { encode } from './cbor.ts';
import { type Did, parseDid } from './didkey.ts';
import { sign, verify } from './ed25519.ts';
import { asBytes, asObj } from './schema.ts';

/** A body with its signer's Ed25519 signature over the body's canonical bytes. */
export interface Signed<B> {
  readonly body: B;
  readonly signature: Uint8Array;
}

/** Signs `body` as `signer` (Ed25519 over `canonical_cbor(body)`). */
export function signBody<B>(body: B, signer: Actor): Signed<B> {
  return { body, signature: sign(signer.key, encode(body)) };
}

/** True when `signed.signature` verifies over `canonical_cbor(signed.body)` under `did`. Never throws. */
export function verifyBody(signed: Signed<unknown>, did: Did): boolean {
  try {
    return verify(parseDid(did), encode(signed.body), signed.signature);
  } catch {
    return false;
  }
}

/**
 * Splits a decoded `{body, signature}` map. The body is returned raw for the caller's schema.
 * @throws JcpError `schema` / `bad-length`
 */
export function readSigned(v: unknown, field: string): { body: unknown; signature: Uint8Array } {
  const o = asObj(v, field, ['body', 'signature']);
  return { body: o['body'], signature: asBytes(o['signature'], `${field}.signature`, 64) };
}
