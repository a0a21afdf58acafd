import { describe, expect, it } from 'vitest';
import {
  type Actor,
  actorFromSeed,
  contentId,
  decode,
  encode,
  readSignedStatement,
  seededRng,
  signBody,
  signedStatementToCbor,
  signStatement,
} from '../../core/index.ts';
import { ChannelPoint, MemoryBus, MemoryStore, pointHash } from '../../channel/index.ts';

const grant = contentId({ jcp_test_grant: 'settlement' });
const actor = (name: string): Actor => actorFromSeed(seededRng(`channel/${name}`)(32));
const alice = actor('alice');
const bob = actor('bob');
const mallory = actor('mallory');

function pointOn(store: MemoryStore, self: Actor, windowUj: bigint, spentUj = 0n) {
  const bus = new MemoryBus(store);
  const p = new ChannelPoint({ grantId: grant, windowUj, self, bus, spentUj });
  return { bus, p };
}

/** Reserves and commits at once (the receipt is durable), as the node does on an allow. */
function spend(p: ChannelPoint, costUj: bigint, budgetUj: bigint) {
  const r = p.tryReserve(costUj, budgetUj);
  if (r.ok) p.commit(costUj);
  return r;
}

describe('settlement - the restart rule', () => {
  it('refuse / not-settled / nothing is allowed before the first settlement', () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    const r = p.tryReserve(1n, 1_000n);
    expect(r.ok ? 'allowed' : r.error.code).toBe('not-settled');
  });

  it('allow / after the first settlement, within budget and window', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    expect((await p.settle()).ok).toBe(true);
    expect(spend(p, 60n, 1_000n).ok).toBe(true);
    expect(p.spentUj).toBe(60n);
  });

  it('a restarted point continues its seq above its own latest statement and never claims less', async () => {
    const store = new MemoryStore();
    const first = pointOn(store, alice, 100n);
    await first.p.settle();
    spend(first.p, 40n, 1_000n);
    const before = await first.p.settleNow();
    expect(before.ok).toBe(true);
    const restarted = pointOn(store, alice, 100n, 40n);
    const after = await restarted.p.settle();
    expect(after.ok && before.ok && after.statement.seq > before.statement.seq).toBe(true);
    expect(after.ok ? after.statement.spent_uj : -1n).toBe(40n);
  });

  it('a restarted point whose own statement claims more than its receipts keeps the higher figure', async () => {
    const store = new MemoryStore();
    const first = pointOn(store, alice, 100n);
    await first.p.settle();
    spend(first.p, 70n, 1_000n);
    await first.p.settleNow();
    const restarted = pointOn(store, alice, 100n, 30n);
    const r = await restarted.p.settle();
    expect(r.ok ? r.statement.spent_uj : -1n).toBe(70n);
  });
});

describe('settlement - the spending rule', () => {
  it('refuse / window-exhausted / unsettled spend would pass W by 1 µJ', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    expect(spend(p, 100n, 1_000n).ok).toBe(true);
    const r = p.tryReserve(1n, 1_000n);
    expect(r.ok ? 'allowed' : r.error.code).toBe('window-exhausted');
  });

  it('a settlement resets the window: the published spend becomes the baseline', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    spend(p, 100n, 1_000n);
    await p.settleNow();
    expect(p.baselineUj).toBe(100n);
    expect(spend(p, 100n, 1_000n).ok).toBe(true);
  });

  it('refuse / budget-exceeded / my spend plus the peers settled spend would pass the budget by 1 µJ', async () => {
    const store = new MemoryStore();
    const a = pointOn(store, alice, 500n);
    const b = pointOn(store, bob, 500n);
    await a.p.settle();
    await b.p.settle();
    expect(spend(a.p, 300n, 1_000n).ok).toBe(true);
    await a.p.settleNow();
    await b.p.settleNow();
    expect(b.p.peersUj).toBe(300n);
    expect(spend(b.p, 400n, 1_000n).ok).toBe(true);
    await b.p.settleNow();
    const r = b.p.tryReserve(301n, 1_000n);
    expect(r.ok ? 'allowed' : r.error.code).toBe('budget-exceeded');
    expect(spend(b.p, 300n, 1_000n).ok).toBe(true);
  });

  it('a reservation counts against the window before its receipt is durable', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    expect(p.tryReserve(80n, 1_000n).ok).toBe(true);
    const r = p.tryReserve(30n, 1_000n);
    expect(r.ok ? 'allowed' : r.error.code).toBe('window-exhausted');
  });

  it('statements claim only durable spend', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    p.tryReserve(50n, 1_000n);
    const r = await p.settle();
    expect(r.ok ? r.statement.spent_uj : -1n).toBe(0n);
    p.commit(50n);
    const r2 = await p.settle();
    expect(r2.ok ? r2.statement.spent_uj : -1n).toBe(50n);
  });

  it('half of the window used starts a settlement in the background', async () => {
    const { bus, p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    const before = bus.calls.publishStatement;
    spend(p, 49n, 1_000n);
    expect(p.settling).toBe(false);
    spend(p, 1n, 1_000n);
    expect(p.settling).toBe(true);
    const r = await p.settle();
    expect(bus.calls.publishStatement).toBe(before + 1);
    expect(r.ok ? r.statement.spent_uj : -1n).toBe(50n);
  });

  it('reserve() waits for a settlement when the window is exhausted, then allows', async () => {
    const { p } = pointOn(new MemoryStore(), alice, 100n);
    const r = await p.reserve(100n, 1_000n, 1_000);
    expect(r.ok).toBe(true);
    p.commit(100n);
    const r2 = await p.reserve(100n, 1_000n, 1_000);
    expect(r2.ok).toBe(true);
  });
});

describe('settlement - a point cut off from NATS', () => {
  it('refuse / window-exhausted / a partitioned point stops after W', async () => {
    const { bus, p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    bus.down = true;
    let allowed = 0n;
    for (let i = 0; i < 50; i++) if (spend(p, 10n, 1_000n).ok) allowed += 10n;
    expect(allowed).toBe(100n);
    expect((await p.settleNow()).ok).toBe(false);
    const r = p.tryReserve(1n, 1_000n);
    expect(r.ok ? 'allowed' : r.error.code).toBe('window-exhausted');
    expect(p.counts.settleFailures).toBeGreaterThan(0);
  });

  it('a healed point settles and allows again', async () => {
    const { bus, p } = pointOn(new MemoryStore(), alice, 100n);
    await p.settle();
    bus.down = true;
    spend(p, 100n, 1_000n);
    await p.settle();
    bus.down = false;
    expect((await p.settle()).ok).toBe(true);
    expect(spend(p, 100n, 1_000n).ok).toBe(true);
  });
});

describe('settlement - statements read back are verified (C17)', () => {
  async function twoPoints() {
    const store = new MemoryStore();
    const a = pointOn(store, alice, 100n);
    const b = pointOn(store, bob, 100n);
    await a.p.settle();
    spend(a.p, 60n, 1_000n);
    await a.p.settleNow();
    await b.p.settleNow();
    return { store, a, b };
  }

  it('refuse / forged / a statement not signed by its point is counted and never applied', async () => {
    const { a, b } = await twoPoints();
    // Mallory signs a statement that names Alice as its point.
    const body = { grant_id: grant, point: alice.did, spent_uj: 0n, seq: Date.now() + 10_000 };
    const bytes = encode(signedStatementToCbor(signBody(body, mallory)));
    b.bus.inject(grant, pointHash(alice.did), bytes);
    const r = await b.p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['forged']);
    expect(b.p.counts.refused.forged).toBe(1);
    expect(b.p.peersUj).toBe(60n);
    expect(a.p.spentUj).toBe(60n);
  });

  it('refuse / stale / a replayed older statement of a peer is refused and the settlement fails closed', async () => {
    const { store, b } = await twoPoints();
    const versions = store.statements.get(grant)?.get(pointHash(alice.did)) ?? [];
    const older = versions[0]!;
    b.bus.inject(grant, pointHash(alice.did), older);
    const r = await b.p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['stale']);
    expect(b.p.counts.refused.stale).toBe(1);
  });

  it('refuse / regressing / a newer statement claiming less spend is refused', async () => {
    const { b } = await twoPoints();
    const regress = signStatement({ grant_id: grant, point: alice.did, spent_uj: 10n, seq: Date.now() + 60_000 }, alice);
    b.bus.inject(grant, pointHash(alice.did), encode(signedStatementToCbor(regress)));
    const r = await b.p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['regressing']);
    expect(b.p.peersUj).toBe(60n);
  });

  it('refuse / misplaced / a valid statement under another point subject', async () => {
    const { b } = await twoPoints();
    const mine = signStatement({ grant_id: grant, point: mallory.did, spent_uj: 1n, seq: 1 }, mallory);
    b.bus.inject(grant, pointHash(alice.did), encode(signedStatementToCbor(mine)));
    const r = await b.p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['misplaced']);
  });

  it('refuse / malformed / bytes that are not a signed statement', async () => {
    const { b } = await twoPoints();
    b.bus.inject(grant, pointHash(alice.did), new Uint8Array([0xa1, 0x61]));
    const r = await b.p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['malformed']);
  });

  it('refuse / unknown-point / a signed statement from a point outside a fixed membership', async () => {
    const store = new MemoryStore();
    const p = new ChannelPoint({ grantId: grant, windowUj: 100n, self: bob, bus: new MemoryBus(store), points: [alice.did, bob.did] });
    const m = pointOn(store, mallory, 100n);
    await m.p.settle();
    const r = await p.settle();
    expect(r.ok ? 'settled' : r.refused.map((x) => x.code)).toEqual(['unknown-point']);
  });

  it('a settled statement decodes to the point, grant and spend it claims', async () => {
    const { store } = await twoPoints();
    const versions = store.statements.get(grant)?.get(pointHash(alice.did)) ?? [];
    const latest = readSignedStatement(decode(versions[versions.length - 1]!));
    expect([latest.body.point, latest.body.grant_id, latest.body.spent_uj]).toEqual([alice.did, grant, 60n]);
  });
});
