/** Observability: Prometheus `/metrics` and `/healthz` on the metrics port. */
import { describe, expect, test } from 'vitest';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint } from './fixtures.ts';

const { rng, alice, bob } = cast('metrics');

describe('metrics', () => {
  test('/metrics counts decisions by verdict and reason, debits, batches and the meter rung; /healthz reports the steward', async () => {
    const node = await liveNode({ metrics: '127.0.0.1:0' });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    await c.call({ chain: [g], action: 'read', cost: { uj: 60n, provenance: 'Estimator' } });
    await c.call({ chain: [g], action: 'read', payload: { again: 1 }, cost: { uj: 60n, provenance: 'Estimator' } });
    const text = await (await fetch(`http://127.0.0.1:${node.metricsPort}/metrics`)).text();
    expect(text).toMatch(/jcp_decisions_total\{verdict="allow",reason="none"\} 1/);
    expect(text).toMatch(/jcp_decisions_total\{verdict="deny",reason="budget-exceeded"\} 1/);
    expect(text).toMatch(/jcp_debited_uj_total 60/);
    expect(text).toMatch(/jcp_log_batch_receipts_count \d+/);
    expect(text).toMatch(/jcp_decision_seconds_bucket/);
    expect(text).toMatch(/jcp_replay_seconds \d/);
    expect(text).toMatch(/jcp_meter_rung\{rung="estimator",provenance="Estimator"\} 1/);
    const health = await fetch(`http://127.0.0.1:${node.metricsPort}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, steward: node.did, seq: 2 });
    await c.close();
    await node.cleanup();
  });
});
