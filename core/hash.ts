/**
 * BLAKE3-256 and content ids (spec §3). `hash-wasm` on the hot path, instantiated once at load:
 * its BLAKE3 bundle alone (`dist/blake3.umd.min.js`, 22 KB), not the package's index (284 KB, every
 * algorithm's WebAssembly inlined), which every process would otherwise parse at start. Should a
 * release drop that file, the index is used: the same function, slower to load.
 */
import { createRequire } from 'node:module';
import type * as HashWasm from 'hash-wasm';
import { toHex } from './bytes.ts';
import { encode } from './cbor.ts';

/** `createBLAKE3` from hash-wasm's BLAKE3 bundle, or from its index. */
function loadCreateBlake3(): typeof HashWasm.createBLAKE3 {
  const require = createRequire(import.meta.url);
  try {
    const m = require('hash-wasm/dist/blake3.umd.min.js') as Partial<typeof HashWasm>;
    if (typeof m.createBLAKE3 === 'function') return m.createBLAKE3;
  } catch {
    // not in this release: the index below
  }
  return (require('hash-wasm') as typeof HashWasm).createBLAKE3;
}

const hasher = await loadCreateBlake3()(256);

/**
 * A content id: 64 lowercase hex characters of BLAKE3-256 over canonical det-CBOR (§3). A
 * flavoured brand: a plain string is accepted, but a {@link Did} is refused where a ContentId is wanted.
 */
export type ContentId = string & { readonly __kind?: 'content-id' };

/** BLAKE3-256 digest (32 bytes) of `bytes`. */
export function blake3(bytes: Uint8Array): Uint8Array {
  hasher.init();
  hasher.update(bytes);
  return hasher.digest('binary');
}

/** Content id of already-canonical bytes: lowercase hex of BLAKE3-256(bytes). */
export function contentIdOfBytes(bytes: Uint8Array): ContentId {
  return toHex(blake3(bytes));
}

/**
 * Content id of `value`: `blake3(canonical_cbor(value))` as 64 lowercase hex chars (§3).
 * @throws JcpError `cbor-forbidden-type` if `value` holds a float, bool, null or undefined.
 */
export function contentId(value: unknown): ContentId {
  return contentIdOfBytes(encode(value));
}

const CID_RE = /^[0-9a-f]{64}$/;

/** True when `s` is a well-formed content id (64 lowercase hex chars). */
export function isContentId(s: unknown): s is ContentId {
  return typeof s === 'string' && CID_RE.test(s);
}
