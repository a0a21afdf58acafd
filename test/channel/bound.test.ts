/**
 * The overdraft bound (docs/design.md "Budget channels: the bound we prove") as a property: random
 * schedules of 2–5 points spending, settling, crashing and restarting, being cut off and healed,
 * with every bus call interleaved by fast-check's scheduler. With leader reads the total spend
 * never passes budget + Σ_{j≠k} W_j, and after healing the signed statements prove exactly what
 * was spent. With follower reads the same engine overspends in a simple alternating schedule.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Actor, actorFromSeed, contentId, overdraftBound, seededRng } from '../../core/index.ts';
import { auditChannel, ChannelPoint, MemoryBus, MemoryStore } from '../../channel/index.ts';

const grant = contentId({ jcp_test_grant: 'bound' });
const actors: Actor[] = [0, 1, 2, 3, 4].map((i) => actorFromSeed(seededRng(`bound/point/${i}`)(32)));

type Action = { kind: 'spend'; cost: bigint; times: number } | { kind: 'settle' } | { kind: 'crash' } | { kind: 'cut' } | { kind: 'heal' };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({ cost: fc.bigInt({ min: 1n, max: 30n }), times: fc.integer({ min: 1, max: 40 }) })
      .map(({ cost, times }): Action => ({ kind: 'spend', cost, times })),
  },
  { weight: 3, arbitrary: fc.constant<Action>({ kind: 'settle' }) },
  { weight: 1, arbitrary: fc.constant<Action>({ kind: 'crash' }) },
  { weight: 1, arbitrary: fc.constant<Action>({ kind: 'cut' }) },
  { weight: 1, arbitrary: fc.constant<Action>({ kind: 'heal' }) },
);

const config = fc.record({
  budget: fc.bigInt({ min: 30n, max: 300n }),
  points: fc.array(fc.record({ window: fc.bigInt({ min: 1n, max: 30n }), actions: fc.array(action, { minLength: 10, maxLength: 60 }) }), {
    minLength: 2,
    maxLength: 5,
  }),
});

interface Outcome {
  readonly spent: bigint;
  readonly budget: bigint;
  readonly bound: bigint;
  readonly proven: bigint | undefined;
}

type Config = typeof config extends fc.Arbitrary<infer T> ? T : never;

async function simulate(s: fc.Scheduler, cfg: Config, readMode: 'leader' | 'follower'): Promise<Outcome> {
  const store = new MemoryStore();
  const view = () => {
    const bus = new MemoryBus(store);
    bus.readMode = readMode;
    bus.delay = () => s.schedule(Promise.resolve());
    return bus;
  };
  const st = cfg.points.map((p, i) => {
    const bus = view();
    return {
      bus,
      cut: false,
      real: 0n,
      point: new ChannelPoint({ grantId: grant, windowUj: p.window, self: actors[i]!, bus }),
    };
  });
  const workers = cfg.points.map(async (p, i) => {
    const me = st[i]!;
    for (const a of p.actions) {
      switch (a.kind) {
        case 'spend':
          for (let t = 0; t < a.times; t++) {
            if (!me.point.tryReserve(a.cost, cfg.budget).ok) break;
            me.point.commit(a.cost);
            me.real += a.cost;
          }
          break;
        case 'settle':
          await me.point.settle();
          break;
        case 'crash': {
          // The old process is gone: its connection drops mid-flight; the new one replays its receipts.
          me.bus.down = true;
          me.bus = view();
          me.bus.down = me.cut;
          me.point = new ChannelPoint({ grantId: grant, windowUj: p.window, self: actors[i]!, bus: me.bus, spentUj: me.real });
          break;
        }
        case 'cut':
          me.cut = true;
          me.bus.down = true;
          break;
        case 'heal':
          me.cut = false;
          me.bus.down = false;
          break;
      }
      await s.schedule(Promise.resolve());
    }
  });
  await s.waitFor(Promise.all(workers));
  await s.waitAll();
  const spent = st.reduce((a, x) => a + x.real, 0n);
  const bound = overdraftBound(cfg.points.map((p) => p.window));
  // Heal everything and settle: the statements must then prove exactly what was spent.
  for (const x of st) x.bus.down = false;
  for (const x of st) x.bus.delay = undefined;
  for (const x of st) await x.point.settleNow();
  const audit = await auditChannel(st[0]!.bus, grant, cfg.budget);
  return { spent, budget: cfg.budget, bound, proven: audit.refused.length === 0 ? audit.totalUj : undefined };
}

describe('channel bound - leader reads', () => {
  it('total spend never passes budget + Σ_{j≠k} W_j, under crashes and partitions (300 schedules)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), config, async (s, cfg) => {
        const o = await simulate(s, cfg, 'leader');
        expect(o.spent).toBeLessThanOrEqual(o.budget + o.bound);
      }),
      { numRuns: 300, seed: 4242 },
    );
  });

  it('after healing and settling, the signed statements prove exactly the spend', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), config, async (s, cfg) => {
        const o = await simulate(s, cfg, 'leader');
        expect(o.proven).toBe(o.spent);
      }),
      { numRuns: 100, seed: 77 },
    );
  });
});

describe('channel bound - follower reads', () => {
  /**
   * Two points, budget 100 µJ, W = 50 µJ each (bound 50 µJ). Each point spends its window and
   * settles in turn. A follower one step behind shows each point the other's previous statement.
   */
  async function alternate(readMode: 'leader' | 'follower'): Promise<Outcome> {
    const store = new MemoryStore();
    const pts = [0, 1].map((i) => {
      const bus = new MemoryBus(store);
      bus.readMode = readMode;
      return new ChannelPoint({ grantId: grant, windowUj: 50n, self: actors[i]!, bus });
    });
    for (const p of pts) await p.settleNow();
    let spent = 0n;
    for (let round = 0; round < 4; round++) {
      for (const p of pts) {
        while (p.tryReserve(10n, 100n).ok) {
          p.commit(10n);
          spent += 10n;
        }
        await p.settleNow();
      }
    }
    return { spent, budget: 100n, bound: overdraftBound([50n, 50n]), proven: undefined };
  }

  it('overspend / past budget + bound when peers are read one statement behind', async () => {
    const o = await alternate('follower');
    expect(o.spent).toBeGreaterThan(o.budget + o.bound);
  });

  it('the same schedule with leader reads stays within budget + bound', async () => {
    const o = await alternate('leader');
    expect(o.spent).toBeLessThanOrEqual(o.budget + o.bound);
  });
});
