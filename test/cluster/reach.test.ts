/**
 * Revocation reach time (testkit/reach.ts): two clustered nodes on one NATS, revocations sent to
 * node A, reach measured on both — B through its `/metrics`, as a launcher's node processes are.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { grantId } from '../../core/index.ts';
import { signRevocation } from '../../core/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { feedReachTarget, measureRevocationReach, metricsReachTarget, quantileMs } from '../../testkit/index.ts';
import { cast, liveNode, mint, quiet } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('cluster-reach');

describe('cluster: revocation reach time', () => {
  let nats: NatsServer;
  const hooks: ClusterHooks[] = [];
  const nodes: Array<Awaited<ReturnType<typeof liveNode>>> = [];

  beforeAll(async () => {
    nats = await NatsServer.start();
    const root = `reach${process.pid}x${Date.now().toString(36)}`;
    for (const region of ['r-a', 'r-b']) {
      const h = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root, revocation_catch_up_ms: 10_000 }), quiet, { region });
      const n = await liveNode({ metrics: '127.0.0.1:0' }, h.nodeOptions);
      h.attach(n.steward, n.ledger);
      h.observe(n.metrics.registry);
      hooks.push(h);
      nodes.push(n);
    }
  }, 60_000);

  afterAll(async () => {
    for (const n of nodes) await n.cleanup().catch(() => undefined);
    await hooks[0]?.bus.deleteStreams().catch(() => undefined);
    for (const h of hooks) await h.close().catch(() => undefined);
    await nats?.dispose();
  });

  test('every sample reaches both nodes; p50 ≤ p99, per region and per node', async () => {
    const [a, b] = nodes as [Awaited<ReturnType<typeof liveNode>>, Awaited<ReturnType<typeof liveNode>>];
    const atA = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: alice });
    const report = await measureRevocationReach({
      targets: [feedReachTarget('a', 'r-a', hooks[0]!.feed), metricsReachTarget('b', 'r-b', b.metricsPort!)],
      revoke: async () => {
        const g = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
        await atA.revoke(signRevocation(grantId(g.grant), alice, rng(16)), g.grant);
      },
      samples: 5,
      timeoutMs: 20_000,
    });
    await atA.close();
    expect(report.rawMs).toHaveLength(5);
    for (const r of report.rawMs) expect(Object.keys(r).sort()).toEqual(['a', 'b']);
    expect(report.everyNode.samples).toBe(5);
    expect(Number.isFinite(report.everyNode.p50Ms)).toBe(true);
    expect(report.everyNode.p50Ms).toBeGreaterThanOrEqual(0);
    expect(report.everyNode.p99Ms).toBeGreaterThanOrEqual(report.everyNode.p50Ms);
    expect(Object.keys(report.byRegion).sort()).toEqual(['r-a', 'r-b']);
    expect(report.everyNode.maxMs).toBe(Math.max(...report.rawMs.map((r) => Math.max(r['a']!, r['b']!))));
    expect(hooks[1]!.feed.counts.taken).toBe(5);
  }, 90_000);

  test('quantiles by nearest rank', () => {
    expect(quantileMs([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(quantileMs([5, 1, 3, 2, 4], 0.99)).toBe(5);
    expect(quantileMs([], 0.5)).toBeNaN();
  });
});
