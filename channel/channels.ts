/**
 * The budget channels one enforcement node serves (spec §4.5 profile): one {@link ChannelPoint}
 * per configured channel grant, their settlement timers, and the node's budget policy — the hook
 * the node consults synchronously after the pure decision allowed and before it debits
 * (node/hooks.ts `BudgetPolicy`, implemented here structurally so channel/ imports only core).
 *
 * For an allow whose chain contains channel grants, {@link Channels.admit} reserves the cost on
 * every such link under the channel rule (all or nothing) or returns a `budget-exceeded` deny
 * naming the link; {@link Channels.committed} marks the cost durable once the receipt is on disk,
 * which is what the next statement claims.
 */
import {
  type Actor,
  type ContentId,
  type Decision,
  type DecisionRequest,
  type Deny,
  DenyReasons,
  type Did,
  encode,
  type SignedGrant,
  signedGrantToCbor,
  type Uj,
} from '../core/index.ts';
import type { StatementBus } from './bus.ts';
import { type Logger, silentLogger } from './log.ts';
import { ChannelPoint, type SettleOutcome } from './settlement.ts';

/**
 * §4.7 steering as the channels see it (node/amendments.ts `AmendmentStore`, structurally): a
 * continuation of a channel grant spends from that grant's channel, under the steered grant's
 * budget, so steering never gives the cluster more than the channel had left.
 */
export interface ChannelSteering {
  /** The first steered grant of continuation `id`'s line and its budget_uj; undefined for other grants. */
  origin(id: ContentId): { readonly steeredId: ContentId; readonly budgetUj: Uj } | undefined;
  /** Every continuation whose line starts at `steeredId`. */
  continuationsOf(steeredId: ContentId): ContentId[];
}

/** One channel grant this node serves as a point. */
export interface ChannelSpec {
  /** The shared grant's id. */
  readonly grantId: ContentId;
  /** This point's unsettled window W_i (µJ). */
  readonly windowUj: Uj;
  /** The channel's points (did:key of each node's steward), when fixed. */
  readonly points?: readonly Did[];
}

/** Options of {@link Channels}. Times in milliseconds. */
export interface ChannelsOpts {
  /** This node's steward actor (signs its statements); when absent, call {@link Channels.attach} later. */
  readonly self?: Actor;
  readonly bus: StatementBus;
  readonly specs: readonly ChannelSpec[];
  /** This node's replayed spend on a grant at start (µJ), e.g. `ledger.spent(id)`. Default 0. */
  readonly spentOf?: (grantId: ContentId) => Uj;
  /** Settle every channel at least this often. Default 250 ms. */
  readonly settleIntervalMs?: number;
  readonly log?: Logger;
  readonly nowMs?: () => number;
}

/** A snapshot of one channel point for metrics and reports (µJ as decimal strings). */
export interface ChannelStats {
  readonly grant_id: ContentId;
  readonly window_uj: string;
  readonly spent_uj: string;
  readonly durable_uj: string;
  readonly peers_uj: string;
  readonly unsettled_uj: string;
  readonly settled: boolean;
  readonly settlements: number;
  readonly settle_failures: number;
  readonly refused: Readonly<Record<string, number>>;
  readonly last_settled_at_ms: number;
}

type AllowDecision = Extract<Decision, { verdict: 'allow' }>;

/** The channel points of one node, and its budget policy. See the module docs. */
export class Channels {
  readonly #points = new Map<ContentId, ChannelPoint>();
  readonly #specs: readonly ChannelSpec[];
  readonly #opts: ChannelsOpts;
  readonly #intervalMs: number;
  readonly #log: Logger;
  readonly #bus: StatementBus;
  /** Channel grants already stored on the stream (or being stored) by this node. */
  readonly #announced = new Set<ContentId>();
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: ChannelsOpts) {
    this.#intervalMs = opts.settleIntervalMs ?? 250;
    this.#log = opts.log ?? silentLogger;
    this.#bus = opts.bus;
    this.#specs = opts.specs;
    this.#opts = opts;
    if (opts.self) this.attach(opts.self, opts.spentOf ?? (() => 0n));
  }

  /** The configured channel grant ids. */
  get grantIds(): ContentId[] {
    return this.#specs.map((s) => s.grantId);
  }

  /** True once the points exist (the steward and the replayed ledger are known). */
  get attached(): boolean {
    return this.#points.size > 0 || this.#specs.length === 0;
  }

  /**
   * Creates the points once the node's steward and replayed spend are known (a node builds its
   * budget policy before it opens its log). Until then {@link admit} refuses every chain that
   * contains a channel grant (the restart rule).
   */
  attach(self: Actor, spentOf: (grantId: ContentId) => Uj, steering?: ChannelSteering): void {
    if (this.#points.size > 0) return;
    this.#steering = steering;
    // A point's own spend includes what its node debited from the channel grant's continuations.
    const spentWith = (id: ContentId): Uj => (steering?.continuationsOf(id) ?? []).reduce((sum, c) => sum + spentOf(c), spentOf(id));
    for (const s of this.#specs) {
      this.#points.set(
        s.grantId,
        new ChannelPoint({
          grantId: s.grantId,
          windowUj: s.windowUj,
          self,
          bus: this.#opts.bus,
          spentUj: spentWith(s.grantId),
          log: this.#log,
          ...(s.points ? { points: s.points } : {}),
          ...(this.#opts.nowMs ? { nowMs: this.#opts.nowMs } : {}),
        }),
      );
    }
  }

  #steering: ChannelSteering | undefined;

  /**
   * The point that pays for chain link `id` and the budget it is checked against: the link's own
   * channel, or, for the continuation of a channel grant, the steered grant's channel under the
   * steered grant's budget.
   */
  #payer(id: ContentId, link: SignedGrant | undefined): { p: ChannelPoint; budgetUj: Uj | undefined; own: boolean } | undefined {
    const p = this.#points.get(id);
    if (p) return { p, budgetUj: link?.grant.budget_uj, own: true };
    const o = this.#steering?.origin(id);
    const q = o === undefined ? undefined : this.#points.get(o.steeredId);
    return q && o ? { p: q, budgetUj: o.budgetUj, own: false } : undefined;
  }

  /** The point serving `grantId`, if it is a channel grant here. */
  point(grantId: ContentId): ChannelPoint | undefined {
    return this.#points.get(grantId);
  }

  /** Every channel point. */
  points(): ChannelPoint[] {
    return [...this.#points.values()];
  }

  /**
   * The budget policy (node `BudgetPolicy.admit`): for every link of the allowed chain that is a
   * channel grant, reserve `req.cost.uj` under the channel rule against that link's budget.
   * All or nothing; returns a `budget-exceeded` deny naming the first link that cannot pay
   * (`why` says whether the budget, the unsettled window, or a missing settlement refused it).
   */
  admit(req: DecisionRequest, decision: AllowDecision): Deny | undefined {
    const reserved: ChannelPoint[] = [];
    for (const [i, id] of decision.chainIds.entries()) {
      if (this.#points.size === 0 && this.#specs.some((s) => s.grantId === id)) {
        return {
          reason: DenyReasons.BUDGET_EXCEEDED,
          link: i,
          why: 'budget channel (not-settled): this point has not started its channels yet',
          requestedUj: req.cost.uj,
          remainingUj: 0n,
        };
      }
      const link = req.chain[i];
      const payer = this.#payer(id, link);
      if (!payer || !link || payer.budgetUj === undefined) continue;
      const p = payer.p;
      const r = p.tryReserve(req.cost.uj, payer.budgetUj);
      if (!r.ok) {
        for (const q of reserved) q.release(req.cost.uj);
        return {
          reason: DenyReasons.BUDGET_EXCEEDED,
          link: i,
          why: `budget channel (${r.error.code}): ${r.error.why}`,
          requestedUj: r.error.requestedUj,
          remainingUj: r.error.remainingUj,
        };
      }
      reserved.push(p);
      if (payer.own && !this.#announced.has(id)) this.#announce(id, link);
    }
    return undefined;
  }

  /** Stores the channel grant on the stream once, for auditors (see `StatementBus.publishGrant`). */
  #announce(id: ContentId, link: SignedGrant): void {
    this.#announced.add(id);
    this.#bus.publishGrant(id, encode(signedGrantToCbor(link))).catch((e: unknown) => {
      this.#announced.delete(id);
      this.#log.warn({ grant: id, why: (e as Error).message }, 'could not store the channel grant; will retry');
    });
  }

  /** The budget policy's commit (node `BudgetPolicy.committed`): the allow's receipt is durable. */
  committed(req: DecisionRequest, decision: AllowDecision): void {
    for (const [i, id] of decision.chainIds.entries()) this.#payer(id, req.chain[i])?.p.commit(req.cost.uj);
  }

  /** Starts the settlement timer and settles every channel once (the restart rule). */
  start(): void {
    if (this.#timer) return;
    void this.settleAll();
    this.#timer = setInterval(() => {
      for (const p of this.#points.values()) if (!p.settling) void p.settle();
    }, this.#intervalMs);
    this.#timer.unref();
  }

  /** Settles every channel now (joining settlements already running). */
  async settleAll(): Promise<SettleOutcome[]> {
    return await Promise.all([...this.#points.values()].map((p) => p.settle()));
  }

  /**
   * Waits until every channel has settled once since start, settling as needed, up to
   * `timeoutMs`. Resolves true when all have; false on timeout (the node still serves; channel
   * grants are refused until they settle).
   */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if ([...this.#points.values()].every((p) => p.settled)) return true;
      await Promise.race([this.settleAll(), new Promise((r) => setTimeout(r, Math.max(1, Math.min(200, deadline - Date.now()))))]);
    }
    return [...this.#points.values()].every((p) => p.settled);
  }

  /** Stops the timer, then runs one last settlement so the stream holds this node's final spend. */
  async stop(finalSettle = true): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (finalSettle) await this.settleAll();
  }

  /** A snapshot of every point. */
  stats(): ChannelStats[] {
    return [...this.#points.values()].map((p) => ({
      grant_id: p.grantId,
      window_uj: String(p.windowUj),
      spent_uj: String(p.spentUj),
      durable_uj: String(p.durableUj),
      peers_uj: String(p.peersUj),
      unsettled_uj: String(p.unsettledUj),
      settled: p.settled,
      settlements: p.counts.settlements,
      settle_failures: p.counts.settleFailures,
      refused: { ...p.counts.refused },
      last_settled_at_ms: p.lastSettledAtMs,
    }));
  }
}
