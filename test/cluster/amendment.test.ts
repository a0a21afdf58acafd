/**
 * An amendment sent to one node of a cluster takes effect at every node (§4.7; docs/steering.md
 * "Across a cluster"): two live nodes on one NATS (a `nats-server` of the test's own, removed
 * afterwards), the amendment sent over jcp/1 to node A only. Node B, which saw part of the run's
 * spend, refuses the steered grant (`revoked`) and caps the continuation at what the steered
 * grant had left AT B. The wait is event-driven: B's amendment store says when it applied it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { amend, contentId, grantId, issueContinuation, makeCheckpoint } from '../../core/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, quiet, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('cluster-amendment');

type Live = Awaited<ReturnType<typeof liveNode>>;

/** Rejects with `what` when `p` has not settled before the test's own deadline (a failure message, not a timing assertion). */
function orFail<T>(p: Promise<T>, what: string, ms = 20_000): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(what)), ms).unref())]);
}

describe('cluster: an amendment sent to one node is enforced by every node', () => {
  let nats: NatsServer;
  const dir = tempDir('cluster-amd');
  const hooks: ClusterHooks[] = [];
  const nodes: Live[] = [];

  beforeAll(async () => {
    nats = await NatsServer.start();
    const root = `amdt${process.pid}x${Date.now().toString(36)}`;
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

  test('amend sent to node A only: node B refuses the steered grant and caps the continuation by its own ledger', async () => {
    const [a, b] = nodes as [Live, Live];
    const run = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
    const atA = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const atB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const spend = (c: JcpClient, chain: typeof run, uj: bigint, n: number) =>
      c.call({ chain: [chain], action: 'read', cost: { uj, provenance: 'Estimator' }, payload: { n } });
    expect((await spend(atA, run, 100n, 1)).decision).toEqual({ verdict: 'allow' });
    expect((await spend(atB, run, 700n, 2)).decision).toEqual({ verdict: 'allow' });

    const cp = makeCheckpoint(run, contentId({ step: 1 }), bob, rng(16));
    if (!cp.ok) throw new Error(cp.error.why);
    const sa = amend(cp.value, run, { budget_uj: 1_000n, nonce: rng(16) }, alice);
    if (!sa.ok) throw new Error(sa.error.why);
    const cont = issueContinuation(run, cp.value, sa.value, alice);
    if (!cont.ok) throw new Error(cont.error.why);

    const id = grantId(run.grant);
    const arrivedAtB = b.amendments.applied(id);
    const issuerAtA = await JcpClient.connect({ host: '127.0.0.1', port: a.port });
    const atAnswer = await issuerAtA.amend(run, cp.value, sa.value);
    expect([atAnswer.steered_spent_uj, atAnswer.budget_uj]).toEqual([100n, 900n]);
    await orFail(arrivedAtB, 'node B never applied the amendment that node A admitted');

    expect((await spend(atB, run, 1n, 3)).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
    expect((await spend(atA, run, 1n, 4)).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
    // At B the steered grant had 300 µJ left, so its continuation may spend 300 there, not 1,000.
    expect((await spend(atB, cont.value, 301n, 5)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect((await spend(atB, cont.value, 300n, 6)).decision).toEqual({ verdict: 'allow' });
    expect(b.ledger.spent(id)).toBe(700n);
    await Promise.all([atA.close(), atB.close(), issuerAtA.close()]);
  }, 60_000);
});

describe('cluster: the continuation of a budget-channel grant shares what the channel had left (break12 F8)', () => {
  let nats: NatsServer;
  const hooks: ClusterHooks[] = [];
  const nodes: Live[] = [];
  const run = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
  const id = grantId(run.grant);

  beforeAll(async () => {
    nats = await NatsServer.start();
    const root = `amdc${process.pid}x${Date.now().toString(36)}`;
    for (let i = 0; i < 2; i++) {
      const h = new ClusterHooks(
        nats.url,
        readClusterConfig({
          subject_root: root,
          revocation_catch_up_ms: 10_000,
          settle_interval_ms: 60_000,
          channels: [{ grant_id: id, window_uj: 1_000 }],
        }),
        quiet,
      );
      hooks.push(h);
      const n = await liveNode({}, { budgetPolicy: h.budgetPolicy, revocationFeeds: [h.revocationFeed] });
      h.attach(n.steward, n.ledger, n.amendments);
      nodes.push(n);
    }
    for (const h of hooks) expect(await h.channels.ready(20_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    for (const n of nodes) await n.cleanup().catch(() => undefined);
    for (const h of hooks) await h.close().catch(() => undefined);
    await nats?.dispose();
  });

  test('900 of 1,000 µJ spent over two nodes, amended "to 1,000": the continuation gets 100 µJ across the cluster, not 100 + 550 + 550', async () => {
    const [a, b] = nodes as [Live, Live];
    const atA = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const atB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const spend = (c: JcpClient, chain: typeof run, uj: bigint, n: number) =>
      c.call({ chain: [chain], action: 'read', cost: { uj, provenance: 'Estimator' }, payload: { n } });
    const settle = async () => {
      for (const h of hooks) await h.channels.settleAll();
      for (const h of hooks) await h.channels.settleAll();
    };
    expect((await spend(atA, run, 450n, 1)).decision).toEqual({ verdict: 'allow' });
    expect((await spend(atB, run, 450n, 2)).decision).toEqual({ verdict: 'allow' });
    await settle();

    const cp = makeCheckpoint(run, contentId({ step: 1 }), bob, rng(16));
    if (!cp.ok) throw new Error(cp.error.why);
    const sa = amend(cp.value, run, { budget_uj: 1_000n, nonce: rng(16) }, alice);
    if (!sa.ok) throw new Error(sa.error.why);
    const cont = issueContinuation(run, cp.value, sa.value, alice);
    if (!cont.ok) throw new Error(cont.error.why);
    const arrivedAtB = b.amendments.applied(id);
    const issuerAtA = await JcpClient.connect({ host: '127.0.0.1', port: a.port });
    await issuerAtA.amend(run, cp.value, sa.value);
    await orFail(arrivedAtB, 'node B never applied the amendment that node A admitted');

    // The channel had 100 µJ left: more than that is refused at either node.
    expect((await spend(atA, cont.value, 101n, 3)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect((await spend(atA, cont.value, 60n, 4)).decision).toEqual({ verdict: 'allow' });
    await settle();
    expect((await spend(atB, cont.value, 41n, 5)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect((await spend(atB, cont.value, 40n, 6)).decision).toEqual({ verdict: 'allow' });
    await settle();
    expect((await spend(atA, cont.value, 1n, 7)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect((await spend(atB, cont.value, 1n, 8)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    await Promise.all([atA.close(), atB.close(), issuerAtA.close()]);
  }, 60_000);
});
