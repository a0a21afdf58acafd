/**
 * The overdraft bound across regions, as a randomized model (docs/design.md "Budget channels: the bound we
 * prove"; spec §4.5 profile): 2–4 regions, 1–3 points each, a per-link one-way delay with jitter,
 * regions cut off and healed, points crashing and restarting, every point spending at its own rate
 * and settling on a timer and whenever half of its window is used. Virtual time: every bus call
 * waits its link's delay out and back on a simulated clock, so a schedule of seconds runs in
 * milliseconds and is a pure function of its fast-check seed.
 *
 * The thing under test is the product's settlement engine ({@link ChannelPoint}: core's
 * `channelAllows` and `ChannelLedger`), not a copy; only the transport is modelled.
 *
 * - Leader mode (the product's rule): the statement stream lives in region 0; every point publishes
 *   to and reads from its leader across its region's link. Total spend never passes
 *   budget + Σ_{j≠k} W_j (core `overdraftBound`), some schedules reach it exactly, and after healing
 *   the signed statements prove exactly what was spent.
 * - Follower mode (the mistake the check must catch): every region publishes to and reads from its
 *   own copy of the stream, the copies sourcing each other across the same links (a point sees its
 *   own region at once, the others as late as the link makes them). The same engine then passes the
 *   bound, and the property is asserted to FAIL.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Actor, actorFromSeed, type ContentId, contentId, type Did, overdraftBound, seededRng } from '../../core/index.ts';
import {
  auditChannel,
  type BusEvent,
  type ChannelBus,
  ChannelPoint,
  MemoryBus,
  MemoryStore,
  pointHash,
  type RevocationFollow,
  type StoredStatement,
} from '../../channel/index.ts';

const grant = contentId({ jcp_test_grant: 'regions-model' });
const actors: Actor[] = Array.from({ length: 12 }, (_, i) => actorFromSeed(seededRng(`regions-model/point/${i}`)(32)));

/** A discrete-event clock: `sleep` resolves when the run loop reaches its time (ms). */
class SimClock {
  now = 0;
  #seq = 0;
  readonly #queue: { t: number; n: number; fire: () => void }[] = [];

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.at(this.now + Math.max(0, ms), resolve));
  }

  at(t: number, fire: () => void): void {
    this.#queue.push({ t, n: this.#seq++, fire });
  }

  /** Runs events in time order until none is left before `untilMs`; microtasks run between events. */
  async run(untilMs: number): Promise<void> {
    for (;;) {
      let best = -1;
      for (let i = 0; i < this.#queue.length; i++) {
        const e = this.#queue[i]!;
        const b = this.#queue[best];
        if (!b || e.t < b.t || (e.t === b.t && e.n < b.n)) best = i;
      }
      const next = this.#queue[best];
      if (!next || next.t > untilMs) return;
      this.#queue.splice(best, 1);
      this.now = next.t;
      next.fire();
      await new Promise<void>((r) => setImmediate(r));
    }
  }
}

/** The links between regions: one-way delay (ms), jitter (ms) and whether the link is cut. */
interface Net {
  readonly clock: SimClock;
  readonly delay: readonly (readonly number[])[];
  readonly jitter: number;
  readonly cut: Set<string>;
  readonly rand: () => number;
}

const linkKey = (a: number, b: number) => (a < b ? `${a}-${b}` : `${b}-${a}`);
const isCut = (net: Net, a: number, b: number) => a !== b && net.cut.has(linkKey(a, b));
const oneWay = (net: Net, a: number, b: number) => (a === b ? 0.2 : net.delay[a]![b]! + net.rand() * net.jitter);

/**
 * A point's bus: each call crosses from the point's region to the region holding the copy it
 * uses, runs there, and its answer crosses back. A call that finds the link cut on the way out
 * or back fails (the answer of a call that ran is lost, as an ack can be).
 */
class LinkedBus implements ChannelBus {
  dead = false;
  readonly net: Net;
  readonly from: number;
  readonly to: number;
  readonly inner: MemoryBus;
  readonly onPublished: (bytes: Uint8Array, point: Did) => void;
  constructor(net: Net, from: number, to: number, inner: MemoryBus, onPublished: (bytes: Uint8Array, point: Did) => void = () => {}) {
    this.net = net;
    this.from = from;
    this.to = to;
    this.inner = inner;
    this.onPublished = onPublished;
  }

  async #cross<T>(what: string, op: () => Promise<T>): Promise<T> {
    await this.net.clock.sleep(oneWay(this.net, this.from, this.to));
    if (this.dead || isCut(this.net, this.from, this.to)) throw new Error(`${what}: link cut`);
    const v = await op();
    await this.net.clock.sleep(oneWay(this.net, this.to, this.from));
    if (this.dead || isCut(this.net, this.from, this.to)) throw new Error(`${what}: answer lost`);
    return v;
  }

  publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void> {
    return this.#cross('publish', async () => {
      await this.inner.publishStatement(grantId, point, bytes, msgId);
      this.onPublished(bytes, point);
    });
  }
  readLatest(grantId: ContentId): Promise<StoredStatement[]> {
    return this.#cross('read', () => this.inner.readLatest(grantId));
  }
  publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void> {
    return this.#cross('grant', () => this.inner.publishGrant(grantId, bytes));
  }
  readGrant(grantId: ContentId): Promise<Uint8Array | undefined> {
    return this.#cross('grant', () => this.inner.readGrant(grantId));
  }
  publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void> {
    return this.#cross('close', () => this.inner.publishClose(grantId, point, bytes));
  }
  readCloses(grantId: ContentId): Promise<Uint8Array[]> {
    return this.#cross('close', () => this.inner.readCloses(grantId));
  }
  publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void> {
    return this.#cross('revocation', () => this.inner.publishRevocation(grantId, bytes, msgId));
  }
  followRevocations(onRevocation: (bytes: Uint8Array) => void): Promise<RevocationFollow> {
    return this.inner.followRevocations(onRevocation);
  }
  onEvent(listener: (e: BusEvent) => void): void {
    this.inner.onEvent(listener);
  }
  async close(): Promise<void> {}
}

/**
 * Follower mode's replication: a statement stored in region `from`'s copy reaches every other
 * region's copy after the link's delay, in order per link, held back while the link is cut.
 */
function replicate(net: Net, stores: readonly MemoryStore[], from: number, bytes: Uint8Array, point: Did): void {
  for (let to = 0; to < stores.length; to++) {
    if (to === from) continue;
    const deliver = () => {
      if (isCut(net, from, to)) return void net.clock.at(net.clock.now + 10, deliver);
      new MemoryBus(stores[to]!).inject(grant, pointHash(point), bytes);
    };
    net.clock.at(net.clock.now + net.delay[from]![to]!, deliver);
  }
}

/** A schedule: the regions' links, the points, the faults. Times in ms, amounts in µJ. */
interface Schedule {
  readonly regions: number;
  readonly delays: readonly number[];
  readonly jitter: number;
  readonly cost: bigint;
  readonly budgetCalls: number;
  readonly points: readonly { readonly region: number; readonly windowCalls: number; readonly gapMs: number }[];
  readonly cuts: readonly { readonly a: number; readonly b: number; readonly atMs: number; readonly forMs: number }[];
  readonly crashes: readonly { readonly point: number; readonly atMs: number }[];
  readonly settleEveryMs: number;
  readonly seed: number;
}

const RUN_MS = 1_500;

const schedule: fc.Arbitrary<Schedule> = fc
  .record({
    regions: fc.integer({ min: 2, max: 4 }),
    perRegion: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 4 }),
    delays: fc.array(fc.integer({ min: 2, max: 60 }), { minLength: 6, maxLength: 6 }),
    jitter: fc.integer({ min: 0, max: 10 }),
    cost: fc.constantFrom(1n, 10n, 7n),
    budgetCalls: fc.integer({ min: 5, max: 120 }),
    sameWindow: fc.boolean(),
    windows: fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 12, maxLength: 12 }),
    gaps: fc.array(fc.integer({ min: 2, max: 25 }), { minLength: 12, maxLength: 12 }),
    cuts: fc.array(
      fc.record({ a: fc.nat(3), b: fc.nat(3), atMs: fc.integer({ min: 0, max: RUN_MS }), forMs: fc.integer({ min: 20, max: 900 }) }),
      { maxLength: 5 },
    ),
    crashes: fc.array(fc.record({ point: fc.nat(11), atMs: fc.integer({ min: 0, max: RUN_MS }) }), { maxLength: 3 }),
    settleEveryMs: fc.integer({ min: 20, max: 300 }),
    seed: fc.integer(),
  })
  .map((r): Schedule => {
    const points: { region: number; windowCalls: number; gapMs: number }[] = [];
    for (let region = 0; region < r.regions; region++) {
      for (let k = 0; k < r.perRegion[region]!; k++) {
        const i = points.length;
        points.push({ region, windowCalls: r.sameWindow ? r.windows[0]! : r.windows[i]!, gapMs: r.gaps[i]! });
      }
    }
    return {
      regions: r.regions,
      delays: r.delays,
      jitter: r.jitter,
      cost: r.cost,
      budgetCalls: r.budgetCalls,
      points,
      cuts: r.cuts.map((c) => ({ ...c, a: c.a % r.regions, b: c.b % r.regions })).filter((c) => c.a !== c.b),
      crashes: r.crashes.filter((c) => c.point < points.length),
      settleEveryMs: r.settleEveryMs,
      seed: r.seed,
    };
  });

interface Outcome {
  /** Σ of the spends the points allowed and committed (µJ). */
  readonly spent: bigint;
  readonly budget: bigint;
  readonly bound: bigint;
  /** Σ of the signed statements after healing and settling (leader mode), undefined if any was refused. */
  readonly proven: bigint | undefined;
}

/** A small deterministic PRNG (mulberry32) for jitter: the schedule's seed drives it. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Runs one schedule on the product's {@link ChannelPoint}s; `mode` picks where points read. */
async function simulate(s: Schedule, mode: 'leader' | 'follower'): Promise<Outcome> {
  const clock = new SimClock();
  const delay = Array.from({ length: s.regions }, (_, a) =>
    Array.from({ length: s.regions }, (_, b) => (a === b ? 0 : s.delays[(a + b) % s.delays.length]!)),
  );
  const net: Net = { clock, delay, jitter: s.jitter, cut: new Set(), rand: prng(s.seed) };
  const stores = mode === 'leader' ? [new MemoryStore()] : Array.from({ length: s.regions }, () => new MemoryStore());
  const budget = s.cost * BigInt(s.budgetCalls);
  const windows = s.points.map((p) => s.cost * BigInt(p.windowCalls));
  const busFor = (region: number) => {
    if (mode === 'leader') return new LinkedBus(net, region, 0, new MemoryBus(stores[0]!));
    return new LinkedBus(net, region, region, new MemoryBus(stores[region]!), (bytes, point) =>
      replicate(net, stores, region, bytes, point),
    );
  };
  const st = s.points.map((p, i) => {
    const bus = busFor(p.region);
    return {
      bus,
      real: 0n,
      point: new ChannelPoint({ grantId: grant, windowUj: windows[i]!, self: actors[i]!, bus, nowMs: () => Math.floor(clock.now) }),
    };
  });
  let stopped = false;
  for (const c of s.cuts) {
    clock.at(c.atMs, () => net.cut.add(linkKey(c.a, c.b)));
    clock.at(c.atMs + c.forMs, () => net.cut.delete(linkKey(c.a, c.b)));
  }
  for (const c of s.crashes) {
    clock.at(c.atMs, () => {
      // The old process is gone with its connection; the new one replays its receipts and must settle first.
      const me = st[c.point]!;
      me.bus.dead = true;
      me.bus = busFor(s.points[c.point]!.region);
      me.point = new ChannelPoint({
        grantId: grant,
        windowUj: windows[c.point]!,
        self: actors[c.point]!,
        bus: me.bus,
        spentUj: me.real,
        nowMs: () => Math.floor(clock.now),
      });
    });
  }
  s.points.forEach((p, i) => {
    const spend = () => {
      if (stopped) return;
      const me = st[i]!;
      const r = me.point.tryReserve(s.cost, budget);
      if (r.ok) {
        // The receipt is durable a moment later; only then does the statement carry the spend.
        const point = me.point;
        me.real += s.cost;
        clock.at(clock.now + 0.5, () => point.commit(s.cost));
      } else if (r.error.code === 'not-settled') void me.point.settle();
      clock.at(clock.now + p.gapMs, spend);
    };
    const tick = () => {
      if (stopped) return;
      void st[i]!.point.settle();
      clock.at(clock.now + s.settleEveryMs, tick);
    };
    clock.at(i * 0.1, tick);
    clock.at(1 + i * 0.1, spend);
  });
  await clock.run(RUN_MS);
  stopped = true;
  const spent = st.reduce((a, x) => a + x.real, 0n);
  const bound = overdraftBound(windows);
  let proven: bigint | undefined;
  if (mode === 'leader') {
    net.cut.clear();
    const settled = Promise.all(st.map((x) => x.point.settleNow()));
    await clock.run(Number.POSITIVE_INFINITY);
    await settled;
    const audit = await auditChannel(new MemoryBus(stores[0]!), grant, budget);
    proven = audit.refused.length === 0 && audit.proofVerifies === true ? audit.totalUj : undefined;
  }
  return { spent, budget, bound, proven };
}

describe('channel bound across regions - leader reads (the product rule)', () => {
  it('total spend ≤ budget + Σ_{j≠k} W_j in every schedule, some reach it exactly, and the statements prove the spend', async () => {
    let reached = 0;
    let overBudget = 0;
    await fc.assert(
      fc.asyncProperty(schedule, async (s) => {
        const o = await simulate(s, 'leader');
        expect(o.spent).toBeLessThanOrEqual(o.budget + o.bound);
        expect(o.proven).toBe(o.spent);
        if (o.spent === o.budget + o.bound && o.bound > 0n) reached++;
        if (o.spent > o.budget) overBudget++;
      }),
      { numRuns: 100, seed: 15_3 },
    );
    // The bound is tight: some schedules spend exactly budget + Σ_{j≠k} W_j.
    expect(reached).toBeGreaterThan(0);
    expect(overBudget).toBeGreaterThan(reached);
  }, 120_000);

  it('a region cut off after its points settled reaches the bound exactly, never past it', async () => {
    // Region 0 has one point, regions 1 and 2 one each; everyone settles at 0, then regions 1 and
    // 2 are cut off: each spends its whole window unseen while region 0 spends the whole budget.
    const s: Schedule = {
      regions: 3,
      delays: [40, 40, 40, 40, 40, 40],
      jitter: 0,
      cost: 10n,
      budgetCalls: 30,
      points: [0, 1, 2].map((region) => ({ region, windowCalls: 5, gapMs: 5 })),
      cuts: [
        { a: 0, b: 1, atMs: 260, forMs: 1_200 },
        { a: 0, b: 2, atMs: 260, forMs: 1_200 },
      ],
      crashes: [],
      settleEveryMs: 400,
      seed: 1,
    };
    const o = await simulate({ ...s, points: s.points.map((p) => ({ ...p, gapMs: p.region === 0 ? 30 : 5 })) }, 'leader');
    expect(o.bound).toBe(100n);
    expect(o.spent).toBe(o.budget + o.bound);
    expect(o.proven).toBe(o.spent);
  }, 30_000);
});

describe('channel bound across regions - follower reads (a regional copy of the stream)', () => {
  it('the same property FAILS when points settle from their lagging regional copy', async () => {
    const r = await fc.check(
      fc.asyncProperty(schedule, async (s) => {
        const o = await simulate(s, 'follower');
        return o.spent <= o.budget + o.bound;
      }),
      { numRuns: 150, seed: 15_3 },
    );
    expect(r.failed).toBe(true);
  }, 120_000);
});
