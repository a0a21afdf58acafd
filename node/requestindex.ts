/**
 * The request index (§11 idempotent replay; docs/design.md "Decisions and the ledger": rebuilt from the
 * receipts): request id → the seq of the receipt that decided it.
 *
 * Memory matters here (a busy node keeps an entry per request of the last window), so the table
 * is open addressing over typed arrays: the first 128 bits of the id (4 × u32), the seq (f64) and
 * the request's `now` (f64), about 48 bytes per entry at most. A 128-bit prefix is a lookup key,
 * not a proof: callers compare the full `request_id` of the receipt they load before answering.
 *
 * {@link TimedRequestIndex} bounds the index by time, not by history (docs/node.md
 * "The request index is bounded by time"): a request id includes the request's `now`, and a
 * request whose `now` is further than `max_skew_s` from the node clock is refused before the
 * index is consulted, so an id only needs keeping while its `now` is within the window.
 */
import type { ContentId } from '../core/index.ts';

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

/** Request id (content id, 64 hex) → seq (and the request's `now`, unix seconds), in typed arrays. */
export class RequestIndex {
  #keys: Uint32Array;
  #seqs: Float64Array;
  #ats: Float64Array;
  #mask: number;
  #size = 0;

  constructor(capacity = 1024) {
    let cap = 16;
    while (cap < capacity * 2) cap *= 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#seqs = new Float64Array(cap).fill(EMPTY);
    this.#ats = new Float64Array(cap);
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

  /**
   * Records `requestId → seq` (the first record of an id wins; ids are decided once); `at` is the
   * request's `now` (unix seconds; 0 when the caller does not keep time).
   */
  set(requestId: ContentId, seq: number, at = 0): void {
    if ((this.#size + 1) * 10 > this.#seqs.length * 6) this.#grow();
    const a = parseInt(requestId.slice(0, 8), 16) >>> 0;
    const b = parseInt(requestId.slice(8, 16), 16) >>> 0;
    const c = parseInt(requestId.slice(16, 24), 16) >>> 0;
    const d = parseInt(requestId.slice(24, 32), 16) >>> 0;
    this.#insert(a, b, c, d, seq, at);
  }

  /**
   * Records many `prefix → seq` entries at once, in order (the first record of an id wins, as
   * with {@link set}): `keys` holds {@link REQUEST_KEY_WORDS} words per entry (see
   * {@link requestKeyWords}), `seqs` one seq per entry, `ats` (optional) each request's `now`.
   * @throws RangeError when `keys` does not hold 4 words for each seq, or `ats` one per seq.
   */
  insertWords(keys: Uint32Array, seqs: Float64Array, ats?: Float64Array): void {
    if (keys.length !== seqs.length * REQUEST_KEY_WORDS)
      throw new RangeError(`insertWords: ${keys.length} key words for ${seqs.length} seqs`);
    if (ats !== undefined && ats.length !== seqs.length) throw new RangeError(`insertWords: ${ats.length} times for ${seqs.length} seqs`);
    while ((this.#size + seqs.length) * 10 > this.#seqs.length * 6) this.#grow();
    for (let i = 0, o = 0; i < seqs.length; i++, o += REQUEST_KEY_WORDS) {
      this.#insert(keys[o]!, keys[o + 1]!, keys[o + 2]!, keys[o + 3]!, seqs[i]!, ats?.[i] ?? 0);
    }
  }

  /** Calls `f` with every entry: the 4 prefix words, the seq and the request's `now` (table order). */
  forEach(f: (a: number, b: number, c: number, d: number, seq: number, at: number) => void): void {
    const keys = this.#keys;
    const seqs = this.#seqs;
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      if (s !== EMPTY) f(keys[i * 4]!, keys[i * 4 + 1]!, keys[i * 4 + 2]!, keys[i * 4 + 3]!, s, this.#ats[i]!);
    }
  }

  #insert(a: number, b: number, c: number, d: number, seq: number, at: number): void {
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
        this.#ats[i] = at;
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
    const ats = this.#ats;
    const cap = seqs.length * 2;
    this.#keys = new Uint32Array(cap * 4);
    this.#seqs = new Float64Array(cap).fill(EMPTY);
    this.#ats = new Float64Array(cap);
    this.#mask = cap - 1;
    this.#size = 0;
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      if (s !== EMPTY) this.#insert(keys[i * 4]!, keys[i * 4 + 1]!, keys[i * 4 + 2]!, keys[i * 4 + 3]!, s, ats[i]!);
    }
  }
}

/** Packed request-index entries: 4 prefix words per entry, one seq and one `now` (unix s) per entry. */
export interface RequestEntries {
  readonly keys: Uint32Array;
  readonly seqs: Float64Array;
  readonly ats: Float64Array;
}

/**
 * The request index bounded by time (§11 idempotent replay; docs/node.md): entries live in
 * buckets of `windowS` seconds by the request's `now`, and a whole bucket is dropped once it lies
 * before the horizon.
 *
 * The rule: `horizon` = the highest `clock − windowS` seen (`windowS` = `max_skew_s` + margin);
 * it never goes back, even when the clock does. A request whose `now` is below the horizon is
 * refused (`clock-skew`) by the node before the index is asked, so an entry below the horizon can
 * never be needed: an old request sent again gets the skew error, never a second decision. Every
 * entry at or above the horizon is kept. Memory is bounded by the decisions of about two windows.
 */
export class TimedRequestIndex {
  /** Seconds of `now` per bucket, and how far behind the clock the horizon trails. */
  readonly windowS: number;
  readonly #buckets = new Map<number, RequestIndex>();
  #horizon: number;
  #minBucket = Number.POSITIVE_INFINITY;

  /** `windowS` ≥ 1 (seconds); `horizon` (unix s) the lowest `now` still answered (default 0: everything). */
  constructor(windowS: number, horizon = 0) {
    this.windowS = Math.max(1, Math.floor(windowS));
    this.#horizon = horizon;
  }

  /** The lowest request `now` (unix s) the index still answers for; requests below it are refused. */
  get horizon(): number {
    return this.#horizon;
  }

  /** Number of entries kept. */
  get size(): number {
    let n = 0;
    for (const b of this.#buckets.values()) n += b.size;
    return n;
  }

  #bucketOf(at: number): number {
    return Math.floor(at / this.windowS);
  }

  /**
   * The seq recorded for `requestId` (by its 128-bit prefix), or undefined. With `at` (the
   * request's `now`, part of its id) only its bucket is searched; without, every bucket.
   */
  get(requestId: ContentId, at?: number): number | undefined {
    if (at !== undefined) return this.#buckets.get(this.#bucketOf(at))?.get(requestId);
    for (const b of this.#buckets.values()) {
      const s = b.get(requestId);
      if (s !== undefined) return s;
    }
    return undefined;
  }

  /** Records `requestId → seq` for a request with `now` = `at`; ignored below the horizon (never needed). */
  set(requestId: ContentId, seq: number, at: number): void {
    if (at < this.#horizon) return;
    this.#bucket(this.#bucketOf(at), 16).set(requestId, seq, at);
  }

  #bucket(n: number, capacity: number): RequestIndex {
    let b = this.#buckets.get(n);
    if (b === undefined) {
      b = new RequestIndex(capacity);
      this.#buckets.set(n, b);
      if (n < this.#minBucket) this.#minBucket = n;
    }
    return b;
  }

  /**
   * Records packed entries (see {@link RequestIndex.insertWords}); those below the horizon are
   * skipped. @throws RangeError when the arrays do not line up.
   */
  insertWords(keys: Uint32Array, seqs: Float64Array, ats: Float64Array): void {
    if (keys.length !== seqs.length * REQUEST_KEY_WORDS || ats.length !== seqs.length) {
      throw new RangeError(`insertWords: ${keys.length} key words and ${ats.length} times for ${seqs.length} seqs`);
    }
    // Group by bucket, so each bucket grows once.
    const groups = new Map<number, number[]>();
    for (let i = 0; i < seqs.length; i++) {
      const at = ats[i]!;
      if (at < this.#horizon) continue;
      const n = this.#bucketOf(at);
      let g = groups.get(n);
      if (g === undefined) {
        g = [];
        groups.set(n, g);
      }
      g.push(i);
    }
    for (const [n, idx] of groups) {
      const k = new Uint32Array(idx.length * REQUEST_KEY_WORDS);
      const s = new Float64Array(idx.length);
      const a = new Float64Array(idx.length);
      idx.forEach((i, j) => {
        k.set(keys.subarray(i * REQUEST_KEY_WORDS, (i + 1) * REQUEST_KEY_WORDS), j * REQUEST_KEY_WORDS);
        s[j] = seqs[i]!;
        a[j] = ats[i]!;
      });
      this.#bucket(n, idx.length).insertWords(k, s, a);
    }
  }

  /**
   * Moves the horizon up to `clockS − windowS` (never down) and drops the buckets that lie wholly
   * below it. Cheap when nothing is due (one comparison). Returns the entries dropped.
   */
  advance(clockS: number): number {
    const h = clockS - this.windowS;
    if (h > this.#horizon) this.#horizon = h;
    let dropped = 0;
    while ((this.#minBucket + 1) * this.windowS <= this.#horizon) {
      const b = this.#buckets.get(this.#minBucket);
      if (b !== undefined) {
        dropped += b.size;
        this.#buckets.delete(this.#minBucket);
      }
      this.#minBucket = this.#buckets.size === 0 ? Number.POSITIVE_INFINITY : Math.min(...this.#buckets.keys());
    }
    return dropped;
  }

  /**
   * Every entry whose `now` is at or above `minAt` (default the horizon), in seq order (a
   * snapshot's request index). Built in typed arrays: the entries are gathered in table order,
   * then an index of them is sorted by seq (no per-entry object: at 100,000 entries the row
   * arrays it used before cost ~80 ms of the snapshot worker's CPU here).
   */
  entries(minAt = this.#horizon): RequestEntries {
    let n = 0;
    for (const b of this.#buckets.values()) {
      b.forEach((_a, _b, _c, _d, _seq, at) => {
        if (at >= minAt) n++;
      });
    }
    const k0 = new Uint32Array(n * REQUEST_KEY_WORDS);
    const s0 = new Float64Array(n);
    const t0 = new Float64Array(n);
    let j = 0;
    for (const b of this.#buckets.values()) {
      b.forEach((a, bb, c, d, seq, at) => {
        if (at < minAt) return;
        k0[j * 4] = a;
        k0[j * 4 + 1] = bb;
        k0[j * 4 + 2] = c;
        k0[j * 4 + 3] = d;
        s0[j] = seq;
        t0[j] = at;
        j++;
      });
    }
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((x, y) => s0[x]! - s0[y]!);
    const keys = new Uint32Array(n * REQUEST_KEY_WORDS);
    const seqs = new Float64Array(n);
    const ats = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const from = order[i]!;
      keys[i * 4] = k0[from * 4]!;
      keys[i * 4 + 1] = k0[from * 4 + 1]!;
      keys[i * 4 + 2] = k0[from * 4 + 2]!;
      keys[i * 4 + 3] = k0[from * 4 + 3]!;
      seqs[i] = s0[from]!;
      ats[i] = t0[from]!;
    }
    return { keys, seqs, ats };
  }
}
