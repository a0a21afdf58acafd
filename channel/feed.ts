/**
 * The revocation stream as a node's revocation feed (spec §4.3; node/hooks.ts `RevocationFeed`,
 * implemented structurally so channel/ imports only core): on start it follows the revocation
 * stream from its first message, decodes each signed revocation and submits it, in stream order,
 * to the node's sink, which checks authority and persists it. Start resolves once the backlog
 * that existed at start has been submitted (or after `catchUpMs` when NATS cannot be reached: the
 * node serves meanwhile, and keeps the revocations it persisted before).
 *
 * The stream also carries amendments (§4.7; docs/steering.md "At the node"): a message that
 * is the jcp/1 `{amend: {grant, checkpoint, amendment}}` map is handed to the sink's `amend` (the
 * node re-verifies the pair and applies it against its own ledger), in stream order with the
 * revocations. A sink without `amend` counts such messages as malformed.
 *
 * Malformed messages and refused revocations and amendments are counted and logged, never applied.
 *
 * Staleness (docs/regions.md "Revocation staleness"): with `stalenessMs` > 0 the feed asks the
 * stream's leader for its newest sequence every `probeMs` ({@link RevocationBus.revocationHead});
 * once every message up to that sequence has been taken by the sink, the latest revocations are
 * confirmed as of the moment it asked. {@link RevocationStreamFeed.staleness} is stale when the
 * last confirmation is older than `stalenessMs` (a node cut off from the stream, or behind it):
 * the node then stops allowing (node/cluster.ts).
 */
import { type ContentId, decode, decodeWireMessage, readSignedRevocation, type Result, type SignedAmendment, type SignedCheckpoint, type SignedGrant, type SignedRevocation } from '../core/index.ts';
import type { RevocationBus, RevocationFollow } from './bus.ts';
import { type Logger, silentLogger } from './log.ts';

/** The node's revocation sink (node/hooks.ts `RevocationSink`). */
export interface RevocationSinkLike {
  submit(sr: SignedRevocation): Promise<Result<{ grantId: ContentId; admitted: boolean }, { code: string; why: string }>>;
  /** Applies an amendment from the stream (§4.7; node/enforcer.ts `applyAmendment`). */
  amend?(grant: SignedGrant, checkpoint: SignedCheckpoint, amendment: SignedAmendment): Promise<Result<unknown, { code: string; why: string }>>;
}

/** Options of a {@link RevocationStreamFeed}. */
export interface RevocationStreamFeedOpts {
  readonly bus: RevocationBus;
  readonly log?: Logger;
  /** How long start waits for the backlog (ms). Default 5,000. */
  readonly catchUpMs?: number;
  /** Called after each revocation the sink took (admitted or waiting for its grant). */
  readonly onTaken?: (sr: SignedRevocation, taken: { grantId: ContentId; admitted: boolean }) => void;
  /**
   * How old the last confirmation that this node has seen the latest revocations may get before
   * {@link RevocationStreamFeed.staleness} says stale (ms). 0 or absent: never stale (no probes).
   * The clock starts at construction, so a node that never reaches the stream goes stale this long after boot.
   */
  readonly stalenessMs?: number;
  /** How often the stream's head is asked for (ms). Default min(1,000, stalenessMs / 4). */
  readonly probeMs?: number;
  /** Monotonic clock in ms (tests). Default `performance.now()`. */
  readonly now?: () => number;
}

/** What {@link RevocationStreamFeed.staleness} reports (also on `/healthz` and `/metrics`). */
export interface RevocationStaleness {
  /** True once the last confirmation is older than the limit: the node must not allow. */
  readonly stale: boolean;
  /** Seconds since the latest revocations were last confirmed (since construction when never). */
  readonly ageS: number;
  /** The limit in seconds (0: staleness is off). */
  readonly limitS: number;
  /** The stream sequence of the last message taken, and the last head the leader reported (-1: none yet). */
  readonly seenSeq: number;
  readonly headSeq: number;
  /** True once a confirmation succeeded at least once. */
  readonly confirmed: boolean;
}

/** Follows the revocation stream into a node. See the module docs. */
export class RevocationStreamFeed {
  readonly name = 'nats-revocations';
  readonly #opts: RevocationStreamFeedOpts;
  readonly #log: Logger;
  #follow: RevocationFollow | undefined;
  #queue: Promise<void> = Promise.resolve();
  #stopped = false;
  /** Counters: delivered, taken by the sink, malformed, refused by the sink (amendments included in delivered and malformed). */
  readonly counts = { delivered: 0, taken: 0, malformed: 0, refused: 0 };
  /** Amendments (§4.7) from the stream: applied by the sink, refused by it. */
  readonly amendmentCounts = { applied: 0, refused: 0 };
  readonly #now: () => number;
  /** When the latest revocations were last confirmed (ms on {@link #now}); construction time at first. */
  #confirmedAt: number;
  #confirmed = false;
  /** Highest stream seq whose sink call has finished. */
  #seenSeq = 0;
  #headSeq = -1;
  /** A head the leader reported that the sink has not reached yet, with when it was asked. */
  #pending: { head: number; askedAt: number } | undefined;
  #probeTimer: NodeJS.Timeout | undefined;
  #probing = false;
  #wasStale = false;

  constructor(opts: RevocationStreamFeedOpts) {
    this.#opts = opts;
    this.#log = opts.log ?? silentLogger;
    this.#now = opts.now ?? (() => performance.now());
    this.#confirmedAt = this.#now();
  }

  /** Whether this node can still vouch for having seen the latest revocations. See {@link RevocationStaleness}. */
  staleness(): RevocationStaleness {
    const limitMs = this.#opts.stalenessMs ?? 0;
    const ageMs = Math.max(0, this.#now() - this.#confirmedAt);
    const stale = limitMs > 0 && ageMs > limitMs;
    if (stale !== this.#wasStale) {
      this.#wasStale = stale;
      if (stale) this.#log.warn({ age_s: ageMs / 1000, limit_s: limitMs / 1000, seen_seq: this.#seenSeq, head_seq: this.#headSeq }, 'revocation-stale: cannot confirm the latest revocations; refusing every call');
      else this.#log.info({ seen_seq: this.#seenSeq }, 'revocations confirmed again; allowing');
    }
    return { stale, ageS: ageMs / 1000, limitS: limitMs / 1000, seenSeq: this.#seenSeq, headSeq: this.#headSeq, confirmed: this.#confirmed };
  }

  /** Asks the leader for the head once (serialised); confirms now or when the sink reaches it. */
  async probe(): Promise<void> {
    const head = this.#opts.bus.revocationHead;
    if (head === undefined || this.#probing || this.#stopped) return;
    this.#probing = true;
    const askedAt = this.#now();
    try {
      const seq = await head.call(this.#opts.bus);
      this.#headSeq = Math.max(this.#headSeq, seq);
      if (this.#seenSeq >= seq) this.#confirm(askedAt);
      else if (this.#pending === undefined || seq >= this.#pending.head) this.#pending = { head: seq, askedAt };
    } catch (e) {
      this.#log.debug({ why: (e as Error).message }, 'revocation stream head not reachable');
    } finally {
      this.#probing = false;
    }
  }

  #confirm(at: number): void {
    if (at > this.#confirmedAt) this.#confirmedAt = at;
    this.#confirmed = true;
  }

  #taken(seq: number | undefined): void {
    if (seq === undefined) return;
    if (seq > this.#seenSeq) this.#seenSeq = seq;
    const p = this.#pending;
    if (p !== undefined && this.#seenSeq >= p.head) {
      this.#pending = undefined;
      this.#confirm(p.askedAt);
    }
  }

  #startProbes(): void {
    const limit = this.#opts.stalenessMs ?? 0;
    if (limit <= 0 || this.#opts.bus.revocationHead === undefined || this.#probeTimer !== undefined || this.#stopped) return;
    const every = this.#opts.probeMs ?? Math.max(10, Math.min(1_000, Math.floor(limit / 4)));
    this.#probeTimer = setInterval(() => void this.probe(), every);
    this.#probeTimer.unref();
    void this.probe();
  }

  /** Starts following; resolves once caught up, or after `catchUpMs`. Never rejects. */
  async start(sink: RevocationSinkLike): Promise<void> {
    const catchUpMs = this.#opts.catchUpMs ?? 5_000;
    this.#startProbes();
    const started = (async () => {
      for (let attempt = 0; !this.#stopped; attempt++) {
        try {
          this.#follow = await this.#opts.bus.followRevocations((bytes, seq) => this.#deliver(sink, bytes, seq));
          if (this.#stopped) await this.#follow.stop();
          return;
        } catch (e) {
          this.#log.warn({ why: (e as Error).message, attempt }, 'revocation stream not reachable yet; retrying');
          await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 4))));
        }
      }
    })();
    const caughtUp = started.then(async () => {
      await this.#follow?.caughtUp;
      await this.#queue;
    });
    const inTime = await Promise.race([caughtUp.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), catchUpMs).unref())]);
    if (!inTime) this.#log.warn({ catch_up_ms: catchUpMs }, 'revocation stream backlog not read yet; serving with the revocations on disk');
    else this.#log.info({ revocations: this.counts.delivered }, 'revocation stream caught up');
  }

  #deliver(sink: RevocationSinkLike, bytes: Uint8Array, seq?: number): void {
    this.counts.delivered++;
    let sr: SignedRevocation;
    try {
      const v = decode(bytes);
      if (typeof v === 'object' && v !== null && 'amend' in v) {
        this.#deliverAmendment(sink, bytes, seq);
        return;
      }
      sr = readSignedRevocation(v);
    } catch (e) {
      this.counts.malformed++;
      this.#log.warn({ why: (e as Error).message }, 'malformed revocation on the stream: ignored');
      // nothing to apply: seen once every message before it was taken
      this.#queue = this.#queue.then(() => this.#taken(seq));
      return;
    }
    this.#queue = this.#queue.then(async () => {
      try {
        const r = await sink.submit(sr);
        if (r.ok) {
          this.counts.taken++;
          this.#opts.onTaken?.(sr, r.value);
        } else {
          this.counts.refused++;
          this.#log.warn({ grant_id: sr.body.grant_id, code: r.error.code, why: r.error.why }, 'revocation from the stream refused');
        }
      } catch (e) {
        this.counts.refused++;
        this.#log.error({ grant_id: sr.body.grant_id, why: (e as Error).message }, 'revocation from the stream could not be recorded');
      }
      this.#taken(seq);
    });
  }

  #deliverAmendment(sink: RevocationSinkLike, bytes: Uint8Array, seq?: number): void {
    const amend = sink.amend?.bind(sink);
    let m: ReturnType<typeof decodeWireMessage>;
    try {
      m = decodeWireMessage(bytes);
      if (m.kind !== 'amend' || amend === undefined) throw new Error(amend === undefined ? 'this node takes no amendments' : `a ${m.kind} message`);
    } catch (e) {
      this.counts.malformed++;
      this.#log.warn({ why: (e as Error).message }, 'malformed amendment on the stream: ignored');
      this.#queue = this.#queue.then(() => this.#taken(seq));
      return;
    }
    const { grant, checkpoint, amendment } = m;
    this.#queue = this.#queue.then(async () => {
      try {
        const r = await amend(grant, checkpoint, amendment);
        if (r.ok) this.amendmentCounts.applied++;
        else {
          this.amendmentCounts.refused++;
          this.#log.warn({ checkpoint: amendment.body.checkpoint, code: r.error.code, why: r.error.why }, 'amendment from the stream refused');
        }
      } catch (e) {
        this.amendmentCounts.refused++;
        this.#log.error({ checkpoint: amendment.body.checkpoint, why: (e as Error).message }, 'amendment from the stream could not be recorded');
      }
      this.#taken(seq);
    });
  }

  /** Stops following. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#probeTimer !== undefined) clearInterval(this.#probeTimer);
    await this.#follow?.stop();
    await this.#queue;
  }
}
