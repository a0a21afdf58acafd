/**
 * Revocation freshness (spec §4.3 across a partition): whether a node can confirm it has seen the
 * latest revocations, and since when it cannot.
 *
 * What "confirm" means here, precisely. A confirmation at time `t` is a revocation stream info
 * request SENT at `t` (answered by the stream leader, `$JS.API.STREAM.INFO`, the same leader read
 * as settlement) whose answer says the stream's last sequence is `L`, together with the node's
 * feed having taken every stream message up to `L` into its revocation store (submitted, durable
 * or refused, in stream order). Every revocation stored before `t` has a sequence ≤ `L`, so at
 * `t` the node held every revocation the stream had. The confirmation time is the send time, not
 * the answer time: a slow answer never makes the node look fresher than it was.
 *
 * Staleness is `now − t` of the newest confirmation (seconds); before the first confirmation it
 * is unbounded (a node that never reached the stream cannot vouch for anything). A node is
 * stale when staleness exceeds `limitS` (`revocation_staleness_s`); then it stops allowing
 * (node/cluster.ts maps that to `Deny(revoked)` with the detail code `revocation-stale`).
 *
 * Pure bookkeeping with the clock passed in (milliseconds); the feed (channel/feed.ts) probes
 * and reports here.
 */

/** The stable detail code of a refusal because revocations could not be confirmed. */
export const REVOCATION_STALE = 'revocation-stale';

/** One snapshot of {@link RevocationFreshness}, for `/healthz`, `/metrics` and the deny's detail. */
export interface FreshnessView {
  /** The configured limit, seconds (0 = off: never stale). */
  readonly limitS: number;
  /** Seconds since the newest confirmation; `Infinity` before the first. */
  readonly stalenessS: number;
  /** True when `limitS > 0` and `stalenessS > limitS`. */
  readonly stale: boolean;
  /** The stream's last sequence as last reported by the leader (0 before any answer). */
  readonly streamSeq: number;
  /** The highest stream sequence the node's store has taken. */
  readonly takenSeq: number;
  /** Unix milliseconds of the newest confirmation, or undefined before the first. */
  readonly confirmedAtMs: number | undefined;
  /** Why the last probe failed, when it did (cleared by the next answer). */
  readonly lastProblem: string | undefined;
}

/** Tracks confirmations of the revocation stream; see the module docs. */
export class RevocationFreshness {
  readonly limitS: number;
  #taken = 0;
  #streamSeq = 0;
  #confirmedAtMs: number | undefined;
  #problem: string | undefined;
  /** Probes answered but not yet confirmed: (sent at, last seq), oldest first. */
  readonly #waiting: Array<{ readonly sentAtMs: number; readonly lastSeq: number }> = [];

  /** @param limitS `revocation_staleness_s` (seconds, ≥ 0; 0 = never stale). */
  constructor(limitS: number) {
    if (!(Number.isFinite(limitS) && limitS >= 0)) throw new RangeError(`revocation staleness limit: expected seconds ≥ 0, got ${limitS}`);
    this.limitS = limitS;
  }

  /** The feed took stream message `seq` (in stream order). Confirms every waiting probe it covers. */
  taken(seq: number): void {
    if (seq > this.#taken) this.#taken = seq;
    while (this.#waiting.length > 0 && this.#waiting[0]!.lastSeq <= this.#taken) this.#confirm(this.#waiting.shift()!.sentAtMs);
  }

  /** A probe sent at `sentAtMs` was answered: the stream's last sequence was `lastSeq`. */
  answered(sentAtMs: number, lastSeq: number): void {
    this.#problem = undefined;
    if (lastSeq > this.#streamSeq) this.#streamSeq = lastSeq;
    if (lastSeq <= this.#taken) {
      this.#confirm(sentAtMs);
      return;
    }
    // Keep the newest probe per sequence only; older ones confirm no later than it.
    const last = this.#waiting[this.#waiting.length - 1];
    if (last !== undefined && last.lastSeq >= lastSeq) return;
    this.#waiting.push({ sentAtMs, lastSeq });
    if (this.#waiting.length > 64) this.#waiting.shift();
  }

  /** A probe failed (timeout, not connected): recorded for the view; staleness keeps growing. */
  failed(why: string): void {
    this.#problem = why;
  }

  #confirm(atMs: number): void {
    if (this.#confirmedAtMs === undefined || atMs > this.#confirmedAtMs) this.#confirmedAtMs = atMs;
  }

  /** The state at unix milliseconds `nowMs`. */
  view(nowMs: number): FreshnessView {
    const stalenessS = this.#confirmedAtMs === undefined ? Number.POSITIVE_INFINITY : Math.max(0, (nowMs - this.#confirmedAtMs) / 1000);
    return {
      limitS: this.limitS,
      stalenessS,
      stale: this.limitS > 0 && stalenessS > this.limitS,
      streamSeq: this.#streamSeq,
      takenSeq: this.#taken,
      confirmedAtMs: this.#confirmedAtMs,
      lastProblem: this.#problem,
    };
  }
}
