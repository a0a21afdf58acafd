/**
 * Settlement (spec §4.5 profile, C17; docs/design.md "Budget channels: the bound we prove"): one
 * enforcement point's side of a budget channel on one grant.
 *
 * A settlement is, in this order:
 *  1. (first settlement since start only) read the stream, to learn this point's own latest
 *     statement: its next `seq` must be greater, and its spend may not regress below it;
 *  2. publish this point's signed statement `{grant_id, point, spent_uj, seq}` and wait for the
 *     JetStream ack. `spent_uj` is the spend whose receipts are durable, so the statements never
 *     claim a debit the receipt logs cannot show;
 *  3. read the latest statement of every point from the stream LEADER, verify each (signature,
 *     the subject's point hash, seq strictly increasing, spend never decreasing — core's
 *     {@link ChannelLedger}), and only if every one is admitted (or unchanged) adopt the new view:
 *     peers' settled spend := Σ of their latest statements, my baseline := the value published in 2.
 *
 * A refused statement (forged, stale, regressing, malformed, under another point's subject) is
 * counted and logged and never applied, and the settlement does not complete: the point does not
 * know that peer's spend, so it keeps its previous view and its window keeps draining (fail
 * closed). The same holds when NATS cannot be reached.
 *
 * The spending rule ({@link channelAllows}): allow `cost` only if (a) my spend + cost + peers'
 * settled spend ≤ budget and (b) my spend + cost − my baseline ≤ W_i. Nothing is allowed before
 * the first settlement completes: a point that restarts settles before it allows anything,
 * because its view of the peers is not trusted from memory. A point that cannot settle stops
 * after W_i. Settlements run on a timer and whenever half of the window is used.
 *
 * Amounts are µJ (bigint); times are milliseconds.
 */
import {
  type Actor,
  channelAllows,
  ChannelLedger,
  type ChannelRefusal,
  type ContentId,
  decode,
  type Did,
  encode,
  err,
  ok,
  type OverdraftProof,
  readSignedStatement,
  type Result,
  type SignedStatement,
  signedStatementToCbor,
  signStatement,
  type Statement,
  type StatementRefusalCode,
  StatementRefusals,
  type Uj,
} from '../core/index.ts';
import type { StatementBus, StoredStatement } from './bus.ts';
import { type Logger, silentLogger } from './log.ts';
import { pointHash } from './names.ts';

/** Why a statement read back from the stream was not applied. Core's codes plus two transport ones. */
export type ReadRefusalCode = Exclude<StatementRefusalCode, 'duplicate'> | 'malformed' | 'misplaced';

/** One refused statement: what, from which subject, why. */
export interface ReadRefusal {
  readonly code: ReadRefusalCode;
  readonly pointHash: string;
  readonly why: string;
}

/** The outcome of one settlement attempt. */
export type SettleOutcome =
  | {
      readonly ok: true;
      /** The statement this point published. */
      readonly statement: Statement;
      /** Σ of the peers' latest statements (µJ). */
      readonly peersUj: Uj;
      /** Milliseconds from start to the view being adopted. */
      readonly latencyMs: number;
    }
  | { readonly ok: false; readonly why: string; readonly refused: readonly ReadRefusal[]; readonly latencyMs: number };

/** Refusal of a spend at this point: core's rule, or `not-settled` (no settlement since start). */
export type SpendRefusal =
  | ChannelRefusal
  | { readonly code: 'not-settled'; readonly why: string; readonly requestedUj: Uj; readonly remainingUj: Uj };

/** Options of a {@link ChannelPoint}. */
export interface ChannelPointOpts {
  /** The channel grant. */
  readonly grantId: ContentId;
  /** This point's unsettled window W_i (µJ). */
  readonly windowUj: Uj;
  /** This point's signing actor (the steward key); its did is the statement's `point`. */
  readonly self: Actor;
  readonly bus: StatementBus;
  /** This point's cumulative spend on the grant when it starts, replayed from its receipts (µJ). */
  readonly spentUj?: Uj;
  /** The channel's points, when fixed; statements from any other point are refused. */
  readonly points?: Iterable<Did>;
  readonly log?: Logger;
  /** Wall clock in ms (seq floor and latencies). Default `Date.now`. */
  readonly nowMs?: () => number;
}

/** Latency samples kept per point (a ring). */
const SAMPLES = 4096;

/** One point of a budget channel on one grant. See the module docs. */
export class ChannelPoint {
  readonly grantId: ContentId;
  readonly windowUj: Uj;
  readonly self: Actor;
  readonly #bus: StatementBus;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #ledger: ChannelLedger;
  readonly #myHash: string;
  /** Everything reserved at this point: durable + in flight (µJ). */
  #spent: Uj;
  /** Spend whose receipts are durable (µJ): what statements claim. */
  #durable: Uj;
  /** The spend value published by the last completed settlement (µJ): the window's baseline. */
  #baseline: Uj = 0n;
  /** Peers' settled spend at the last completed settlement (µJ). */
  #peers: Uj = 0n;
  #settled = false;
  #seq = 0;
  #ownSeen = false;
  #inflight: Promise<SettleOutcome> | undefined;
  #lastSettledAtMs = 0;
  readonly #latencies: number[] = [];
  /** Counters for metrics, logs and the chaos report. */
  readonly counts = {
    settlements: 0,
    settleFailures: 0,
    refused: { forged: 0, stale: 0, regressing: 0, malformed: 0, misplaced: 0, 'wrong-grant': 0, 'unknown-point': 0 } as Record<
      ReadRefusalCode,
      number
    >,
    allowed: 0,
    refusedSpends: 0,
  };

  constructor(opts: ChannelPointOpts) {
    this.grantId = opts.grantId;
    this.windowUj = opts.windowUj;
    this.self = opts.self;
    this.#bus = opts.bus;
    this.#log = opts.log ?? silentLogger;
    this.#now = opts.nowMs ?? Date.now;
    this.#ledger = new ChannelLedger(opts.grantId, opts.points === undefined ? {} : { points: opts.points });
    this.#myHash = pointHash(opts.self.did);
    this.#spent = opts.spentUj ?? 0n;
    this.#durable = this.#spent;
  }

  /** Cumulative µJ reserved at this point (durable + in flight). */
  get spentUj(): Uj {
    return this.#spent;
  }

  /** Cumulative µJ whose receipts are durable. */
  get durableUj(): Uj {
    return this.#durable;
  }

  /** The window's baseline: the spend published by the last completed settlement (µJ). */
  get baselineUj(): Uj {
    return this.#baseline;
  }

  /** Peers' settled spend at the last completed settlement (µJ). */
  get peersUj(): Uj {
    return this.#peers;
  }

  /** µJ spent since the last completed settlement (what W_i bounds). */
  get unsettledUj(): Uj {
    return this.#spent - this.#baseline;
  }

  /** True once a settlement has completed since this point started. */
  get settled(): boolean {
    return this.#settled;
  }

  /** Wall-clock ms of the last completed settlement (0 = never). */
  get lastSettledAtMs(): number {
    return this.#lastSettledAtMs;
  }

  /** Settlement latencies (ms) of recent completed settlements, oldest first. */
  latencies(): readonly number[] {
    return this.#latencies;
  }

  /** True while a settlement is running. */
  get settling(): boolean {
    return this.#inflight !== undefined;
  }

  /**
   * Checks the spending rule for `costUj` against a grant budget of `budgetUj` and, if it holds,
   * reserves the cost at once (so concurrent requests cannot both pass). Synchronous; never waits.
   * Refusals: `not-settled`, `budget-exceeded` (rule a), `window-exhausted` (rule b; also starts a
   * settlement in the background).
   */
  tryReserve(costUj: Uj, budgetUj: Uj): Result<void, SpendRefusal> {
    if (!this.#settled) {
      this.counts.refusedSpends++;
      return err({ code: 'not-settled', why: 'this point has not settled since it started', requestedUj: costUj, remainingUj: 0n });
    }
    const r = channelAllows({
      mySpent: this.#spent,
      mySpentAtLastSettle: this.#baseline,
      peersSettled: this.#peers,
      budget: budgetUj,
      windowUj: this.windowUj,
      cost: costUj,
    });
    if (!r.ok) {
      this.counts.refusedSpends++;
      if (r.error.code === 'window-exhausted') this.#kick();
      return r;
    }
    this.#spent += costUj;
    this.counts.allowed++;
    return ok(undefined);
  }

  /**
   * {@link tryReserve}, but when the refusal is `not-settled` or `window-exhausted` it waits for a
   * settlement (up to `waitMs`) and tries again. Never waits on `budget-exceeded`: peers' settled
   * spend only grows, so settling cannot make room.
   */
  async reserve(costUj: Uj, budgetUj: Uj, waitMs: number): Promise<Result<void, SpendRefusal>> {
    const deadline = this.#now() + waitMs;
    for (;;) {
      const r = this.tryReserve(costUj, budgetUj);
      if (r.ok || r.error.code === 'budget-exceeded') return r;
      const left = deadline - this.#now();
      if (left <= 0) return r;
      const before = this.#lastSettledAtMs;
      const outcome = await raceTimeout(this.settle(), left);
      if (outcome === undefined || !outcome.ok || this.#lastSettledAtMs === before) {
        return this.tryReserve(costUj, budgetUj);
      }
    }
  }

  /**
   * Marks `costUj` of reserved spend as durable (its receipt is on disk). Once half of the window
   * is used, starts a settlement in the background (so the statement carries this spend).
   */
  commit(costUj: Uj): void {
    this.#durable += costUj;
    if (this.#durable > this.#spent) this.#spent = this.#durable;
    if (2n * (this.#spent - this.#baseline) >= this.windowUj) this.#kick();
  }

  /** Returns a reservation that did not become an allow (no receipt was sealed for it). */
  release(costUj: Uj): void {
    this.#spent -= costUj;
    if (this.#spent < this.#durable) this.#spent = this.#durable;
  }

  /** Records spend replayed or learned later (µJ, durable). Used by tests and recovery. */
  addDurable(costUj: Uj): void {
    this.#spent += costUj;
    this.#durable += costUj;
  }

  #kick(): void {
    if (this.#inflight === undefined) void this.settle();
  }

  /** Runs a settlement, or joins the one already running. Never rejects. */
  settle(): Promise<SettleOutcome> {
    if (this.#inflight) return this.#inflight;
    const p = this.#settleOnce()
      .catch((e: unknown): SettleOutcome => ({ ok: false, why: (e as Error).message, refused: [], latencyMs: 0 }))
      .finally(() => {
        this.#inflight = undefined;
      });
    this.#inflight = p;
    return p;
  }

  /**
   * A settlement that starts after this call: waits for one already running (which may have
   * published an older spend), then runs a new one. Never rejects.
   */
  async settleNow(): Promise<SettleOutcome> {
    if (this.#inflight) await this.#inflight;
    return await this.settle();
  }

  async #settleOnce(): Promise<SettleOutcome> {
    const t0 = this.#now();
    const fail = (why: string, refused: readonly ReadRefusal[] = []): SettleOutcome => {
      this.counts.settleFailures++;
      this.#log.warn({ grant: this.grantId, why, refused, unsettled_uj: String(this.unsettledUj) }, 'settlement failed');
      return { ok: false, why, refused, latencyMs: this.#now() - t0 };
    };
    try {
      if (!this.#ownSeen) {
        const first = await this.#bus.readLatest(this.grantId);
        const refused = this.#admitAll(first);
        const own = this.#ledger.latest(this.self.did);
        if (own) {
          this.#seq = Math.max(this.#seq, own.body.seq);
          if (own.body.spent_uj > this.#durable) {
            this.#log.warn(
              { grant: this.grantId, stream_uj: String(own.body.spent_uj), receipts_uj: String(this.#durable) },
              'own statement claims more than the receipts show; keeping the higher figure',
            );
            this.#spent += own.body.spent_uj - this.#durable;
            this.#durable = own.body.spent_uj;
          }
        }
        if (refused.some((r) => r.pointHash === this.#myHash)) return fail('own latest statement refused', refused);
        this.#ownSeen = true;
      }
      const statement: Statement = {
        grant_id: this.grantId,
        point: this.self.did,
        spent_uj: this.#durable,
        seq: Math.max(this.#seq + 1, this.#now()),
      };
      const signed = signStatement(statement, this.self);
      this.#seq = statement.seq;
      await this.#bus.publishStatement(
        this.grantId,
        this.self.did,
        encode(signedStatementToCbor(signed)),
        `${this.#myHash}.${statement.seq}`,
      );
      const mine = this.#ledger.admit(signed);
      if (!mine.ok && mine.error.code !== StatementRefusals.DUPLICATE) return fail(`own statement refused: ${mine.error.why}`);
      const stored = await this.#bus.readLatest(this.grantId);
      const refused = this.#admitAll(stored);
      if (refused.length > 0) return fail(`${refused.length} statement(s) refused`, refused);
      const own = this.#ledger.latest(this.self.did);
      if (own?.body.seq !== statement.seq) return fail('own statement not the latest on the stream');
      this.#baseline = statement.spent_uj;
      this.#peers = this.#ledger.peersSettled(this.self.did);
      this.#settled = true;
      this.#lastSettledAtMs = this.#now();
      const latencyMs = this.#lastSettledAtMs - t0;
      if (this.#latencies.length >= SAMPLES) this.#latencies.shift();
      this.#latencies.push(latencyMs);
      this.counts.settlements++;
      return { ok: true, statement, peersUj: this.#peers, latencyMs };
    } catch (e) {
      return fail((e as Error).message);
    }
  }

  /** Verifies and admits every stored statement; returns the refusals (duplicates are not refusals). */
  #admitAll(stored: readonly StoredStatement[]): ReadRefusal[] {
    const refused = admitStored(this.#ledger, stored);
    for (const r of refused) {
      this.counts.refused[r.code]++;
      this.#log.warn({ grant: this.grantId, code: r.code, point_hash: r.pointHash, why: r.why }, 'statement refused');
    }
    return refused;
  }

  /** The latest admitted statement of every point (mine included). */
  statements(): SignedStatement[] {
    return this.#ledger.statements();
  }

  /** The overdraft proof of the admitted statements against `budgetUj` (core {@link ChannelLedger.overdraftProof}). */
  proof(budgetUj: Uj): OverdraftProof {
    return this.#ledger.overdraftProof(budgetUj);
  }
}

async function raceTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Verifies and admits stored statements into `ledger` (§4.5 profile): malformed, misplaced
 * (stored under another point's subject), forged, stale and regressing ones are refused and
 * returned, never applied; a duplicate of an admitted statement is not a refusal.
 */
export function admitStored(ledger: ChannelLedger, stored: readonly StoredStatement[]): ReadRefusal[] {
  const refused: ReadRefusal[] = [];
  for (const s of stored) {
    let ss: SignedStatement;
    try {
      ss = readSignedStatement(decode(s.bytes));
    } catch (e) {
      refused.push({ code: 'malformed', pointHash: s.pointHash, why: (e as Error).message });
      continue;
    }
    if (pointHash(ss.body.point) !== s.pointHash) {
      refused.push({ code: 'misplaced', pointHash: s.pointHash, why: `statement by ${ss.body.point} under another point's subject` });
      continue;
    }
    const r = ledger.admit(ss);
    if (!r.ok && r.error.code !== StatementRefusals.DUPLICATE) {
      refused.push({ code: r.error.code, pointHash: s.pointHash, why: r.error.why });
    }
  }
  return refused;
}
