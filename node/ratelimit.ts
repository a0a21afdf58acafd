/**
 * Abuse limits per peer address: a token bucket per remote IP address, charged one
 * token per {@link REPLY_TOKEN_BYTES} of its message (at least one) by every request of that peer
 * that fails before a decision (an error reply: malformed,
 * non-canonical, schema, clock skew, unknown resource, bad payload, refused revocation, …) and
 * by every `bad-signature` deny and every deny on a chain whose root no trust root issued
 * (`untrusted-root`; those two also draw on a global bucket, the enforcer's `denyLimiter`). A peer whose bucket is empty gets `rate-limited` before its
 * message is decoded, so it makes the node write no receipt and do no signature work; the bucket
 * refills at `refill_per_s` tokens per second up to `burst`. Well-formed, well-signed requests
 * cost nothing, and peers are independent: one peer's garbage never slows another's calls. The
 * replies the node gives without a decision (an idempotent replay of a request decided before, a
 * `tool_list`) spend tokens by their size ({@link PeerLimiter.spend}, {@link REPLY_TOKEN_BYTES}),
 * and replays read back from the log run a few at a time ({@link ReplaySlots}).
 *
 * Memory is bounded: at most `maxPeers` buckets, kept in the order they were last charged. When
 * full, the {@link EVICT_SCAN} least recently charged are looked at: those that refilled completely
 * (peers that behave: dropping one loses nothing) go, else the least recently charged one. A
 * bounded step, so a table full of drained buckets (many addresses failing) never makes a new
 * peer cost a walk over every peer on the event loop.
 */

/**
 * Bytes of a free reply one token pays for (64 KiB): an idempotent replay or a `tool_list` of
 * `b` bytes spends max(1, ⌈b / 64 KiB⌉) tokens, so at the default refill (20 tokens/s) one address
 * gets at most 1.25 MiB/s of replies it does not pay for in energy.
 */
export const REPLY_TOKEN_BYTES = 64 * 1024;

/**
 * Seconds a peer address counts as failing after its last failure: while the node's global failure
 * bucket (config `abuse.failure_burst`) is empty, such an address is refused `rate-limited`
 * (node/enforcer.ts `Enforcer.admits`), so under a spread flood each address gets one failed
 * message in this long, not `abuse.refill_per_s` tokens' worth a second.
 */
export const FAILED_RECENTLY_S = 10;

/** Buckets looked at, least recently charged first, when the table is full and a new peer comes. */
export const EVICT_SCAN = 32;

/** Settings of {@link PeerLimiter} (config `abuse`). */
export interface PeerLimitConfig {
  /** Tokens a peer starts with and may save up (0 = no limit). */
  readonly burst: number;
  /** Tokens added per second. */
  readonly refillPerS: number;
  /** Most peers tracked at once. */
  readonly maxPeers: number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** When the peer last failed (clock seconds; {@link PeerLimiter.fail}), -Infinity if never. */
  failedAt: number;
}

/** Token buckets by peer address; the clock is in seconds (the node's clock, injectable in tests). */
export class PeerLimiter {
  readonly #cfg: PeerLimitConfig;
  readonly #clockS: () => number;
  readonly #buckets = new Map<string, Bucket>();
  #evictLooks = 0;

  constructor(cfg: PeerLimitConfig, clockS: () => number) {
    this.#cfg = cfg;
    this.#clockS = clockS;
  }

  /** True when limits are on (`burst` > 0). */
  get enabled(): boolean {
    return this.#cfg.burst > 0;
  }

  /**
   * Buckets looked at by evictions so far (each new peer in a full table looks at most at
   * {@link EVICT_SCAN}): the work a full table costs, counted rather than timed.
   */
  get evictLooks(): number {
    return this.#evictLooks;
  }

  /** Peers tracked. */
  get peers(): number {
    return this.#buckets.size;
  }

  #refilled(peer: string): Bucket | undefined {
    const b = this.#buckets.get(peer);
    if (b === undefined) return undefined;
    const now = this.#clockS();
    if (now > b.at) {
      b.tokens = Math.min(this.#cfg.burst, b.tokens + (now - b.at) * this.#cfg.refillPerS);
      b.at = now;
    }
    return b;
  }

  /** False when `peer` has no token left: its message must be refused with `rate-limited`. */
  admits(peer: string): boolean {
    if (!this.enabled) return true;
    const b = this.#refilled(peer);
    return b === undefined || b.tokens >= 1;
  }

  /**
   * Takes one token from `peer` if it has one (a bad-signature deny about to be sealed): true
   * when taken (or limits are off), false when the bucket is empty and nothing was taken.
   */
  take(peer: string): boolean {
    if (!this.enabled) return true;
    const b = this.#charged(peer);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  /**
   * Spends `n` tokens of `peer` (n ≥ 1) for a reply it had for free (an idempotent replay, a
   * `tool_list`; node/enforcer.ts charges one per {@link REPLY_TOKEN_BYTES} of reply): the bucket
   * may go below zero, so the debt is paid by refill before the peer is admitted again. False
   * (nothing spent) when the bucket had less than one token; true when spent or limits are off.
   */
  spend(peer: string, n: number): boolean {
    return this.#spend(peer, n, false);
  }

  /**
   * Takes `n` tokens (default one) from `peer` (a failure the jcp/1 server answers itself: a
   * `read-timeout`; every peer's failures in the node's global failure bucket), even from an empty
   * bucket: the debt is paid by refill before the peer is admitted again (as {@link spend}'s), so
   * failures past the last token still cost their time.
   */
  charge(peer: string, n = 1): void {
    if (!this.enabled) return;
    const b = this.#charged(peer);
    b.tokens -= n;
    b.failedAt = this.#clockS();
  }

  /**
   * {@link spend} for a failure of `peer` (a request that failed before a decision): also notes
   * when it failed, for {@link failedWithin}. Same result as {@link spend}.
   */
  fail(peer: string, n: number): boolean {
    return this.#spend(peer, n, true);
  }

  #spend(peer: string, n: number, failed: boolean): boolean {
    if (!this.enabled) return true;
    const b = this.#charged(peer);
    if (failed) b.failedAt = this.#clockS();
    if (b.tokens < 1) return false;
    b.tokens -= Math.max(1, n);
    return true;
  }

  /** True when `peer` failed ({@link fail}, or a `read-timeout` {@link charge}) within the last `seconds`. */
  failedWithin(peer: string, seconds: number): boolean {
    const b = this.#buckets.get(peer);
    return b !== undefined && this.#clockS() - b.failedAt < seconds;
  }

  /** The bucket of `peer`, refilled and moved to the most recently charged end (made when new). */
  #charged(peer: string): Bucket {
    let b = this.#refilled(peer);
    if (b === undefined) {
      if (this.#buckets.size >= this.#cfg.maxPeers) this.#evict();
      b = { tokens: this.#cfg.burst, at: this.#clockS(), failedAt: Number.NEGATIVE_INFINITY };
    } else this.#buckets.delete(peer);
    this.#buckets.set(peer, b);
    return b;
  }

  #evict(): void {
    let looked = 0;
    for (const [peer] of this.#buckets) {
      if (looked++ >= EVICT_SCAN) break;
      this.#evictLooks++;
      if (this.#refilled(peer)!.tokens >= this.#cfg.burst) this.#buckets.delete(peer);
    }
    if (this.#buckets.size >= this.#cfg.maxPeers) {
      const oldest = this.#buckets.keys().next();
      if (!oldest.done) this.#buckets.delete(oldest.value);
    }
  }
}

/** Replies read back from the log at once for one peer address ({@link ReplaySlots}). */
export const REPLAYS_PER_PEER = 2;
/** Replies read back from the log at once for all peers ({@link ReplaySlots}). */
export const REPLAYS_TOTAL = 16;

/**
 * Bounds the idempotent replays read back from the log at once (§11: a request decided before
 * gets its original response, result included, up to the log's result cap of 8 MiB): at most
 * `perPeer` per peer address and `total` in all; the others wait their turn in arrival order
 * (they hold no result while they wait, and the server's in-flight cap bounds how many wait).
 * Without it, one paid call's request pipelined many times from non-reading connections made
 * the node hold a copy of its result per re-send (3 GB measured, 2026-12-06).
 */
export class ReplaySlots {
  readonly #perPeer: number;
  readonly #total: number;
  #running = 0;
  readonly #byPeer = new Map<string, number>();
  readonly #waiting: { peer: string; go: () => void }[] = [];

  constructor(perPeer = REPLAYS_PER_PEER, total = REPLAYS_TOTAL) {
    this.#perPeer = perPeer;
    this.#total = total;
  }

  /** Replays running now (tests, metrics). */
  get running(): number {
    return this.#running;
  }

  /** Replays waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `fn` in a slot of `peer`, waiting for one first; the slot is freed however `fn` ends. */
  async run<T>(peer: string, fn: () => Promise<T>): Promise<T> {
    // A waiter's slot is taken for it by the replay that frees it (#leave), before anyone else looks.
    if (this.#free(peer)) this.#enter(peer);
    else await new Promise<void>((go) => this.#waiting.push({ peer, go }));
    try {
      return await fn();
    } finally {
      this.#leave(peer);
    }
  }

  #free(peer: string): boolean {
    return this.#running < this.#total && (this.#byPeer.get(peer) ?? 0) < this.#perPeer;
  }

  #enter(peer: string): void {
    this.#running++;
    this.#byPeer.set(peer, (this.#byPeer.get(peer) ?? 0) + 1);
  }

  #leave(peer: string): void {
    this.#running--;
    const n = (this.#byPeer.get(peer) ?? 1) - 1;
    if (n === 0) this.#byPeer.delete(peer);
    else this.#byPeer.set(peer, n);
    // The first waiter that fits goes (a peer at its own bound does not hold up the others).
    const i = this.#waiting.findIndex((w) => this.#free(w.peer));
    if (i >= 0) {
      const [w] = this.#waiting.splice(i, 1);
      this.#enter(w!.peer);
      w!.go();
    }
  }
}
