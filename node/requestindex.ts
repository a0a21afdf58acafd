/**
 * The request index (§11 idempotent replay; DESIGN "Decisions and the ledger": rebuilt from the
 * receipts): request id → the seq of the receipt that decided it.
 *
 * Memory matters here (a node with 1,000,000 receipts keeps 1,000,000 entries), so the table is
 * open addressing over typed arrays: the first 128 bits of the id (4 × u32) and the seq (f64),
 * about 40 bytes per entry at most. A 128-bit prefix is a lookup key, not a proof: callers compare
 * the full `request_id` of the receipt they load before answering with it.
 */
import type { ContentId } from '../core/hash.ts';

const EMPTY = -1;

/** 32-bit words of a request id's 128-bit prefix kept by the index. */
export const REQUEST_KEY_WORDS = 4;

/**
 * Writes the 128-bit prefix of `requestId` (64 hex chars) as 4 u32 words into `out` at word `at`:
 * the form {@link RequestIndex.insertWords} takes, e.g. request ids packed by a replay worker.
 */
export function requestKeyWords(requestId: ContentId, out: Uint32Array, at: number): void {
  out[at] = parseInt(requestId.slice(0, 8), 16) >>> 0;
  out[at + 1] = parseInt(requestId.slice(8, 16), 16) >>> 0;
  out[at + 2] = parseInt(requestId.slice(16, 24), 16) >>> 0;
  out[at + 3] = parseInt(requestId.slice(24, 32), 16) >>> 0;
}

/** Request id (content id, 64 hex) → seq, in typed arrays. */
export class RequestIndex {
  #keys: Uint32Array;
  #seqs: Float64Array;
  #mask: number;
  #size = 0;

  constructor(capacity = 1024) {
    let cap = 16;
    while (cap < capacity * 2) cap *= 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#seqs = new Float64Array(cap).fill(EMPTY);
    this.#mask = cap - 1;
  }

  /** Number of entries. */
  get size(): number {
    return this.#size;
  }

  /** The seq recorded for `requestId` (by its 128-bit prefix), or undefined. */
  get(requestId: ContentId): number | undefined {
    const a = parseInt(requestId.slice(0, 8), 16) >>> 0;
    const b = parseInt(requestId.slice(8, 16), 16) >>> 0;
    const c = parseInt(requestId.slice(16, 24), 16) >>> 0;
    const d = parseInt(requestId.slice(24, 32), 16) >>> 0;
    let i = (a ^ d) & this.#mask;
    for (;;) {
      const s = this.#seqs[i]!;
      if (s === EMPTY) return undefined;
      const o = i * 4;
      if (this.#keys[o] === a && this.#keys[o + 1] === b && this.#keys[o + 2] === c && this.#keys[o + 3] === d) return s;
      i = (i + 1) & this.#mask;
    }
  }

  /** Records `requestId → seq` (the first record of an id wins; ids are decided once). */
  set(requestId: ContentId, seq: number): void {
    if ((this.#size + 1) * 10 > this.#seqs.length * 6) this.#grow();
    const a = parseInt(requestId.slice(0, 8), 16) >>> 0;
    const b = parseInt(requestId.slice(8, 16), 16) >>> 0;
    const c = parseInt(requestId.slice(16, 24), 16) >>> 0;
    const d = parseInt(requestId.slice(24, 32), 16) >>> 0;
    this.#insert(a, b, c, d, seq);
  }

  /**
   * Records many `prefix → seq` entries at once, in order (the first record of an id wins, as
   * with {@link set}): `keys` holds {@link REQUEST_KEY_WORDS} words per entry (see
   * {@link requestKeyWords}), `seqs` one seq per entry.
   * @throws RangeError when `keys` does not hold 4 words for each seq.
   */
  insertWords(keys: Uint32Array, seqs: Float64Array): void {
    if (keys.length !== seqs.length * REQUEST_KEY_WORDS) throw new RangeError(`insertWords: ${keys.length} key words for ${seqs.length} seqs`);
    while ((this.#size + seqs.length) * 10 > this.#seqs.length * 6) this.#grow();
    for (let i = 0, o = 0; i < seqs.length; i++, o += REQUEST_KEY_WORDS) this.#insert(keys[o]!, keys[o + 1]!, keys[o + 2]!, keys[o + 3]!, seqs[i]!);
  }

  #insert(a: number, b: number, c: number, d: number, seq: number): void {
    let i = (a ^ d) & this.#mask;
    for (;;) {
      const s = this.#seqs[i]!;
      const o = i * 4;
      if (s === EMPTY) {
        this.#keys[o] = a;
        this.#keys[o + 1] = b;
        this.#keys[o + 2] = c;
        this.#keys[o + 3] = d;
        this.#seqs[i] = seq;
        this.#size++;
        return;
      }
      if (this.#keys[o] === a && this.#keys[o + 1] === b && this.#keys[o + 2] === c && this.#keys[o + 3] === d) return;
      i = (i + 1) & this.#mask;
    }
  }

  #grow(): void {
    const keys = this.#keys;
    const seqs = this.#seqs;
    const cap = seqs.length * 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#seqs = new Float64Array(cap).fill(EMPTY);
    this.#mask = cap - 1;
    this.#size = 0;
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      if (s !== EMPTY) this.#insert(keys[i * 4]!, keys[i * 4 + 1]!, keys[i * 4 + 2]!, keys[i * 4 + 3]!, s);
    }
  }
}
