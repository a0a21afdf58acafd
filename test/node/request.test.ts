/**
 * The node's request path over a live loopback socket (spec §11, §7, §8; docs/design.md "Decisions and the ledger"):
 * every error code, sealed decisions, pricing, and idempotent replay.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  concat,
  decode,
  decodeWireMessage,
  encode,
  encodeWireMessage,
  encodeWireRequest,
  frameMessage,
  grantId,
  openReceipt,
  receiptId,
  requestIdOf,
  signRevocation,
  wireRequestToCbor,
} from '../../core/index.ts';
import { createMeter, readMeterConfig } from '../../meter/index.ts';
import { NodeErrorCodes, type RunningNode } from '../../node/index.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import type { NodeMeter } from '../../node/index.ts';
import { cast, liveNode, mint, RawConn, request } from './fixtures.ts';

const { rng, alice, bob, mallory } = cast('request');

type Live = RunningNode & { cleanup: () => Promise<void> };

/** Sends `frame` on a fresh connection; the error reply's code and keys, and (when asked) whether the node then closed it. */
async function errorOf(port: number, frame: Uint8Array, expectClose = false): Promise<{ code: string; closed: boolean; keys: string[] }> {
  const c = await RawConn.open(port);
  c.write(frame);
  const body = await c.next();
  const raw = decode(body) as Record<string, unknown>;
  const m = decodeWireMessage(body);
  if (m.kind !== 'error') throw new Error(`expected an error reply, got ${m.kind}`);
  const closed = expectClose ? await c.waitClosed(5_000) : c.closed;
  c.destroy();
  return { code: m.error.code, closed, keys: Object.keys(raw) };
}

describe('request path: error replies (no decision, no receipt)', () => {
  let node: Live;
  beforeAll(async () => {
    node = await liveNode({
      read_timeout_ms: 200,
      frame_cap: 4096,
      max_connections: 50,
      resources: [{ name: 'tools' }, { name: 'mcp', endpoint: { kind: 'mcp-stdio', command: '/nonexistent/mcp-server', timeout_ms: 500 } }],
    });
  });
  afterAll(async () => node.cleanup());

  test('frame-too-large / a declared length over the cap is refused and the connection closed', async () => {
    const head = new Uint8Array(4);
    new DataView(head.buffer).setUint32(0, 4097);
    const r = await errorOf(node.port, head, true);
    expect(r).toEqual({ code: 'frame-too-large', closed: true, keys: ['error'] });
  });

  test('frame-too-large / a declared length of 4 GiB − 1 is refused without allocating it', async () => {
    const before = process.memoryUsage().arrayBuffers;
    const r = await errorOf(node.port, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 1, 2, 3));
    const grownMiB = (process.memoryUsage().arrayBuffers - before) / 2 ** 20;
    expect(r.code).toBe('frame-too-large');
    expect(grownMiB).toBeLessThan(64);
  });

  test('cbor-malformed / bytes that are not CBOR', async () => {
    expect((await errorOf(node.port, frameMessage(Uint8Array.of(0xff, 0x00)))).code).toBe('cbor-malformed');
  });

  test('cbor-non-canonical / a map with unsorted keys', async () => {
    // {"b": 1, "a": 1} with keys out of canonical order.
    const body = Uint8Array.of(0xa2, 0x61, 0x62, 0x01, 0x61, 0x61, 0x01);
    expect((await errorOf(node.port, frameMessage(body))).code).toBe('cbor-non-canonical');
  });

  test('cbor-forbidden-type / a bool where a JCP message must be', async () => {
    expect((await errorOf(node.port, frameMessage(Uint8Array.of(0xa1, 0x61, 0x61, 0xf5)))).code).toBe('cbor-forbidden-type');
  });

  test('schema / a map that is no jcp/1 message', async () => {
    expect((await errorOf(node.port, frameMessage(encode({ hello: 'node' })))).code).toBe('schema');
  });

  test('schema / a request without its cost', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const o = wireRequestToCbor(request(bob, [g]));
    delete o['cost'];
    expect((await errorOf(node.port, frameMessage(encode(o)))).code).toBe('schema');
  });

  test('did-invalid / a caller that is not a did:key', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const o = { ...wireRequestToCbor(request(bob, [g])), caller: 'did:key:zNotAKey' };
    expect((await errorOf(node.port, frameMessage(encode(o)))).code).toBe('did-invalid');
  });

  test('bad-length / a 63-byte caller signature', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const o = { ...wireRequestToCbor(request(bob, [g])), signature: new Uint8Array(63) };
    expect((await errorOf(node.port, frameMessage(encode(o)))).code).toBe('bad-length');
  });

  test('clock-skew / a request 31 s in the past is refused (max_skew_s 30)', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const req = request(bob, [g], { now: Math.floor(Date.now() / 1000) - 31 });
    expect((await errorOf(node.port, frameMessage(encodeWireRequest(req)))).code).toBe(NodeErrorCodes.CLOCK_SKEW);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
  });

  test('unknown-message / a response sent to a node', async () => {
    const body = encodeWireMessage({ kind: 'revoked', grant_id: grantId(mint(alice, bob, 'tools', ['x'], 1n, rng).grant) });
    expect((await errorOf(node.port, frameMessage(body))).code).toBe(NodeErrorCodes.UNKNOWN_MESSAGE);
  });

  test('read-timeout / a partial frame not completed in time closes the connection', async () => {
    const r = await errorOf(node.port, Uint8Array.of(0, 0, 1, 0, 0xa1), true);
    expect(r).toEqual({ code: NodeErrorCodes.READ_TIMEOUT, closed: true, keys: ['error'] });
  });

  test('payload-invalid / an endpoint takes a JSON object of tool arguments', async () => {
    const g = mint(alice, bob, 'mcp', ['read'], 1000n, rng);
    const req = request(bob, [g], { payload: new TextEncoder().encode('[1,2]') });
    expect((await errorOf(node.port, frameMessage(encodeWireRequest(req)))).code).toBe(NodeErrorCodes.PAYLOAD_INVALID);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
  });

  test('unknown-resource / a resource the node does not serve: an error reply, no receipt, nothing debited', async () => {
    const g = mint(alice, bob, 'not-served-here', ['read'], 1_000_000n, rng);
    const seq = node.enforcer.nextSeq;
    const req = request(bob, [g], { cost: { uj: 100_000n, provenance: 'Estimator' } });
    const r = await errorOf(node.port, frameMessage(encodeWireRequest(req)));
    expect(r).toEqual({ code: NodeErrorCodes.UNKNOWN_RESOURCE, closed: false, keys: ['error'] });
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    expect(node.enforcer.nextSeq).toBe(seq);
    expect(await node.log.getReceipt(seq)).toBeUndefined();
  });

  test('revocation-refused / a revocation signed by someone other than the issuer', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    await c.call({ chain: [g], action: 'read' });
    const forged = signRevocation(grantId(g.grant), mallory, rng(16));
    const e = await c.revoke(forged).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WireErrorReply);
    expect((e as WireErrorReply).code).toBe(NodeErrorCodes.REVOCATION_REFUSED);
    expect((await c.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'allow' });
    await c.close();
  });

  test('an allow on a resource whose endpoint cannot start: the decision and receipt stand, the result says why, nothing is charged', async () => {
    const g = mint(alice, bob, 'mcp', ['read'], 1000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const r = await c.call({ chain: [g], action: 'read', payload: { path: 'x' }, cost: { uj: 7n, provenance: 'Estimator' } });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect(openReceipt(r.receipt, node.did).ok).toBe(true);
    const result = JSON.parse(new TextDecoder().decode(r.result)) as { isError: boolean; jcp_error: { code: string } };
    expect(result.isError).toBe(true);
    expect(result.jcp_error.code).toBe('endpoint-unavailable');
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    await c.close();
  });
});

describe('request path: provenance on a node with a model-based meter', () => {
  test('a HwShunt claim is sealed ModelBased (no hardware reading exists before the call runs); ModelBased and Estimator claims stand', async () => {
    const node = await liveNode({ meter: { default_estimate_uj: 0, rungs: ['cpu-time'], active_watts: 10 } });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      expect(node.probe?.provenance).toBe('ModelBased');
      const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
      const sealed = async (cost: { uj: bigint; provenance: 'HwShunt' | 'ModelBased' | 'Estimator'; measured?: bigint }, n: number) => {
        const r = await c.call({ chain: [g], action: 'read', payload: { n }, cost });
        const core = openReceipt(r.receipt, node.did);
        return core.ok ? core.value.energy_provenance : core.error.code;
      };
      expect(await sealed({ uj: 5n, provenance: 'HwShunt', measured: 5n }, 1)).toBe('ModelBased');
      expect(await sealed({ uj: 5n, provenance: 'ModelBased' }, 2)).toBe('ModelBased');
      expect(await sealed({ uj: 5n, provenance: 'Estimator' }, 3)).toBe('Estimator');
    } finally {
      await c.close();
      await node.cleanup();
    }
  });
});

describe('request path: provenance on a node whose meter reads hardware', () => {
  test('a HwShunt claim is still sealed ModelBased: the charge is fixed before the call runs, so it is no hardware reading', async () => {
    const base = createMeter(readMeterConfig({ default_estimate_uj: 0, rungs: ['estimator'] }));
    const hw: NodeMeter = {
      probe: async () => ({ ...(await base.probe()), rung: 'rapl', provenance: 'HwShunt' }),
      measure: (a, fn) => base.measure(a, fn),
      estimateUj: (a) => base.estimateUj(a),
    };
    const node = await liveNode({}, { meter: hw });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
      const r = await c.call({ chain: [g], action: 'read', cost: { uj: 5n, provenance: 'HwShunt', measured: 5n } });
      const core = openReceipt(r.receipt, node.did);
      expect(core.ok && core.value.energy_provenance).toBe('ModelBased');
    } finally {
      await c.close();
      await node.cleanup();
    }
  });
});

describe('request path: busy', () => {
  test('busy / connections beyond max_connections are refused', async () => {
    const node = await liveNode({ max_connections: 2 });
    const a = await RawConn.open(node.port);
    const b = await RawConn.open(node.port);
    await new Promise((r) => setTimeout(r, 50));
    const r = await errorOf(node.port, new Uint8Array(0), true);
    expect(r).toEqual({ code: NodeErrorCodes.BUSY, closed: true, keys: ['error'] });
    a.destroy();
    b.destroy();
    await node.cleanup();
  });

  test('a connection closed with an error reply, its client holding its half open, frees its slot at once (break18 F11)', async () => {
    const node = await liveNode({ max_connections: 1, frame_cap: 4096 });
    const { connect } = await import('node:net');
    const held = connect({ host: '127.0.0.1', port: node.port, allowHalfOpen: true });
    held.on('error', () => undefined);
    held.on('data', () => undefined);
    await new Promise((r) => held.once('connect', r));
    const head = new Uint8Array(4);
    new DataView(head.buffer).setUint32(0, 4097);
    held.write(head);
    const gauge = async () => await node.metrics.registry.getSingleMetricAsString('jcp_connections');
    for (let i = 0; i < 100 && !(await gauge()).includes('jcp_connections 0'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await gauge()).toContain('jcp_connections 0');
    // The slot is free: the next caller is served, not told busy.
    const r = await errorOf(node.port, head, true);
    expect(r.code).toBe('frame-too-large');
    held.destroy();
    await node.cleanup();
  }, 15_000);

  test('a refused client that keeps its half of the connection open holds no socket: the node still stops at once (break18 F11)', async () => {
    const node = await liveNode({ max_connections: 1 });
    const a = await RawConn.open(node.port);
    await new Promise((r) => setTimeout(r, 50));
    const { connect } = await import('node:net');
    const held = connect({ host: '127.0.0.1', port: node.port, allowHalfOpen: true });
    held.on('error', () => undefined);
    let got = 0;
    held.on('data', (d: Buffer) => {
      got += d.length;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(got).toBeGreaterThan(0); // the busy reply
    const t0 = Date.now();
    a.destroy();
    await node.close();
    expect(Date.now() - t0).toBeLessThan(2_500);
    held.destroy();
    await node.cleanup();
  }, 15_000);
});

describe('request path: decisions sealed over the socket', () => {
  let node: Live;
  let client: JcpClient;
  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'tools' }, { name: 'locked', trust_roots: [alice.did] }],
      meter: { default_estimate_uj: 0, estimates_uj: { expensive: 500 }, rungs: ['estimator'] },
    });
    client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  });
  afterAll(async () => {
    await client.close();
    await node.cleanup();
  });

  test('allow / the receipt verifies under the steward and links to the one before it', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const a = await client.call({ chain: [g], action: 'read', payload: { n: 1 }, cost: { uj: 10n, provenance: 'Estimator' } });
    const b = await client.call({ chain: [g], action: 'read', payload: { n: 2 }, cost: { uj: 10n, provenance: 'Estimator' } });
    const ca = openReceipt(a.receipt, node.did);
    const cb = openReceipt(b.receipt, node.did);
    expect(ca.ok && cb.ok).toBe(true);
    if (!ca.ok || !cb.ok) return;
    expect(cb.value.seq).toBe(ca.value.seq + 1);
    expect(cb.value.prev).toBe(receiptId(a.receipt));
    expect(ca.value.request_id).toBe(requestIdOf(a.request));
    expect(cb.value.budget_remaining_uj).toBe(980n);
    expect(node.ledger.spent(grantId(g.grant))).toBe(20n);
  });

  test('deny / bad-signature: an impersonated caller is sealed as a deny and debits nothing', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const forged = request(mallory, [g], { caller: bob.did });
    const r = await client.callRequest(forged);
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'bad-signature' });
    const core = openReceipt(r.receipt, node.did);
    expect(core.ok && core.value.verdict === 'deny' && core.value.deny_reason).toBe('bad-signature');
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
  });

  test('deny / wrong-subject: mallory signs as herself under bob’s grant', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const r = await client.callRequest(request(mallory, [g]));
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'wrong-subject' });
  });

  test('deny / budget-exceeded: over by 1 µJ, and the denied call is not debited', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    expect((await client.call({ chain: [g], action: 'read', cost: { uj: 60n, provenance: 'Estimator' } })).decision.verdict).toBe('allow');
    const r = await client.call({ chain: [g], action: 'read', cost: { uj: 41n, provenance: 'Estimator' } });
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect(node.ledger.spent(grantId(g.grant))).toBe(60n);
  });

  test('deny / untrusted-root: a valid grant from an unlisted root on a configured resource', async () => {
    const g = mint(mallory, bob, 'locked', ['read'], 100n, rng);
    expect((await client.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'deny', deny_reason: 'untrusted-root' });
    const ok = mint(alice, bob, 'locked', ['read'], 100n, rng);
    expect((await client.call({ chain: [ok], action: 'read' })).decision).toEqual({ verdict: 'allow' });
  });

  test('deny / untrusted-control: a data frame never exercises a capability', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    const r = await client.call({ chain: [g], action: 'read', trust: 'data' });
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'untrusted-control' });
  });

  test('pricing / a call is priced at no less than the node’s estimate for its action', async () => {
    const g = mint(alice, bob, 'tools', ['expensive'], 10_000n, rng);
    const r = await client.call({ chain: [g], action: 'expensive', cost: { uj: 1n, provenance: 'ModelBased' } });
    const core = openReceipt(r.receipt, node.did);
    expect(core.ok && [core.value.cost_uj, core.value.energy_provenance]).toEqual([500n, 'Estimator']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(500n);
    // A claim above the estimate is charged as claimed, but this node's meter is the estimator:
    // it cannot vouch for a model-based figure, so the receipt says Estimator (§5).
    const high = await client.call({ chain: [g], action: 'expensive', cost: { uj: 900n, provenance: 'ModelBased' } });
    const hc = openReceipt(high.receipt, node.did);
    expect(hc.ok && [hc.value.cost_uj, hc.value.energy_provenance]).toEqual([900n, 'Estimator']);
  });

  test('provenance / a caller’s HwShunt claim with a measured figure is never sealed as HwShunt (§5)', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const r = await client.call({ chain: [g], action: 'read', cost: { uj: 700n, provenance: 'HwShunt', measured: 700n } });
    expect(r.decision).toEqual({ verdict: 'allow' });
    const core = openReceipt(r.receipt, node.did);
    expect(core.ok && [core.value.cost_uj, core.value.energy_provenance]).toEqual([700n, 'Estimator']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(700n);
  });

  test('idempotent replay / a re-sent request gets its original response and is not debited twice', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const req = request(bob, [g], { costUj: 100n });
    const first = await client.callRequest(req);
    const seq = node.enforcer.nextSeq;
    const again = await client.callRequest(req);
    expect(again.receipt).toEqual(first.receipt);
    expect(again.decision).toEqual(first.decision);
    expect(node.enforcer.nextSeq).toBe(seq);
    expect(node.ledger.spent(grantId(g.grant))).toBe(100n);
  });

  test('idempotent replay / two copies in flight at once are decided once', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const req = request(bob, [g], { costUj: 100n });
    const seq = node.enforcer.nextSeq;
    const [a, b] = await Promise.all([client.callRequest(req), client.callRequest(req)]);
    expect(a.receipt).toEqual(b.receipt);
    expect(node.enforcer.nextSeq).toBe(seq + 1);
    expect(node.ledger.spent(grantId(g.grant))).toBe(100n);
  });

  test('idempotent replay / a denied request replays as the same deny', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 10n, rng);
    const req = request(bob, [g], { costUj: 100n });
    const a = await client.callRequest(req);
    const b = await client.callRequest(req);
    expect(a.decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect(b.receipt).toEqual(a.receipt);
  });

  test('pipelining / replies come back in request order on one connection', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const reqs = Array.from({ length: 50 }, (_, i) => request(bob, [g], { costUj: BigInt(i + 1) }));
    const c = await RawConn.open(node.port);
    c.write(concat(...reqs.map((r) => frameMessage(encodeWireRequest(r)))));
    for (const r of reqs) {
      const m = decodeWireMessage(await c.next());
      expect(
        m.kind === 'response' &&
          openReceipt(m.response.receipt).ok &&
          (openReceipt(m.response.receipt) as { value: { request_id: string } }).value.request_id,
      ).toBe(requestIdOf(r));
    }
    c.destroy();
  });
});

describe('request path: caller signatures on worker threads', () => {
  test('with workers, allows, impersonations and replays decide as on one thread, and boot replay runs on the workers', async () => {
    const { tempDir } = await import('./fixtures.ts');
    const t = tempDir('workers');
    const a = await liveNode({ workers: 1 }, {}, t.dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const g = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
    const oks = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 5n, provenance: 'Estimator' } }),
      ),
    );
    expect(oks.every((r) => r.decision.verdict === 'allow')).toBe(true);
    const forged = await c.callRequest(request(mallory, [g], { caller: bob.did }));
    expect(forged.decision).toEqual({ verdict: 'deny', deny_reason: 'bad-signature' });
    expect((await c.callRequest(oks[0]!.request)).receipt).toEqual(oks[0]!.receipt);
    expect(a.ledger.spent(grantId(g.grant))).toBe(200n);
    await c.close();
    await a.close();
    const b = await liveNode({ workers: 1 }, {}, t.dir);
    expect(b.boot).toMatchObject({ receipts: 41, good: 41, bad: 0, breaks: 0 });
    expect(b.ledger.spent(grantId(g.grant))).toBe(200n);
    await b.close();
    t.cleanup();
  });

  test('a signature worker that exits is logged and replaced; calls are decided all along, none denied bad-signature', async () => {
    const { catchWorkers } = await import('./fixtures.ts');
    const { pino } = await import('pino');
    const lines: Array<{ msg: string; worker?: number; code?: number; replaced?: boolean }> = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as (typeof lines)[number]) });
    // The node's signature workers, caught as they get their first checks (this stands in for a crash).
    const { workers, restore } = catchWorkers('verify');
    const a = await liveNode({ workers: 1 }, { logger });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
      const call = (i: number) => c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 1n, provenance: 'Estimator' } });
      expect((await call(0)).decision.verdict).toBe('allow');
      expect(workers).toHaveLength(1);
      // Calls in flight as the worker ends: checked on the main thread instead, each allowed.
      const during = Array.from({ length: 20 }, (_, i) => call(1 + i));
      await workers[0]!.terminate();
      expect((await Promise.all(during)).map((r) => r.decision.verdict)).toEqual(Array(20).fill('allow'));
      expect(lines).toEqual([
        expect.objectContaining({
          worker: 0,
          code: 1,
          replaced: true,
          msg: expect.stringMatching(/^signature worker exited; a new one took its place/),
        }),
      ]);
      // The new worker takes the next checks.
      expect((await call(21)).decision.verdict).toBe('allow');
      expect(workers).toHaveLength(2);
      expect(a.ledger.spent(grantId(g.grant))).toBe(22n);
    } finally {
      restore();
      await c.close();
      await a.cleanup();
    }
  });
});
