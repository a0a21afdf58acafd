/**
 * The caller signature's message (spec §11: Ed25519 by `caller` over the canonical bytes of every
 * other field), taken straight from the request's own bytes.
 *
 * A request body has already passed the canonical check (its bytes are the det-CBOR encoding of
 * its value), and `signature` is the longest key of a WireRequest, so in det-CBOR key order
 * (length first) it is the map's last entry. Dropping that entry and decrementing the map's entry
 * count gives exactly `canonical_cbor(request without signature)` — what `wireRequestSigningBytes`
 * would re-encode — without encoding the request again.
 */
import { bytesEqual, type WireRequest, wireRequestSigningBytes } from '../core/index.ts';

/** `0x69 "signature" 0x58 0x40`: the text key and the 64-byte string header that end a request body. */
const TAIL = Uint8Array.of(0x69, 0x73, 0x69, 0x67, 0x6e, 0x61, 0x74, 0x75, 0x72, 0x65, 0x58, 0x40);
const TAIL_BYTES = TAIL.length + 64;

/**
 * The bytes the caller signed, for a canonical request `body` decoded as `req`: spliced from the
 * body when it has the expected shape (a 6- to 8-entry map ending with the signature), else
 * re-encoded by `wireRequestSigningBytes`. Either way equal to `wireRequestSigningBytes(req)`.
 */
export function signingBytesOf(body: Uint8Array, req: WireRequest): Uint8Array {
  const head = body[0];
  const at = body.length - TAIL_BYTES;
  if ((head === 0xa6 || head === 0xa7 || head === 0xa8) && at > 1 && bytesEqual(body.subarray(at, at + TAIL.length), TAIL)) {
    const sig = body.subarray(at + TAIL.length);
    if (bytesEqual(sig, req.signature)) {
      const out = new Uint8Array(at);
      out.set(body.subarray(0, at));
      out[0] = head - 1;
      return out;
    }
  }
  return wireRequestSigningBytes(req);
}
