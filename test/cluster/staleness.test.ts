/**
 * Revocation staleness (spec §4.3 across a partition; channel/freshness.ts): a clustered node cut
 * off from NATS by a proxy (harness/proxy.ts) for longer than `revocation_staleness_s` stops
 * allowing — Deny(revoked) with a signed receipt, nothing debited — says why on `/healthz`,
 * `/readyz` and `/metrics`, and allows again by itself once the link heals.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { grantId } from '../../core/index.ts';
import { openReceipt } from '../../core/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { TcpProxy } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, quiet } from '../node/fixtures.ts';
import { sample, scrape } from './prom.ts';

const { rng, alice, bob } = cast('cluster-staleness');

/** Resolves once `pred()` holds; rejects with `what` after `ms` (a failure message, not a timing assertion). */
async function until(pred: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function health(port: number, path: '/healthz' | '/readyz'): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5_000) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

describe('cluster: revocation staleness', () => {
  let nats: NatsServer;
  let proxy: TcpProxy;
  let hooks: ClusterHooks;
  let node: Awaited<ReturnType<typeof liveNode>>;

  beforeAll(async () => {
    nats = await NatsServer.start();
    proxy = await TcpProxy.start(nats.port);
    const root = `stale${process.pid}x${Date.now().toString(36)}`;
    hooks = new ClusterHooks(proxy.natsUrl, readClusterConfig({ subject_root: root, revocation_catch_up_ms: 10_000 }), quiet, {
      revocationStalenessS: 1,
      region: 'r-a',
    });
    node = await liveNode({ metrics: '127.0.0.1:0' }, hooks.nodeOptions);
    hooks.attach(node.steward, node.ledger);
    hooks.observe(node.metrics.registry);
  }, 60_000);

  afterAll(async () => {
    await node?.cleanup().catch(() => undefined);
    if (proxy?.isCut) proxy.heal();
    // Remove the test's streams from the NATS server before it goes (it is the test's own anyway).
    await hooks?.bus.deleteStreams().catch(() => undefined);
    await hooks?.close().catch(() => undefined);
    await proxy?.close();
    await nats?.dispose();
  });

  test('cut off past the limit: allow → deny revoked (receipt, nothing debited), not ready; healed: allow again', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const id = grantId(g.grant);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const mport = node.metricsPort!;

    await until(() => !hooks.freshness().stale, 'the node never confirmed the revocation stream');
    const first = await c.call({ chain: [g], action: 'read', payload: { n: 1 }, cost: { uj: 1_000n, provenance: 'Estimator' } });
    expect(first.decision).toEqual({ verdict: 'allow' });
    expect(node.ledger.spent(id)).toBe(1_000n);
    expect((await health(mport, '/readyz')).status).toBe(200);
    let m = await scrape(mport);
    expect(sample(m, 'jcp_revocation_stale', { region: 'r-a' })).toBe(0);
    expect(sample(m, 'jcp_revocation_staleness_seconds', { region: 'r-a' })).toBeLessThan(1);
    expect(sample(m, 'jcp_revocation_staleness_limit_seconds', { region: 'r-a' })).toBe(1);
    expect(sample(m, 'jcp_nats_connected', { region: 'r-a' })).toBe(1);

    proxy.cut();
    await until(() => hooks.freshness().stale, 'the cut-off node never went stale');
    const refused = [];
    for (let i = 0; i < 3; i++) {
      refused.push(await c.call({ chain: [g], action: 'read', payload: { n: 10 + i }, cost: { uj: 1_000n, provenance: 'Estimator' } }));
    }
    for (const r of refused) {
      expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
      const core = openReceipt(r.receipt, node.did as never);
      expect(core.ok && core.value.verdict === 'deny' && core.value.deny_reason === 'revoked').toBe(true);
    }
    // Nothing debited for the refused calls.
    expect(node.ledger.spent(id)).toBe(1_000n);
    const ready = await health(mport, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body['ready']).toBe(false);
    expect((ready.body['not_ready'] as Array<{ code: string }>).map((x) => x.code)).toEqual(['revocation-stale']);
    const alive = await health(mport, '/healthz');
    expect(alive.status).toBe(200);
    expect(alive.body['ok']).toBe(true);
    expect((alive.body['cluster'] as { revocations: { stale: boolean } }).revocations.stale).toBe(true);
    m = await scrape(mport);
    expect(sample(m, 'jcp_revocation_stale', { region: 'r-a' })).toBe(1);
    expect(sample(m, 'jcp_revocation_stale_denies_total', { region: 'r-a' })).toBe(3);
    expect(sample(m, 'jcp_revocation_staleness_seconds', { region: 'r-a' })).toBeGreaterThan(1);
    expect(sample(m, 'jcp_decisions_total', { verdict: 'deny', reason: 'revoked' })).toBe(3);

    proxy.heal();
    await until(() => !hooks.freshness().stale, 'the healed node never confirmed the revocation stream again', 30_000);
    const again = await c.call({ chain: [g], action: 'read', payload: { n: 99 }, cost: { uj: 1_000n, provenance: 'Estimator' } });
    expect(again.decision).toEqual({ verdict: 'allow' });
    expect(node.ledger.spent(id)).toBe(2_000n);
    expect((await health(mport, '/readyz')).status).toBe(200);
    m = await scrape(mport);
    expect(sample(m, 'jcp_revocation_stale', { region: 'r-a' })).toBe(0);
    expect(sample(m, 'jcp_debited_joules_total')).toBeCloseTo(0.002, 9);
    expect(sample(m, 'jcp_debited_uj_total')).toBe(2_000);
    await c.close();
  }, 90_000);
});
