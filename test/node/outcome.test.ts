/**
 * No silent charges: an allow whose endpoint cannot run the call is not charged (a
 * durable, steward-signed reversal that replay applies), and what the node measures for a call
 * is recorded beside its receipt (a measurement record) and shows in `jcp receipts attribute`
 * beside what was charged. Receipts stay JCR-1; `jcp receipts verify` checks these records too.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { decode, decodeJcrSign1, grantId, Ledger, newActor, openReceipt, readReceiptCore, receiptId } from '../../core/index.ts';
import {
  checkOutcome,
  type Endpoint,
  type EndpointBinding,
  EndpointUnavailable,
  openOutcome,
  sealOutcome,
  type ToolStatus,
} from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { freePort } from '../../testkit/index.ts';
import { cast, liveNode, mint, rid, tempDir } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob } = cast('outcome');

/** `jcp` in this process (test/support.ts). */
const cli = (argv: string[]) => runJcpInProcess(argv);

const enc = new TextEncoder();
const json = (b: Uint8Array | undefined) =>
  JSON.parse(new TextDecoder().decode(b)) as { isError?: boolean; jcp_error?: Record<string, string>; ok?: boolean };

/** An in-process endpoint: answers, or fails the way it is told to. */
class FakeEndpoint implements Endpoint {
  readonly name = 'fake';
  calls = 0;
  mode: 'ok' | 'start' | 'crash' = 'ok';
  async invoke(_tool: string, _args: Record<string, unknown>): Promise<Uint8Array> {
    this.calls++;
    if (this.mode === 'start') throw new EndpointUnavailable('fake: cannot start', 'start');
    if (this.mode === 'crash') throw new EndpointUnavailable('fake: the server went away during work', 'call');
    return enc.encode(JSON.stringify({ ok: true, content: [] }));
  }
  tools(): readonly Record<string, unknown>[] | undefined {
    return [{ name: 'work' }];
  }
  toolStatus(tool: string): ToolStatus {
    return tool === 'work' ? 'known' : 'unknown';
  }
  async ensureTools(): Promise<void> {}
  async start(): Promise<void> {}
  async close(): Promise<void> {}
}

const dirs: Array<() => void> = [];
afterAll(() => {
  for (const d of dirs) d();
});

/** A node over `dir` whose resource `svc` is served by `fake` (the config names a placeholder endpoint). */
async function nodeWith(dir: string, fake: FakeEndpoint) {
  const node = await liveNode(
    {
      resources: [
        { name: 'svc', endpoint: { kind: 'mcp-stdio', command: '/nonexistent/placeholder' } },
        { name: 'missing', endpoint: { kind: 'mcp-stdio', command: '/nonexistent/mcp-server', timeout_ms: 500 } },
      ],
      meter: { default_estimate_uj: 0, rungs: ['cpu-time'], active_watts: 5 },
    },
    {},
    dir,
  );
  await node.endpoints.get(rid('svc'))!.endpoint.close();
  (node.endpoints as Map<string, EndpointBinding>).set(rid('svc'), { name: 'svc', endpoint: fake });
  return node;
}

describe('outcome records: reversals and measurements', () => {
  test('a missing endpoint binary: allow + receipt, endpoint-unavailable, nothing charged, and replay keeps it uncharged', async () => {
    const t = tempDir('outcome-missing');
    dirs.push(t.cleanup);
    const fake = new FakeEndpoint();
    let node = await nodeWith(t.dir, fake);
    const g = mint(alice, bob, 'missing', ['work'], 1_000_000n, rng);
    let c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const first = await c.call({ chain: [g], action: 'work', payload: { n: 1 }, cost: { uj: 100_000n, provenance: 'Estimator' } });
    expect(first.decision).toEqual({ verdict: 'allow' });
    const receipt = openReceipt(first.receipt, node.did);
    expect(receipt.ok && receipt.value.cost_uj).toBe(100_000n);
    const err = json(first.result).jcp_error!;
    expect([err['code'], err['refunded_uj'], err['phase']]).toEqual(['endpoint-unavailable', '100000', 'start']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    const seq = receipt.ok ? receipt.value.seq : -1;
    // The reversal is in the log, signed by the steward, naming the receipt.
    const rec = await node.log.getReversal(seq);
    const checked = checkOutcome(rec!, { kind: 'reversal', seq }, first.receipt, node.did);
    expect(checked.ok && [checked.value.core.refund_uj, checked.value.core.phase, checked.value.core.receipt_id]).toEqual([
      100_000n,
      'start',
      receiptId(first.receipt),
    ]);
    // A re-sent request gets the same answer and is still not charged.
    const again = await c.callRequest(first.request);
    expect(again.receipt).toEqual(first.receipt);
    expect(json(again.result).jcp_error?.['code']).toBe('endpoint-unavailable');
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    await c.close();
    await node.close();

    node = await nodeWith(t.dir, fake);
    expect(node.boot.reversals).toEqual({ applied: 1, refunded_uj: '100000', bad: 0 });
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    await c.close();
    await node.close();
    const verify = await cli(['receipts', 'verify', t.dir]);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.out).outcomes).toMatchObject({ reversals: 1, refunded_uj: '100000', bad: 0 });
    const replay = JSON.parse((await cli(['receipts', 'replay', t.dir])).out) as { budgets: unknown[]; refunded_uj: string };
    expect(replay.budgets).toEqual([]);
    expect(replay.refunded_uj).toBe('100000');
  });

  test('a Streamable HTTP endpoint that refuses connections: endpoint-unavailable (phase start), nothing charged', async () => {
    const t = tempDir('outcome-http');
    dirs.push(t.cleanup);
    const port = await freePort(); // free now, and nothing listens on it
    const node = await liveNode(
      {
        resources: [{ name: 'remote', endpoint: { kind: 'mcp-http', url: `http://127.0.0.1:${port}/mcp`, timeout_ms: 1000 } }],
        meter: { default_estimate_uj: 0, rungs: ['estimator'] },
      },
      {},
      t.dir,
    );
    const g = mint(alice, bob, 'remote', ['work'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const r = await c.call({ chain: [g], action: 'work', payload: { n: 1 }, cost: { uj: 2_500n, provenance: 'Estimator' } });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect([json(r.result).jcp_error?.['code'], json(r.result).jcp_error?.['phase'], json(r.result).jcp_error?.['refunded_uj']]).toEqual([
      'endpoint-unavailable',
      'start',
      '2500',
    ]);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    await c.close();
    await node.close();
  });

  test('an endpoint that dies mid-call: not charged, the record says phase `call` (no claim that nothing ran)', async () => {
    const t = tempDir('outcome-crash');
    dirs.push(t.cleanup);
    const fake = new FakeEndpoint();
    fake.mode = 'crash';
    const node = await nodeWith(t.dir, fake);
    const root = mint(alice, bob, 'svc', ['work'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const r = await c.call({ chain: [root], action: 'work', payload: { n: 1 }, cost: { uj: 5_000n, provenance: 'Estimator' } });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect(fake.calls).toBe(1);
    expect(json(r.result).jcp_error?.['phase']).toBe('call');
    expect(node.ledger.spent(grantId(root.grant))).toBe(0n);
    const seq = openReceipt(r.receipt, node.did).ok ? readReceiptCore(decode(decodeJcrSign1(r.receipt).msg.payload)).seq : -1;
    const o = openOutcome((await node.log.getReversal(seq))!, node.did);
    expect(o.ok && [o.value.kind, o.value.outcome, o.value.phase]).toEqual(['reversal', 'endpoint-unavailable', 'call']);
    await c.close();
    await node.close();
  });

  test('a call that ran: charged as the receipt says; the meter’s figure is a measurement record, shown by attribute beside the charge', async () => {
    const t = tempDir('outcome-measure');
    dirs.push(t.cleanup);
    const fake = new FakeEndpoint();
    const node = await nodeWith(t.dir, fake);
    const g = mint(alice, bob, 'svc', ['work'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const ran = await c.call({ chain: [g], action: 'work', payload: { n: 1 }, cost: { uj: 7_000n, provenance: 'Estimator' } });
    expect(json(ran.result).ok).toBe(true);
    fake.mode = 'start';
    await c.call({ chain: [g], action: 'work', payload: { n: 2 }, cost: { uj: 3_000n, provenance: 'Estimator' } });
    expect(node.ledger.spent(grantId(g.grant))).toBe(7_000n);
    await c.close();
    await node.close();

    const attr = JSON.parse((await cli(['receipts', 'attribute', t.dir])).out) as {
      outcomes: { measurements: number; reversals: number; bad: number };
      attribution: Array<Record<string, unknown>>;
    };
    expect(attr.outcomes).toEqual({ measurements: 1, reversals: 1, bad: 0 });
    const row = attr.attribution.find((a) => a['grant_id'] === grantId(g.grant))!;
    expect([row['allowed'], row['uj'], row['charged_uj'], row['refunded_uj'], row['reversals'], row['metered_calls']]).toEqual([
      2,
      '10000',
      '7000',
      '3000',
      1,
      2,
    ]);
    expect(Object.keys(row['metered_by_provenance'] as object)).toEqual(['ModelBased']);
    expect(BigInt(row['metered_uj'] as string)).toBeGreaterThanOrEqual(0n);
  });

  test('Ledger.credit: all or nothing, never below zero', () => {
    const l = new Ledger();
    l.debit(['a', 'b'], 10n);
    l.debit(['b'], 5n);
    expect(l.credit(['a', 'b'], 11n)).toBe(false);
    expect([l.spent('a'), l.spent('b')]).toEqual([10n, 15n]);
    expect(l.credit(['a', 'b'], 10n)).toBe(true);
    expect([l.spent('a'), l.spent('b'), l.size]).toEqual([0n, 5n, 1]);
  });

  test('a forged reversal (another key) or one that refunds more than was charged is reported and never applied', async () => {
    const t = tempDir('outcome-forged');
    dirs.push(t.cleanup);
    const fake = new FakeEndpoint();
    let node = await nodeWith(t.dir, fake);
    const g = mint(alice, bob, 'svc', ['work'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const calls = [];
    for (let n = 0; n < 2; n++)
      calls.push(await c.call({ chain: [g], action: 'work', payload: { n }, cost: { uj: 4_000n, provenance: 'Estimator' } }));
    await c.close();
    expect(node.ledger.spent(grantId(g.grant))).toBe(8_000n);
    const [a, b] = calls.map((x) => ({
      seq: readReceiptCore(decode(decodeJcrSign1(x.receipt).msg.payload)).seq,
      id: receiptId(x.receipt),
    })) as [{ seq: number; id: string }, { seq: number; id: string }];
    const forger = newActor(rng);
    const base = {
      jcp_outcome: 'jcp-node/1' as const,
      kind: 'reversal' as const,
      outcome: 'endpoint-unavailable',
      phase: 'start' as const,
      at: 1,
    };
    await node.log.putOutcome(
      'reversal',
      a.seq,
      sealOutcome({ ...base, receipt_seq: a.seq, receipt_id: a.id, refund_uj: 4_000n, steward: forger.did }, forger),
    );
    await node.log.putOutcome(
      'reversal',
      b.seq,
      sealOutcome({ ...base, receipt_seq: b.seq, receipt_id: b.id, refund_uj: 5_000n, steward: node.did }, node.steward),
    );
    await node.close();

    node = await nodeWith(t.dir, fake);
    expect(node.boot.reversals).toEqual({ applied: 0, refunded_uj: '0', bad: 2 });
    expect(node.ledger.spent(grantId(g.grant))).toBe(8_000n);
    await node.close();
    const verify = await cli(['receipts', 'verify', t.dir]);
    expect(verify.code).toBe(1);
    const codes = (JSON.parse(verify.out).outcomes.rejected as Array<{ code: string }>).map((x) => x.code);
    expect(codes).toEqual(['wrong-steward', 'outcome-bad-refund']);
  });
});
