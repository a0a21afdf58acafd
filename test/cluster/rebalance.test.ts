/**
 * Rebalancing against real nodes (spec §4.5 baseline): shards spent on two `jcp node` processes,
 * revoked over the revocation stream, closed by each node with a signed record of its spend, and
 * re-issued from what is left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Actor, actorFromSeed, seededRng, type SignedGrant, signGrant } from '../../core/index.ts';
import { channelNames, JetStreamBus } from '../../channel/index.ts';
import { LocalCluster } from '../../testkit/index.ts';
import { resourceIdOf } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { mintShardSet, parseSplit, rebalance, type ShardManifest } from '../../shards/index.ts';

const rng = seededRng('rebalance/live');
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

let cluster: LocalCluster;
let bus: JetStreamBus;
const clients: JcpClient[] = [];

beforeAll(async () => {
  cluster = await LocalCluster.start({ nodes: 2, subjectRoot: 'rebal', resources: [{ name: 'tools', trust_roots: [issuer.did] }] });
  bus = await JetStreamBus.connect(cluster.natsUrls, { names: channelNames('rebal') });
  for (const n of cluster.nodes) clients.push(await JcpClient.connect({ host: n.host, port: n.port, signer: agent }));
}, 60_000);

afterAll(async () => {
  for (const c of clients) await c.close();
  await bus?.close();
  await cluster?.stop();
});

let n = 0;
async function spend(node: number, chain: SignedGrant[], costUj: bigint) {
  const r = await clients[node]!.call({
    chain,
    action: 'call',
    payload: new TextEncoder().encode(`call ${n++}`),
    cost: { uj: costUj, provenance: 'Estimator' },
  });
  return r.decision;
}

describe('shards - rebalance over live nodes', () => {
  it('re-issues exactly what is left after the nodes close their shards, and the old shards die everywhere', async () => {
    const minted = mintShardSet([root], agent, parseSplit('a=50%,b=50%'), {
      subject: agent.did,
      points: { a: { did: cluster.nodes[0]!.steward.did }, b: { did: cluster.nodes[1]!.steward.did } },
      rng,
    });
    if (!minted.ok) throw new Error(minted.error.why);
    const m: ShardManifest = { parentChain: [root], generation: 1, consumedUj: 0n, shards: minted.value, closed: [] };
    const [a, b] = minted.value;
    for (let i = 0; i < 3; i++) expect((await spend(0, [root, a!.grant], 7_000n)).verdict).toBe('allow');
    expect((await spend(1, [root, b!.grant], 5_000n)).verdict).toBe('allow');

    const r = await rebalance({
      manifest: m,
      holder: agent,
      transport: bus,
      points: cluster.nodes.map((x) => x.steward.did),
      rng,
      timeoutMs: 20_000,
    });
    if (!r.ok) throw new Error(`${r.error.code}: ${r.error.why}`);
    expect(r.value.manifest.consumedUj).toBe(26_000n);
    expect(r.value.leftUj).toBe(74_000n);
    expect(r.value.manifest.shards.reduce((s, x) => s + x.grant.grant.budget_uj, 0n)).toBe(74_000n);

    const old = await spend(0, [root, a!.grant], 1_000n);
    expect([old.verdict, old.deny_reason]).toEqual(['deny', 'revoked']);
    const oldElsewhere = await spend(1, [root, a!.grant], 1_000n);
    expect([oldElsewhere.verdict, oldElsewhere.deny_reason]).toEqual(['deny', 'revoked']);
    const fresh = r.value.manifest.shards[0]!;
    expect((await spend(0, [root, fresh.grant], 1_000n)).verdict).toBe('allow');
  }, 60_000);
});
