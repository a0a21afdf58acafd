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
 */
import {
  type ContentId,
  decode,
  decodeWireMessage,
  readSignedRevocation,
  type Result,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  type SignedRevocation,
} from '../core/index.ts';
import type { RevocationBus, RevocationFollow } from './bus.ts';
import { type FreshnessView, RevocationFreshness } from './freshness.ts';
import { type Logger, silentLogger } from './log.ts';

/** The node's revocation sink (node/hooks.ts `RevocationSink`). */
export interface RevocationSinkLike {
  submit(sr: SignedRevocation): Promise<Result<{ grantId: ContentId; admitted: boolean }, { code: string; why: string }>>;
  /** Applies an amendment from the stream (§4.7; node/enforcer.ts `applyAmendment`). */
  amend?(
    grant: SignedGrant,
    checkpoint: SignedCheckpoint,
    amendment: SignedAmendment,
  ): Promise<Result<unknown, { code: string; why: string }>>;
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
   * `revocation_staleness_s` (seconds; default 0 = off): how long the node may go without
   * confirming it has seen the latest revocations (channel/freshness.ts) before {@link freshness}
   * says stale. When > 0 the feed probes the stream's last sequence every
   * `min(1 s, limit / 4)`, each probe timing out after that interval.
   */
  readonly stalenessS?: number;
  /** Unix milliseconds (default `Date.now`). */
  readonly clockMs?: () => number;
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
  /** Unix milliseconds when the sink last took a revocation from the stream (reach time: channel/reach-time.ts). */
  lastTakenAtMs: number | undefined;
  readonly #freshness: RevocationFreshness;
  readonly #clockMs: () => number;
  #probeTimer: NodeJS.Timeout | undefined;
  #probing = false;
  /** Probes sent and probes that failed (timeout, not connected). */
  readonly probeCounts = { sent: 0, failed: 0 };

  constructor(opts: RevocationStreamFeedOpts) {
    this.#opts = opts;
    this.#log = opts.log ?? silentLogger;
    this.#freshness = new RevocationFreshness(opts.stalenessS ?? 0);
    this.#clockMs = opts.clockMs ?? Date.now;
  }

  /** Whether this node can confirm it has seen the latest revocations (channel/freshness.ts), now. */
  freshness(): FreshnessView {
    return this.#freshness.view(this.#clockMs());
  }

  /** The probe interval (ms): `min(1 s, limit / 4)`, at least 50 ms. */
  get probeIntervalMs(): number {
    return Math.max(50, Math.min(1_000, (this.#freshness.limitS * 1000) / 4));
  }

  /**
   * Asks the stream leader for the revocation stream's last sequence once (sent-at time recorded
   * first) and reports the answer or the failure to the freshness tracker. Never rejects.
   */
  async probe(): Promise<void> {
    const last = this.#opts.bus.revocationStreamLastSeq?.bind(this.#opts.bus);
    if (last === undefined) {
      this.#freshness.failed('this bus cannot report the revocation stream position');
      return;
    }
    const sentAtMs = this.#clockMs();
    this.probeCounts.sent++;
    try {
      const seq = await last(this.probeIntervalMs);
      this.#freshness.answered(sentAtMs, seq);
    } catch (e) {
      this.probeCounts.failed++;
      this.#freshness.failed((e as Error).message);
    }
  }

  #startProbing(): void {
    if (this.#freshness.limitS <= 0 || this.#probeTimer !== undefined || this.#stopped) return;
    this.#probeTimer = setInterval(() => {
      if (this.#probing) return;
      this.#probing = true;
      void this.probe().finally(() => {
        this.#probing = false;
      });
    }, this.probeIntervalMs);
    this.#probeTimer.unref();
  }

  /** Starts following; resolves once caught up, or after `catchUpMs`. Never rejects. */
  async start(sink: RevocationSinkLike): Promise<void> {
    const catchUpMs = this.#opts.catchUpMs ?? 5_000;
    const started = (async () => {
      for (let attempt = 0; !this.#stopped; attempt++) {
        try {
          this.#follow = await this.#opts.bus.followRevocations((bytes, seq) => {
            this.#deliver(sink, bytes);
            if (seq !== undefined) this.#queueTaken(seq);
          });
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
    const inTime = await Promise.race([
      caughtUp.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), catchUpMs).unref()),
    ]);
    if (!inTime) this.#log.warn({ catch_up_ms: catchUpMs }, 'revocation stream backlog not read yet; serving with the revocations on disk');
    else this.#log.info({ revocations: this.counts.delivered }, 'revocation stream caught up');
    if (this.#freshness.limitS > 0) {
      // One confirmation before the node serves, when the stream answers; then every interval.
      if (inTime) await this.probe();
      this.#startProbing();
    }
  }

  /** Records that stream message `seq` went through the sink (in stream order, after the submission settled). */
  #queueTaken(seq: number): void {
    this.#queue = this.#queue.then(() => this.#freshness.taken(seq));
  }

  #deliver(sink: RevocationSinkLike, bytes: Uint8Array): void {
    this.counts.delivered++;
    let sr: SignedRevocation;
    try {
      const v = decode(bytes);
      if (typeof v === 'object' && v !== null && 'amend' in v) {
        this.#deliverAmendment(sink, bytes);
        return;
      }
      sr = readSignedRevocation(v);
    } catch (e) {
      this.counts.malformed++;
      this.#log.warn({ why: (e as Error).message }, 'malformed revocation on the stream: ignored');
      return;
    }
    this.#queue = this.#queue.then(async () => {
      try {
        const r = await sink.submit(sr);
        if (r.ok) {
          this.counts.taken++;
          this.lastTakenAtMs = this.#clockMs();
          this.#opts.onTaken?.(sr, r.value);
        } else {
          this.counts.refused++;
          this.#log.warn({ grant_id: sr.body.grant_id, code: r.error.code, why: r.error.why }, 'revocation from the stream refused');
        }
      } catch (e) {
        this.counts.refused++;
        this.#log.error({ grant_id: sr.body.grant_id, why: (e as Error).message }, 'revocation from the stream could not be recorded');
      }
    });
  }

  #deliverAmendment(sink: RevocationSinkLike, bytes: Uint8Array): void {
    const amend = sink.amend?.bind(sink);
    let m: ReturnType<typeof decodeWireMessage>;
    try {
      m = decodeWireMessage(bytes);
      if (m.kind !== 'amend' || amend === undefined)
        throw new Error(amend === undefined ? 'this node takes no amendments' : `a ${m.kind} message`);
    } catch (e) {
      this.counts.malformed++;
      this.#log.warn({ why: (e as Error).message }, 'malformed amendment on the stream: ignored');
      return;
    }
    const { grant, checkpoint, amendment } = m;
    this.#queue = this.#queue.then(async () => {
      try {
        const r = await amend(grant, checkpoint, amendment);
        if (r.ok) this.amendmentCounts.applied++;
        else {
          this.amendmentCounts.refused++;
          this.#log.warn(
            { checkpoint: amendment.body.checkpoint, code: r.error.code, why: r.error.why },
            'amendment from the stream refused',
          );
        }
      } catch (e) {
        this.amendmentCounts.refused++;
        this.#log.error(
          { checkpoint: amendment.body.checkpoint, why: (e as Error).message },
          'amendment from the stream could not be recorded',
        );
      }
    });
  }

  /** Stops following. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#probeTimer !== undefined) clearInterval(this.#probeTimer);
    this.#probeTimer = undefined;
    await this.#follow?.stop();
    await this.#queue;
  }
}
