/**
 * Shards across regions (spec §4.5 baseline; docs/regions.md): on a 2-region launch (40 ms RTT,
 * the assignment and revocation streams in region a, the holder working from region b) a set is
 * assigned to one node per region, each shard is spent only at its own point, and a rebalance
 * re-issues exactly what is left (no µJ created) with the old shards dead in both regions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Actor, actorFromSeed, DenyReasons, type SignedGrant, seededRng, signGrant } from '../../core/index.ts';
import { channelNames, JetStreamBus } from '../../channel/index.ts';
import { JcpClient } from '../../client/index.ts';
import { resourceIdOf } from '../../node/index.ts';
import { assignShards, mintShardSet, parseSplit, rebalance, ShardAssignmentStream, type ShardManifest } from '../../shards/index.ts';
import { type RegionCluster, startRegions } from '../../testkit/index.ts';

const rng = seededRng('regions/shards');
const actor = (): Actor => actorFromSeed(rng(32));
const issuer = actor();
const agent = actor();
const root: SignedGrant = signGrant(
  {
    issuer: issuer.did,
    subject: agent.did,
    capability: { resource: resourceIdOf('tools'), actions: ['call'] },
    budget_uj: 100_000n,
    expiry: 0,
    nonce: rng(16),
  },
  issuer,
);

let rc: RegionCluster;
let bus: JetStreamBus;
let stream: ShardAssignmentStream;
const clients: JcpClient[] = [];

beforeAll(async () => {
  rc = await startRegions({
    regions: 2,
    nodesPerRegion: 1,
    serversPerRegion: 1,
    rttMs: 40,
    resources: [{ name: 'tools', trust_roots: [issuer.did] }],
  });
  // The holder works from region b: every assignment, ack read and revocation crosses to a.
  bus = await JetStreamBus.connect(rc.region('b').natsUrls, { names: channelNames('jcp') });
  stream = new ShardAssignmentStream(bus.connection!, { root: 'jcp', replicas: 1 });
  for (const r of rc.regions)
    for (const n of r.nodes) clients.push(await JcpClient.connect({ host: '127.0.0.1', port: n.port, signer: agent }));
}, 60_000);

afterAll(async () => {
  for (const c of clients) await c.close();
  await bus?.close();
  await rc?.stop();
});

let n = 0;
async function spend(node: number, chain: SignedGrant[], costUj: bigint) {
  const r = await clients[node]!.call({
    chain,
    action: 'call',
    payload: new TextEncoder().encode(`region call ${n++}`),
    cost: { uj: costUj, provenance: 'Estimator' },
  });
  return r.decision;
}

describe('regions - shards across regions', () => {
  it('assigned across regions, each shard spent only at its point, rebalanced with no µJ created', async () => {
    const points = rc.regions.flatMap((r) => r.nodes.map((x) => x.steward.did));
    const [pa, pb] = points;
    const minted = mintShardSet([root], agent, parseSplit('a=50%,b=50%'), {
      subject: agent.did,
      points: { a: { did: pa! }, b: { did: pb! } },
      rng,
    });
    if (!minted.ok) throw new Error(minted.error.why);
    const m: ShardManifest = { parentChain: [root], generation: 1, consumedUj: 0n, shards: minted.value, closed: [] };
    const assigned = await assignShards({ manifest: m, holder: agent, transport: stream, points, timeoutMs: 20_000 });
    if (!assigned.ok) throw new Error(`${assigned.error.code}: ${assigned.error.why}`);
    const [a, b] = minted.value;

    // Shard a belongs to a1 (region a), shard b to b1 (region b): each is refused at the other.
    for (let i = 0; i < 3; i++) expect((await spend(0, [root, a!.grant], 7_000n)).verdict).toBe('allow');
    expect((await spend(1, [root, a!.grant], 1_000n)).deny_reason).toBe(DenyReasons.BUDGET_EXCEEDED);
    expect((await spend(1, [root, b!.grant], 5_000n)).verdict).toBe('allow');
    expect((await spend(0, [root, b!.grant], 1_000n)).deny_reason).toBe(DenyReasons.BUDGET_EXCEEDED);

    const r = await rebalance({ manifest: m, holder: agent, transport: bus, points, rng, timeoutMs: 20_000 });
    if (!r.ok) throw new Error(`${r.error.code}: ${r.error.why}`);
    expect(r.value.manifest.consumedUj).toBe(26_000n);
    expect(r.value.leftUj).toBe(74_000n);
    expect(r.value.manifest.shards.reduce((s, x) => s + x.grant.grant.budget_uj, 0n)).toBe(74_000n);
    const again = await assignShards({ manifest: r.value.manifest, holder: agent, transport: stream, points, timeoutMs: 20_000 });
    if (!again.ok) throw new Error(`${again.error.code}: ${again.error.why}`);

    // The old shards are dead in both regions (the revocation crossed from a to b's node).
    for (const node of [0, 1]) expect((await spend(node, [root, a!.grant], 1_000n)).deny_reason).toBe(DenyReasons.REVOKED);
    const [a2, b2] = r.value.manifest.shards;
    expect((await spend(0, [root, a2!.grant], 1_000n)).verdict).toBe('allow');
    expect((await spend(1, [root, a2!.grant], 1_000n)).deny_reason).toBe(DenyReasons.BUDGET_EXCEEDED);
    expect((await spend(1, [root, b2!.grant], 1_000n)).verdict).toBe('allow');
    expect((await spend(0, [root, b2!.grant], 1_000n)).deny_reason).toBe(DenyReasons.BUDGET_EXCEEDED);
  }, 90_000);
});
