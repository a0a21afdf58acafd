/**
 * Decoding requests whose chain the node has seen before (docs/design.md "Decisions and the ledger":
 * grant work is done once per grant). An agent presents the same delegation chain on every
 * call; decoding it again, and re-deriving its grant ids, is most of a request's decode cost.
 *
 * The core finds the `chain` entry of a request body (`requestChainEntry`); when its bytes equal
 * the bytes of a chain decoded before (the cache is keyed by those exact bytes), the core decodes
 * the rest of the body strictly and reuses the cached `SignedGrant` objects
 * (`decodeWireRequestWithChain`), so their ids stay memoized. Any other shape, any miss, and any
 * failure on the way falls back to the core's `decodeWireMessage` on the whole body, so errors
 * keep their codes. `test/node/chaincache.test.ts` checks both paths give the same result on
 * valid and mutated bodies. Nothing here reads CBOR: the bytes are only a cache key.
 */
import { decodeWireMessage, decodeWireRequestWithChain, requestChainEntry, type SignedGrant, type WireMessage } from '../core/index.ts';

/** Chains kept (by their exact bytes); the cache is emptied when it fills. */
export const CHAIN_CACHE_SIZE = 4096;

/** A per-node cache of decoded chains; see the module docs. */
export class ChainCache {
  readonly #chains = new Map<string, readonly SignedGrant[]>();
  hits = 0;

  /**
   * Decodes a message body like `decodeWireMessage`, reusing a cached chain when the body's chain
   * bytes were seen before. @throws JcpError exactly as `decodeWireMessage(body)` does.
   */
  decode(body: Uint8Array): WireMessage {
    const e = requestChainEntry(body);
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
      const request = decodeWireRequestWithChain(body, e, chain);
      this.hits++;
      return { kind: 'request', request };
    } catch {
      return decodeWireMessage(body);
    }
  }
}
