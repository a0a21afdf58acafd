/**
 * A revocation accepted by one node of a cluster reaches every node (spec §4.3):
 * two live nodes on one NATS (a `nats-server` of the test's own, removed afterwards); the
 * revocation is sent over jcp/1 to node A only, and node B denies `revoked` for the whole subtree
 * afterwards. The wait is event-driven: B's revocation store says when it took the revocation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { attenuate, grantId, signRevocation } from '../../core/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, quiet, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob, carol } = cast('cluster-revocation');

type Live = Awaited<ReturnType<typeof liveNode>>;

/** Rejects with `what` when `p` has not settled before the test's own deadline (a failure message, not a timing assertion). */
function orFail<T>(p: Promise<T>, what: string, ms = 20_000): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(what)), ms).unref())]);
}

describe('cluster: a revocation sent to one node is enforced by every node', () => {
  let nats: NatsServer;
  const dir = tempDir('cluster-rev');
  const hooks: ClusterHooks[] = [];
  const nodes: Live[] = [];

  beforeAll(async () => {
    nats = await NatsServer.start();
    const root = `revt${process.pid}x${Date.now().toString(36)}`;
    for (let i = 0; i < 2; i++) {
      const h = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root, revocation_catch_up_ms: 10_000 }), quiet);
      hooks.push(h);
      const n = await liveNode({}, { budgetPolicy: h.budgetPolicy, revocationFeeds: [h.revocationFeed] });
      h.attach(n.steward, n.ledger);
      nodes.push(n);
    }
  }, 60_000);

  afterAll(async () => {
    for (const n of nodes) await n.cleanup().catch(() => undefined);
    for (const h of hooks) await h.close().catch(() => undefined);
    await nats?.dispose();
    dir.cleanup();
  });

  test('revoke sent to node A only: node B denies the root and a chain through it `revoked`', async () => {
    const [a, b] = nodes as [Live, Live];
    const root = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 1_000n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error(child.error.why);
    const atB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const carolAtB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: carol });
    // B has seen the grant and allows it before the revocation.
    expect((await atB.call({ chain: [root], action: 'read', payload: { n: 1 } })).decision).toEqual({ verdict: 'allow' });
    expect((await carolAtB.call({ chain: [root, child.value], action: 'read', payload: { n: 1 } })).decision).toEqual({ verdict: 'allow' });

    const id = grantId(root.grant);
    const arrivedAtB = b.revocations.taken(id);
    const atA = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: alice });
    expect(await atA.revoke(signRevocation(id, alice, rng(16)))).toBe(id);
    await orFail(arrivedAtB, 'node B never took the revocation that node A accepted');

    expect((await atB.call({ chain: [root], action: 'read', payload: { n: 2 } })).decision).toEqual({
      verdict: 'deny',
      deny_reason: 'revoked',
    });
    expect((await carolAtB.call({ chain: [root, child.value], action: 'read', payload: { n: 2 } })).decision).toEqual({
      verdict: 'deny',
      deny_reason: 'revoked',
    });
    expect(b.revocations.has(id)).toBe(true);
    await Promise.all([atA.close(), atB.close(), carolAtB.close()]);
  }, 60_000);
});
