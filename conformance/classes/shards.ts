/**
 * Conformance classes for distributed budgets (spec §4.5): C11 (sharded budgets: refused over-sum
 * at the product's mint, each point enforcing only its own shard at a live node) and C17 (budget
 * channels on the product's settlement: optimistic spends settled by signed statements; forged,
 * stale, regressing and misplaced statements refused; the merged view binds; the overdraft of a
 * worst-case partition read from the product's audit and proven to a third party).
 */
import {
  type Actor,
  attenuate,
  checkHop,
  contentId,
  decode,
  encode,
  type Grant,
  grantId,
  mintShards,
  newActor,
  overdraftBound,
  type OverdraftProof,
  overdraftProofToCbor,
  planSplit,
  ProofRefusals,
  readOverdraftProof,
  type Rng,
  seededRng,
  ShardRefusals,
  signBody,
  type SignedGrant,
  type SignedStatement,
  signedStatementToCbor,
  signGrant,
  signStatement,
  spendBound,
  type Statement,
  verifyGrantSignature,
  verifyOverdraftProof,
} from '../../core/index.ts';
import { auditChannel, ChannelPoint, Channels, MemoryBus, MemoryStore, pointHash } from '../../channel/index.ts';
import { type BudgetPolicy, resourceIdOf } from '../../node/index.ts';
import { assignmentOf, mintShardSet, parseSplit, ShardBindings, signShardAssignment } from '../../shards/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';
import { type KitNode, withLiveNode } from './node-kit.ts';

/**
 * C11: shard slices that sum past the parent are refused at mint; valid shards chain-verify; each
 * point enforces only its own shard. The refusals go through the product's mint (core's
 * `mintShards`, `planSplit` and shards/ `mintShardSet`) with several over-sums; the enforcement
 * through a live node whose budget policy is the product's `ShardBindings` (shards/binding.ts), its
 * ledger read back after each refusal.
 */
export const C11: ConformanceClass = {
  id: 'C11',
  title: 'sharded budgets',
  async run(t) {
    const fx = shardFixture();
    checkCoreMint(t, fx);
    checkShardSetMint(t, fx);
    // Each point enforces only its own shard: a live node with the product's shard bindings.
    const bindings = new ShardBindings();
    await withLiveNode(
      'c11',
      { budgetPolicy: (self) => ({ admit: (req, d) => bindings.check(req.chain, d.chainIds, self(), req.cost.uj) }) },
      (n) => checkLiveShards(t, fx, bindings, n),
    );
  },
};

/** C11's actors (issuer, holder, three enforcement points, mallory) and the 1,000,000 µJ parent grant, from the seeded rng `conformance/C11`. */
interface ShardFixture {
  readonly rng: Rng;
  readonly issuer: Actor;
  readonly holder: Actor;
  readonly nodes: readonly Actor[];
  readonly mallory: Actor;
  readonly g: Grant;
  readonly parent: SignedGrant;
  readonly pid: string;
}

/** Builds {@link ShardFixture} (throws nothing). */
function shardFixture(): ShardFixture {
  const rng = seededRng('conformance/C11');
  const issuer = newActor(rng);
  const holder = newActor(rng);
  const nodes = [newActor(rng), newActor(rng), newActor(rng)];
  const mallory = newActor(rng);
  const g: Grant = {
    issuer: issuer.did,
    subject: holder.did,
    capability: { resource: contentId({ tool: 'fs' }), actions: ['read', 'write'] },
    budget_uj: 1_000_000n,
    expiry: 0,
    nonce: rng(16),
  };
  const parent = signGrant(g, issuer);
  const pid = grantId(g);
  return { rng, issuer, holder, nodes, mallory, g, parent, pid };
}

/** A mint result as its refusal code, or `minted`. */
function code(r: { ok: true } | { ok: false; error: { code: string } }): string {
  return r.ok ? 'minted' : r.error.code;
}

/**
 * Core's mint (spec §4.5): a 50/30/20 split mints strictly weaker, holder-signed shards; slices
 * over the parent by 1 µJ (`over-sum`), negative slices (`bad-slice`), a non-holder
 * (`not-holder`) and a new action (`attenuation-violation`) are refused.
 */
function checkCoreMint(t: Checker, { rng, issuer, holder, nodes, mallory, g, parent, pid }: ShardFixture): void {
  const slicesOf = (budgets: readonly bigint[]) =>
    budgets.map((b, i) => ({ subject: nodes[i % nodes.length]!.did, budget_uj: b, nonce: rng(16) }));
  const plan = planSplit(g.budget_uj, [50, 30, 20]);
  t.ok(plan.ok, 'a 50/30/20 split plans');
  const budgets = plan.ok ? plan.value : [];
  t.eq(
    budgets.reduce((a, b) => a + b, 0n),
    g.budget_uj,
    'a 100% split uses the whole parent, no more',
  );
  const minted = mintShards(parent, holder, slicesOf(budgets));
  t.ok(minted.ok, 'slices summing exactly to the parent mint');
  for (const [i, s] of (minted.ok ? minted.value : []).entries()) {
    t.ok(verifyGrantSignature(s), `shard ${i} is signed by the holder`);
    t.ok(checkHop(g, pid, s.grant).ok, `shard ${i} is a strictly weaker child of the parent`);
    t.eq(s.grant.subject, nodes[i]!.did, `shard ${i} is held by its enforcement point`);
  }

  for (const [what, over] of [
    ['in the last slice', [500_000n, 300_000n, 200_001n]],
    ['in the first slice', [500_001n, 300_000n, 200_000n]],
    ['in a middle slice', [500_000n, 300_001n, 200_000n]],
    ['by many', [900_000n, 900_000n]],
    ['in one slice alone', [1_000_001n]],
  ] as const) {
    t.eq(
      code(mintShards(parent, holder, slicesOf(over))),
      ShardRefusals.OVER_SUM,
      `slices over the parent by 1 µJ ${what} are refused at mint`,
    );
  }
  t.eq(
    code(mintShards(parent, holder, slicesOf([1n]), { allocatedUj: g.budget_uj })),
    ShardRefusals.OVER_SUM,
    'a second round past the live shards is refused',
  );
  t.eq(
    code(mintShards(parent, holder, slicesOf([400_001n]), { allocatedUj: 600_000n })),
    ShardRefusals.OVER_SUM,
    'a second round 1 µJ past what is left is refused',
  );
  t.eq(
    code(mintShards(parent, holder, slicesOf([400_000n]), { allocatedUj: 600_000n })),
    'minted',
    'a second round of exactly what is left mints',
  );
  t.eq(code(mintShards(parent, holder, slicesOf([1_500_000n, -500_000n]))), ShardRefusals.BAD_SLICE, 'a negative slice cannot make room');
  t.eq(code(mintShards(parent, holder, slicesOf([-1n]))), ShardRefusals.BAD_SLICE, 'a negative slice is refused even alone');
  for (const who of [issuer, nodes[0]!, mallory]) {
    t.eq(code(mintShards(parent, who, slicesOf([1n]))), ShardRefusals.NOT_HOLDER, 'only the holder shards');
  }
  t.eq(
    code(mintShards(parent, holder, [{ ...slicesOf([1n])[0]!, actions: ['delete'] }])),
    ShardRefusals.ATTENUATION_VIOLATION,
    'a slice with a new action is refused',
  );
  t.eq(planSplit(1000n, [60, 40.01]).ok, false, 'a split past 100% by 0.01% is refused');
  t.eq(planSplit(1000n, [60, 40]).ok, true, 'a split of exactly 100% plans');
}

/** The shards/ mint (what `jcp shards mint` runs): over 100% refused; a rebalance gets only what is left. */
function checkShardSetMint(t: Checker, { rng, issuer, holder, parent }: ShardFixture): void {
  // The shards/ mint (what `jcp shards mint` runs): over 100% refused; a rebalance gets only what is left.
  const set = (spec: string, consumedUj = 0n, who = holder) =>
    mintShardSet([parent], who, parseSplit(spec), { subject: holder.did, consumedUj, rng });
  t.eq(code(set('a=60%,b=40.01%')), ShardRefusals.OVER_SUM, 'shards/: a split past 100% is refused at mint');
  t.eq(code(set('a=50%', 0n, issuer)), ShardRefusals.NOT_HOLDER, 'shards/: only the holder mints a shard set');
  const rebalanced = set('a=50%,b=50%', 400_000n);
  t.eq(
    rebalanced.ok ? rebalanced.value.map((s) => s.grant.grant.budget_uj) : code(rebalanced),
    [300_000n, 300_000n],
    'shards/: after 400,000 µJ consumed, a 100% split hands out only the 600,000 µJ left',
  );
}

/**
 * On live node `n` whose budget policy is `bindings`: fail closed before the assignments are
 * read, forged assignments refused, the shard assigned here spends its 150 µJ slice and no more,
 * shards assigned elsewhere and strays are refused and debit nothing.
 */
async function checkLiveShards(
  t: Checker,
  { rng, issuer, holder, mallory, g }: ShardFixture,
  bindings: ShardBindings,
  n: KitNode,
): Promise<void> {
  const there = newActor(rng);
  const agents = { here: newActor(rng), there: newActor(rng), spare: newActor(rng) };
  const lparent = signGrant(
    { ...g, capability: { resource: n.resources['c11']!, actions: ['read'] }, budget_uj: 300n, nonce: rng(16) },
    issuer,
  );
  const shardSet = mintShardSet([lparent], holder, parseSplit('here=50%,there=30%,spare=20%'), {
    subject: { here: agents.here.did, there: agents.there.did, spare: agents.spare.did },
    points: { here: { did: n.node.did }, there: { did: there.did }, spare: { did: n.node.did } },
    rng,
  });
  if (!shardSet.ok) throw new Error(`C11: the live shard set was refused: ${shardSet.error.why}`);
  const [here, away, spare] = shardSet.value.map((s) => s.grant) as [SignedGrant, SignedGrant, SignedGrant];
  t.eq([here.grant.budget_uj, away.grant.budget_uj, spare.grant.budget_uj], [150n, 90n, 60n], 'the live set is sliced 150/90/60 µJ');
  const stray = attenuate(lparent, { subject: agents.here.did, budget_uj: 50n, nonce: rng(16) }, holder);
  if (!stray.ok) throw new Error('C11: the stray child was refused');

  t.eq(
    await n.call([lparent, here], agents.here),
    'budget-exceeded',
    'before the assignments are read, a shard chain is refused (fail closed)',
  );
  bindings.markReady();
  const a = assignmentOf({ parentChain: [lparent], generation: 1, consumedUj: 0n, shards: shardSet.value, closed: [] }, holder.did)!;
  const forged = { body: a, signature: signShardAssignment({ ...a, holder: mallory.did }, mallory).signature };
  t.eq(bindings.take(forged).ok, false, 'an assignment in the holder’s name signed by another key is refused');
  const allHere = { ...a, shards: a.shards.map((s) => ({ ...s, point: n.node.did })) };
  t.eq(
    bindings.take({ body: allHere, signature: signShardAssignment({ ...allHere, holder: mallory.did }, mallory).signature }).ok,
    false,
    'a forged assignment moving every shard here is refused',
  );
  t.ok(
    bindings.take(signShardAssignment({ ...allHere, holder: mallory.did }, mallory)).ok,
    'a stranger’s assignment in its own name is taken, and binds only children it issued',
  );
  t.ok(bindings.take(signShardAssignment(a, holder)).ok, 'the holder’s assignment is taken');

  const verdicts: string[] = [];
  for (let i = 0; i < 15; i++) verdicts.push(await n.call([lparent, here], agents.here));
  t.eq(verdicts, Array(15).fill('allow'), 'the shard assigned here allows 15 calls of 10 µJ, its whole slice');
  t.eq(await n.call([lparent, here], agents.here), 'budget-exceeded', 'the point that spent its whole slice has nothing left to allow');
  t.eq(n.spent(lparent, here), [150n, 150n], 'the node debited the shard and the parent exactly the slice');
  t.eq(await n.call([lparent, away], agents.there), 'budget-exceeded', 'a shard assigned to another point is refused here');
  t.eq(await n.call([lparent, stray.value], agents.here), 'budget-exceeded', 'a child of the sharded parent outside the set is refused');
  t.eq(n.spent(lparent, away, stray.value), [150n, 0n, 0n], '… and neither refusal debited anything');
  t.eq(await n.call([lparent, spare], agents.spare), 'allow', 'a second shard assigned here spends');
  t.eq(n.spent(lparent, spare), [160n, 10n], 'its spend is debited on the shard and the parent');
}

/**
 * C17: budget channels settle by signed statements; bad statements are refused; overdraft is
 * provable. Every spend and settlement runs on the product's `ChannelPoint`s (channel/
 * settlement.ts) over an in-memory bus with the JetStream bus's contract; bad statements are
 * stored on that bus as an attacker with publish rights would, and refused by the points'
 * settlement code; the overdraft and its bound are read from the product's audit
 * (channel/audit.ts) after a worst-case partition, and checked by a third party. Last, two live
 * nodes serve one channel grant through the product's budget policy (channel/channels.ts) over a
 * shared bus: calls over jcp/1, the window and the budget enforced by the nodes, their ledgers
 * read back and matched against the statements the audit reads.
 */
export const C17: ConformanceClass = {
  id: 'C17',
  title: 'budget channels',
  async run(t) {
    const fx = channelFixture();
    const budget = 900n;
    const grant = fx.channelGrant(budget);
    const gid = grantId(grant.grant);
    const ch = await checkSettlement(t, fx, gid, budget);
    await checkBadStatements(t, fx, ch, gid, budget);
    await checkMergedBudget(t, ch, gid, budget);
    const { proof, gid2, small } = await checkPartition(t, fx);
    checkThirdPartyProof(t, proof, { gid, gid2, small });
    await checkLiveChannel(t, fx);
  },
};

/** One channel's points over one in-memory store: each point's bus, and an attacker's bus with publish rights. */
interface OpenChannel {
  readonly store: MemoryStore;
  readonly buses: MemoryBus[];
  readonly pts: ChannelPoint[];
  readonly attacker: MemoryBus;
}

/**
 * C17's actors (issuer, three points, an outsider, the agent) from the seeded rng
 * `conformance/C17`; `channelGrant` mints a channel grant of `budget_uj` µJ, `open` starts the
 * three points of grant `gid` with windows `windows` (µJ) on one shared clock (ms).
 */
interface ChannelFixture {
  readonly rng: Rng;
  readonly issuer: Actor;
  readonly actors: readonly Actor[];
  readonly outsider: Actor;
  readonly agent: Actor;
  channelGrant(budget_uj: bigint): SignedGrant;
  open(gid: string, windows: readonly bigint[]): OpenChannel;
}

/** Builds {@link ChannelFixture} (throws nothing). */
function channelFixture(): ChannelFixture {
  const rng = seededRng('conformance/C17');
  const issuer = newActor(rng);
  const actors = [newActor(rng), newActor(rng), newActor(rng)];
  const outsider = newActor(rng);
  const agent = newActor(rng);
  const members = actors.map((p) => p.did);
  const channelGrant = (budget_uj: bigint) =>
    signGrant(
      {
        issuer: issuer.did,
        subject: agent.did,
        capability: { resource: contentId({ tool: 'llm' }), actions: ['complete'] },
        budget_uj,
        expiry: 0,
        nonce: rng(16),
      },
      issuer,
    );
  let clock = 1_000_000;
  const nowMs = () => clock++;
  const open = (gid: string, windows: readonly bigint[]) => {
    const store = new MemoryStore();
    const buses = actors.map(() => new MemoryBus(store));
    const pts = actors.map(
      (self, i) => new ChannelPoint({ grantId: gid, windowUj: windows[i]!, self, bus: buses[i]!, points: members, nowMs }),
    );
    return { store, buses, pts, attacker: new MemoryBus(store) };
  };
  return { rng, issuer, actors, outsider, agent, channelGrant, open };
}

/** Reserve then commit (the node's allow path); the refusal code otherwise. */
function spend(p: ChannelPoint, cost: bigint, budget: bigint): string {
  const r = p.tryReserve(cost, budget);
  if (!r.ok) return r.error.code;
  p.commit(cost);
  return 'allowed';
}

/** One settlement of every point, in order. */
async function settleAll(pts: readonly ChannelPoint[]): Promise<void> {
  for (const p of pts) await p.settleNow();
}

/**
 * Optimistic spends, then settlement (spec §4.5): nothing before the first settlement, then
 * every point's view agrees on the settled total (600 µJ of `budget`). Returns the open channel.
 */
async function checkSettlement(t: Checker, fx: ChannelFixture, gid: string, budget: bigint): Promise<OpenChannel> {
  // Optimistic spends, then settlement: every point's view agrees on the settled total.
  const ch = fx.open(gid, [100n, 100n, 100n]);
  t.eq(spend(ch.pts[0]!, 10n, budget), 'not-settled', 'a point allows nothing before its first settlement');
  await settleAll(ch.pts);
  for (let round = 0; round < 2; round++) {
    for (const [i, p] of ch.pts.entries()) t.eq(spend(p, 100n, budget), 'allowed', `round ${round}: point ${i} spends within its window`);
    await settleAll(ch.pts);
    await settleAll(ch.pts);
  }
  t.eq(
    ch.pts.map((p) => p.peersUj),
    [400n, 400n, 400n],
    'after settlement every point sees its peers’ 400 µJ',
  );
  const settled = await auditChannel(ch.attacker, gid, budget);
  t.eq(
    [settled.totalUj, settled.overdraftUj, settled.proofVerifies],
    [600n, 0n, true],
    'the audit merges the points’ statements at 600 µJ',
  );
  t.eq(spend(ch.pts[0]!, 101n, budget), 'window-exhausted', 'a spend past the unsettled window waits for settlement');
  return ch;
}

/**
 * Bad statements stored on the stream as an attacker would (forged, unknown-point, misplaced,
 * stale, regressing, malformed) are refused by the settlement, counted, and change no view; the
 * audit refuses a forged one and counts nothing from it.
 */
async function checkBadStatements(
  t: Checker,
  { actors, outsider }: ChannelFixture,
  ch: OpenChannel,
  gid: string,
  budget: bigint,
): Promise<void> {
  // Bad statements stored on the stream are refused by the settlement and change no view.
  const [p0, p1] = ch.pts as [ChannelPoint, ChannelPoint];
  await settleAll(ch.pts);
  const latest0 = () => p1.statements().find((s) => s.body.point === actors[0]!.did)!;
  const bytesOf = (ss: SignedStatement) => encode(signedStatementToCbor(ss));
  const as0 = (body: Partial<Statement>) => signStatement({ ...latest0().body, ...body }, actors[0]!);
  const oldest0 = ch.store.statements.get(gid)!.get(pointHash(actors[0]!.did))![0]!;
  const [at0, at2, atOutsider] = [pointHash(actors[0]!.did), pointHash(actors[2]!.did), pointHash(outsider.did)];
  /** What, the refusal expected, the bytes stored (built from point 0's latest statement), and under which subject. */
  const bad: Array<[string, string, (l: Statement) => Uint8Array, string]> = [
    [
      'tampered (spend lowered, signature kept)',
      'forged',
      (l) => bytesOf({ body: { ...l, spent_uj: 0n, seq: l.seq + 1 }, signature: latest0().signature }),
      at0,
    ],
    ['by a forger naming the real point', 'forged', (l) => bytesOf(signBody({ ...l, spent_uj: 0n, seq: l.seq + 1 }, outsider)), at0],
    ['by another point of the channel, naming this one', 'forged', (l) => bytesOf(signBody({ ...l, seq: l.seq + 1 }, actors[2]!)), at0],
    [
      'by a forger naming itself',
      'unknown-point',
      (l) => bytesOf(signStatement({ ...l, point: outsider.did, seq: l.seq + 1 }, outsider)),
      atOutsider,
    ],
    [
      'by a forger naming itself, under the real point’s subject',
      'misplaced',
      (l) => bytesOf(signStatement({ ...l, point: outsider.did, seq: l.seq + 1 }, outsider)),
      at0,
    ],
    ['by the real point, under another point’s subject', 'misplaced', () => bytesOf(latest0()), at2],
    ['stale by 1', 'stale', (l) => bytesOf(as0({ seq: l.seq - 1 })), at0],
    ['stale by many', 'stale', () => bytesOf(as0({ seq: 1 })), at0],
    ['stale by 0 (same seq, more spend)', 'stale', (l) => bytesOf(as0({ spent_uj: l.spent_uj + 10n })), at0],
    ['an old statement replayed', 'stale', () => oldest0, at0],
    ['regressing by 1 µJ', 'regressing', (l) => bytesOf(as0({ seq: l.seq + 1, spent_uj: l.spent_uj - 1n })), at0],
    ['regressing to 0', 'regressing', (l) => bytesOf(as0({ seq: l.seq + 1, spent_uj: 0n })), at0],
    ['malformed', 'malformed', () => new Uint8Array([0xa1, 0x61, 0x78, 0x01]), at0],
  ];
  for (const [what, expected, make, subject] of bad) {
    const peers = p1.peersUj;
    const refusedBefore = p1.counts.refused[expected as keyof typeof p1.counts.refused];
    ch.attacker.inject(gid, subject, make(latest0().body));
    const out = await p1.settleNow();
    t.eq(
      out.ok ? 'settled' : out.refused.map((r) => r.code),
      [expected],
      `a statement ${what} is refused as ${expected}; the settlement does not complete`,
    );
    t.eq(
      [p1.peersUj, p1.counts.refused[expected as keyof typeof p1.counts.refused]],
      [peers, refusedBefore + 1],
      `… the view is unchanged and the refusal counted (${what})`,
    );
    // The wronged subject's point republishes (or the outsider's subject is cleared) before the next case.
    if (subject === atOutsider) ch.store.statements.get(gid)!.delete(subject);
    else await ch.pts[actors.findIndex((a) => pointHash(a.did) === subject)]!.settleNow();
  }
  ch.attacker.inject(gid, at0, bad[1]![2](latest0().body));
  const fa = await auditChannel(ch.attacker, gid, budget);
  t.eq([fa.refused.map((r) => r.code), fa.totalUj], [['forged'], 400n], 'the audit refuses a forged statement and counts nothing from it');
  await p0.settleNow();
}

/** The merged ledger binds: every point spends up to the budget exactly, then 1 µJ more is refused. */
async function checkMergedBudget(t: Checker, ch: OpenChannel, gid: string, budget: bigint): Promise<void> {
  const [p0, , p2] = ch.pts as [ChannelPoint, ChannelPoint, ChannelPoint];
  // The merged ledger binds: spend up to the budget, then refuse.
  for (const [i, p] of ch.pts.entries()) t.eq(spend(p, 100n, budget), 'allowed', `point ${i} spends its third 100 µJ`);
  await settleAll(ch.pts);
  await settleAll(ch.pts);
  t.eq((await auditChannel(ch.attacker, gid, budget)).totalUj, budget, 'settled spend reaches the budget exactly');
  t.eq(
    [spend(p2, 1n, budget), spend(p0, 1n, budget)],
    ['budget-exceeded', 'budget-exceeded'],
    'after settlement the merged view refuses 1 µJ more',
  );
}

/**
 * A partition: the points that cannot settle stop at their windows; the point that can spends
 * the 250 µJ budget; the overdraft, read from the audit, is exactly the bound Σ_{j≠k} W_j
 * (160 µJ). Returns the audit's proof, its grant id and budget.
 */
async function checkPartition(
  t: Checker,
  { channelGrant, open }: ChannelFixture,
): Promise<{ proof: OverdraftProof; gid2: string; small: bigint }> {
  // A partition: the points that cannot settle stop at their windows; the point that can spends
  // the budget; the overdraft, read from the audit, is exactly the bound Σ_{j≠k} W_j.
  const small = 250n;
  const windows = [100n, 60n, 40n] as const;
  const gid2 = grantId(channelGrant(small).grant);
  const part = open(gid2, windows);
  await settleAll(part.pts);
  part.buses[0]!.down = true;
  part.buses[1]!.down = true;
  for (const i of [0, 1]) {
    let code = 'allowed';
    while (code === 'allowed') code = spend(part.pts[i]!, 10n, small);
    t.eq([code, part.pts[i]!.spentUj], ['window-exhausted', windows[i]], `cut-off point ${i} stops after its ${windows[i]} µJ window`);
  }
  const k = part.pts[2]!;
  for (let guard = 0; guard < 100; guard++) {
    const code = spend(k, 10n, small);
    if (code === 'budget-exceeded') break;
    if (code === 'window-exhausted') await k.settleNow();
  }
  t.eq(k.spentUj, small, 'the connected point spends the whole budget against the peers’ last statements');
  part.buses[0]!.down = false;
  part.buses[1]!.down = false;
  await settleAll(part.pts);
  const audit = await auditChannel(part.attacker, gid2, small);
  const bound = overdraftBound(windows);
  t.eq(audit.totalUj, small + windows[0] + windows[1], 'the partition heals: the audit recovers every point’s spend');
  t.eq(bound, 160n, 'the bound for windows 100/60/40 is Σ W − min W = 160 µJ');
  t.eq([audit.overdraftUj, audit.proofVerifies], [bound, true], 'the audited overdraft reaches the bound exactly, and its proof verifies');
  t.eq(audit.totalUj, spendBound(small, windows), 'the spend is budget + Σ_{j≠k} W_j, never more');
  t.eq(
    part.pts.map((p) => spend(p, 1n, small)),
    ['budget-exceeded', 'budget-exceeded', 'budget-exceeded'],
    'after healing every point refuses',
  );
  return { proof: audit.proof!, gid2, small };
}

/**
 * A third party checks the overdraft proof from the signed statements alone; inflated,
 * understated, incomplete, forged, doubled, other-budget and other-grant proofs do not verify.
 */
function checkThirdPartyProof(t: Checker, proof: OverdraftProof, { gid, gid2, small }: { gid: string; gid2: string; small: bigint }): void {
  // A third party checks the proof from the signed statements alone.
  const third = readOverdraftProof(decode(encode(overdraftProofToCbor(proof))));
  const v = verifyOverdraftProof(third, { id: gid2, budget_uj: small });
  t.eq(v.ok ? v.value : v.error.code, 160n, 'a third party verifies the 160 µJ overdraft from the signed statements');
  const refusal = (p: OverdraftProof, g?: { id: string; budget_uj: bigint }) => {
    const r = verifyOverdraftProof(p, g);
    return r.ok ? 'verified' : r.error.code;
  };
  t.eq(refusal({ ...proof, overdraft: 170n, total: 420n }), ProofRefusals.WRONG_TOTAL, 'an inflated overdraft claim does not verify');
  t.eq(refusal({ ...proof, overdraft: 150n, total: 400n }), ProofRefusals.WRONG_TOTAL, 'an understated overdraft claim does not verify');
  t.eq(
    refusal({ ...proof, statements: proof.statements.slice(1) }),
    ProofRefusals.WRONG_TOTAL,
    'a proof missing one point’s statement does not add up',
  );
  t.eq(
    refusal({
      ...proof,
      statements: proof.statements.map((st, i) => (i === 0 ? { body: st.body, signature: proof.statements[1]!.signature } : st)),
    }),
    ProofRefusals.FORGED,
    'a proof with a forged statement does not verify',
  );
  t.eq(
    refusal({ ...proof, statements: [...proof.statements, proof.statements[0]!] }),
    ProofRefusals.DUPLICATE_POINT,
    'a point counted twice does not verify',
  );
  t.eq(refusal(proof, { id: gid2, budget_uj: small + 1n }), ProofRefusals.WRONG_BUDGET, 'a proof against another budget does not verify');
  t.eq(refusal(proof, { id: gid, budget_uj: small }), ProofRefusals.WRONG_GRANT, 'a proof for another grant does not verify');
}

/**
 * Two live nodes serve one 100 µJ channel grant (30 µJ windows) through the product's budget
 * policy (channel/channels.ts) over a shared bus: calls over jcp/1, the nodes' ledgers read back
 * and matched against the audit.
 */
async function checkLiveChannel(t: Checker, { rng, issuer, agent }: ChannelFixture): Promise<void> {
  // Two live nodes serve one channel grant through the product's budget policy (channel/
  // channels.ts) over a shared bus: calls over jcp/1, the nodes' ledgers read back.
  const liveBudget = 100n;
  const liveWindow = 30n;
  const lg = signGrant(
    {
      issuer: issuer.did,
      subject: agent.did,
      capability: { resource: resourceIdOf('c17-llm'), actions: ['read'] },
      budget_uj: liveBudget,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
  const lid = grantId(lg.grant);
  const liveStore = new MemoryStore();
  const liveBuses = [new MemoryBus(liveStore), new MemoryBus(liveStore)] as const;
  const channels = liveBuses.map((bus) => new Channels({ bus, specs: [{ grantId: lid, windowUj: liveWindow }] }));
  const policyOf = (c: Channels): BudgetPolicy => ({ admit: (req, d) => c.admit(req, d), committed: (req, d) => c.committed(req, d) });
  const opts = (i: number) => ({ resources: [{ name: 'c17-llm' }], budgetPolicy: () => policyOf(channels[i]!) });
  /** A fresh settlement of every point, twice round, so each node's view holds the other's latest spend. */
  const settleBoth = async () => {
    for (let round = 0; round < 2; round++) for (const c of channels) for (const p of c.points()) await p.settleNow();
  };
  await withLiveNode('c17a', opts(0), async (a) => {
    await withLiveNode('c17b', opts(1), async (b) => {
      const nodes = [a, b] as const;
      const call = (i: number) => nodes[i]!.call([lg], agent);
      const spentAt = () => nodes.map((n) => n.spent(lg)[0]!);
      t.eq(await call(0), 'budget-exceeded', 'node: a channel grant is refused before the node has started its channel');
      for (const [i, n] of nodes.entries()) channels[i]!.attach(n.node.steward, (id) => n.node.ledger.spent(id));
      t.eq(await call(0), 'budget-exceeded', 'node: … and before its first settlement');
      await settleBoth();
      // Node A cut off from the bus (its settlements hang): it stops after its window.
      const held: Array<() => void> = [];
      liveBuses[0].delay = () => new Promise<void>((r) => held.push(r));
      t.eq([await call(0), await call(0), await call(0)], ['allow', 'allow', 'allow'], 'node A allows its 30 µJ window unsettled');
      t.eq(await call(0), 'budget-exceeded', 'node A refuses past its unsettled window');
      t.eq(spentAt(), [30n, 0n], 'node A debited the window and not the refused call');
      liveBuses[0].delay = undefined;
      for (const r of held) r();
      const verdicts: string[] = [];
      for (let k = 0; k < 10; k++) {
        await settleBoth();
        verdicts.push(await call(k % 2 === 0 ? 1 : 0));
      }
      t.eq(
        verdicts,
        [...Array(7).fill('allow'), ...Array(3).fill('budget-exceeded')],
        'settled before each call, the nodes allow the 70 µJ left between them, then refuse',
      );
      const before = spentAt();
      t.eq(before[0]! + before[1]!, liveBudget, 'node: the ledgers of the two nodes add up to the channel budget exactly');
      await settleBoth();
      const audit = await auditChannel(new MemoryBus(liveStore), lid);
      t.eq(
        [audit.budgetSource, audit.budgetUj, audit.totalUj, audit.overdraftUj, audit.proofVerifies],
        ['stream', liveBudget, liveBudget, 0n, true],
        'node: the audit reads the channel grant the nodes stored and proves no overdraft',
      );
      t.eq(
        audit.lines.map((l) => l.spentUj).sort(),
        [...before].sort(),
        'node: each node’s statement claims exactly what its ledger debited',
      );
    });
  });
}
