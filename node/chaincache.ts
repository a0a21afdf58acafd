/**
 * Decoding requests whose chain the node has seen before (DESIGN "Decisions and the ledger":
 * grant work is done once per grant). An agent presents the same delegation chain on every
 * call; decoding it again, and re-deriving its grant ids, is most of a request's decode cost.
 *
 * The request body is canonical det-CBOR with its keys in canonical order, so `now`, `cost` and
 * `chain` are its first three entries. When the bytes of the chain entry equal the bytes of a
 * chain decoded before (the cache is keyed by those exact bytes), the rest of the body — the
 * body without that entry — is decoded by the core decoder (strict, canonical-checked) and read
 * by the core's `readWireRequestFields` (the field rules of `readWireRequest`), and the cached
 * `SignedGrant` objects are reused (so their ids stay memoized). Any other shape, any miss, and any failure on the way
 * falls back to the core's `decodeWireMessage` on the whole body, so errors keep their codes.
 * `test/node/chaincache.test.ts` checks both paths give the same result on valid and mutated bodies.
 */
import { asObj, decode, decodeWireMessage, readWireRequestFields, REQUEST_OPTIONAL, type SignedGrant, type WireMessage, type WireRequest } from '../core/index.ts';

/** Chains kept (by their exact bytes); the cache is emptied when it fills. */
export const CHAIN_CACHE_SIZE = 4096;
const MAX_DEPTH = 64;

/** End offset of the CBOR item at `off`, or -1 when it is not a well-formed definite-length item inside `b`. */
export function skipItem(b: Uint8Array, off: number): number {
  let pending = 1;
  let depth = 0;
  while (pending > 0) {
    if (off >= b.length) return -1;
    const ib = b[off]!;
    const major = ib >> 5;
    const ai = ib & 0x1f;
    off++;
    let arg = ai;
    if (ai >= 24) {
      if (ai > 27) return -1;
      const n = 1 << (ai - 24);
      if (off + n > b.length) return -1;
      arg = 0;
      for (let i = 0; i < n; i++) arg = arg * 256 + b[off + i]!;
      off += n;
    }
    pending--;
    switch (major) {
      case 2:
      case 3:
        if (off + arg > b.length) return -1;
        off += arg;
        break;
      case 4:
      case 5:
        if (++depth > MAX_DEPTH || arg > b.length) return -1;
        pending += major === 4 ? arg : 2 * arg;
        break;
      case 6:
        pending++;
        break;
      default:
        break;
    }
  }
  return off;
}

/** `now`, `cost`, `chain` as det-CBOR text keys. */
const NOW = Uint8Array.of(0x63, 0x6e, 0x6f, 0x77);
const COST = Uint8Array.of(0x64, 0x63, 0x6f, 0x73, 0x74);
const CHAIN = Uint8Array.of(0x65, 0x63, 0x68, 0x61, 0x69, 0x6e);

function at(b: Uint8Array, off: number, key: Uint8Array): boolean {
  if (off + key.length > b.length) return false;
  for (let i = 0; i < key.length; i++) if (b[off + i] !== key[i]) return false;
  return true;
}

/** Where the chain entry of a request-shaped body is: its key's offset, its value's span. */
export function chainEntry(body: Uint8Array): { keyAt: number; valueAt: number; end: number } | undefined {
  const h = body[0];
  if (h !== 0xa6 && h !== 0xa7 && h !== 0xa8) return undefined;
  let off = 1;
  if (!at(body, off, NOW)) return undefined;
  off = skipItem(body, off + NOW.length);
  if (off < 0 || !at(body, off, COST)) return undefined;
  off = skipItem(body, off + COST.length);
  if (off < 0 || !at(body, off, CHAIN)) return undefined;
  const valueAt = off + CHAIN.length;
  const end = skipItem(body, valueAt);
  return end < 0 ? undefined : { keyAt: off, valueAt, end };
}

/** Reads the decoded rest of a request (every field but `chain`) with the core's field rules. */
function readRest(v: unknown, chain: readonly SignedGrant[]): WireRequest {
  return readWireRequestFields(asObj(v, 'request', ['frame', 'caller', 'cost', 'now', 'signature'], REQUEST_OPTIONAL), chain);
}

/** A per-node cache of decoded chains; see the module docs. */
export class ChainCache {
  readonly #chains = new Map<string, readonly SignedGrant[]>();
  hits = 0;

  /**
   * Decodes a message body like `decodeWireMessage`, reusing a cached chain when the body's chain
   * bytes were seen before. @throws JcpError exactly as `decodeWireMessage(body)` does.
   */
  decode(body: Uint8Array): WireMessage {
    const e = chainEntry(body);
    if (e === undefined) return decodeWireMessage(body);
    const key = Buffer.from(body.buffer, body.byteOffset + e.valueAt, e.end - e.valueAt).toString('latin1');
    const chain = this.#chains.get(key);
    if (chain === undefined) {
      const m = decodeWireMessage(body);
      if (m.kind === 'request') {
        if (this.#chains.size >= CHAIN_CACHE_SIZE) this.#chains.clear();
        this.#chains.set(key, m.request.chain);
      }
      return m;
    }
    try {
      const rest = new Uint8Array(body.length - (e.end - e.keyAt));
      rest.set(body.subarray(0, e.keyAt));
      rest.set(body.subarray(e.end), e.keyAt);
      rest[0] = body[0]! - 1;
      const request = readRest(decode(rest), chain);
      this.hits++;
      return { kind: 'request', request };
    } catch {
      return decodeWireMessage(body);
    }
  }
}
