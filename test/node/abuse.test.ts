/**
 * Abuse limits per peer address (node/ratelimit.ts): requests that fail before a
 * decision and bad-signature denies take a peer's tokens; past the limit the peer gets
 * `rate-limited` with no receipt (counted in `/metrics`), while callers from other addresses
 * are answered as before. Log growth on `/metrics` and `/healthz`: size, rate, size alarm.
 */
import { describe, expect, test } from 'vitest';
import { decodeWireMessage, encodeWireRequest, frameMessage } from '../../core/index.ts';
import { EVICT_SCAN, NodeErrorCodes, PeerLimiter } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, RawConn, request, tempFolders } from './fixtures.ts';

const { rng, alice, bob, mallory } = cast('abuse');
const folder = tempFolders('abuse');

/** Sends `frames` one at a time on `c`; the reply of each: an error code, or the deny reason / allow. */
async function outcomes(c: RawConn, frames: Uint8Array[]): Promise<string[]> {
  const out: string[] = [];
  for (const f of frames) {
    c.write(f);
    const m = decodeWireMessage(await c.next());
    out.push(m.kind === 'error' ? m.error.code : m.kind === 'response' ? (m.response.decision.deny_reason ?? 'allow') : m.kind);
  }
  return out;
}

const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));

describe('abuse limits per peer address', () => {
  test('failures before a decision empty a peer’s bucket: then rate-limited, no receipt; other peers are answered as before', async () => {
    let clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 3, refill_per_s: 1 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const bad = await RawConn.open(node.port, '127.0.0.2');
    expect(await outcomes(bad, [garbage, garbage, garbage, garbage, garbage])).toEqual([
      'cbor-malformed',
      'cbor-malformed',
      'cbor-malformed',
      NodeErrorCodes.RATE_LIMITED,
      NodeErrorCodes.RATE_LIMITED,
    ]);
    // Even a good request from that address waits for tokens; it is not decided.
    const good = encodeWireRequest(request(bob, [g], { now: clock, payload: new TextEncoder().encode('{"a":1}') }));
    expect(await outcomes(bad, [frameMessage(good)])).toEqual([NodeErrorCodes.RATE_LIMITED]);
    expect(node.enforcer.nextSeq).toBe(0);
    // Another address, another connection: decided as usual, and its failures are its own.
    const other = await RawConn.open(node.port, '127.0.0.1');
    expect(await outcomes(other, [garbage, frameMessage(good)])).toEqual(['cbor-malformed', 'allow']);
    expect(node.enforcer.nextSeq).toBe(1);
    const text = await node.metrics.registry.getSingleMetricAsString('jcp_rate_limited_total');
    expect(text).toContain('jcp_rate_limited_total 3');
    // Tokens come back with time: one per second here.
    clock += 1;
    expect(await outcomes(bad, [garbage, garbage])).toEqual(['cbor-malformed', NodeErrorCodes.RATE_LIMITED]);
    bad.destroy();
    other.destroy();
    await node.close();
  });

  test('a failed message costs one token per 64 KiB of it: a large junk frame empties the bucket as many small ones would', async () => {
    const node = await liveNode({ abuse: { burst: 8, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } }, {}, folder());
    const bad = await RawConn.open(node.port, '127.0.0.5');
    // 200 KiB of junk (4 tokens), twice: the bucket of 8 is empty, and the next message is refused.
    const big = frameMessage(new Uint8Array(200 * 1024).fill(0xa0));
    expect(await outcomes(bad, [big, big, garbage])).toEqual(['cbor-malformed', 'cbor-malformed', NodeErrorCodes.RATE_LIMITED]);
    bad.destroy();
    await node.close();
  });

  test('bad-signature denies are sealed until the limit, then the peer is refused without a receipt', async () => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 2, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const forged = (i: number) =>
      frameMessage(
        encodeWireRequest(request(mallory, [g], { caller: bob.did, now: clock, payload: new TextEncoder().encode(`{"i":${i}}`) })),
      );
    const m = await RawConn.open(node.port, '127.0.0.3');
    expect(await outcomes(m, [forged(1), forged(2), forged(3), forged(4)])).toEqual([
      'bad-signature',
      'bad-signature',
      NodeErrorCodes.RATE_LIMITED,
      NodeErrorCodes.RATE_LIMITED,
    ]);
    expect(node.enforcer.nextSeq).toBe(2);
    // bob, calling from another address, is not slowed: allowed at once.
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const r = await c.call({ chain: [g], action: 'read', payload: { ok: 1 }, now: clock });
    expect(r.decision.verdict).toBe('allow');
    expect(node.enforcer.nextSeq).toBe(3);
    await c.close();
    m.destroy();
    await node.close();
  });

  test.each([0, 2])('pipelined bad-signature requests seal no more denies than the burst (workers %i; break18 F2)', async (workers) => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { workers, abuse: { burst: 2, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const forged = (i: number) =>
      frameMessage(
        encodeWireRequest(request(mallory, [g], { caller: bob.did, now: clock, payload: new TextEncoder().encode(`{"p":${i}}`) })),
      );
    const m = await RawConn.open(node.port, '127.0.0.5');
    const n = 24;
    // All in one write: every one of them arrives before the first signature check is done.
    m.write(Buffer.concat(Array.from({ length: n }, (_, i) => forged(i))));
    const got: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = decodeWireMessage(await m.next());
      got.push(r.kind === 'error' ? r.error.code : r.kind === 'response' ? (r.response.decision.deny_reason ?? 'allow') : r.kind);
    }
    expect(got.filter((x) => x === 'bad-signature')).toHaveLength(2);
    expect(got.filter((x) => x === NodeErrorCodes.RATE_LIMITED)).toHaveLength(n - 2);
    expect(node.enforcer.nextSeq).toBe(2);
    m.destroy();
    await node.close();
  });

  test('failures pipelined in one write are answered no more often than the burst; the rest get rate-limited', async () => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 3, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const skewed = (i: number) =>
      frameMessage(encodeWireRequest(request(bob, [g], { now: clock - 10_000, payload: new TextEncoder().encode(`{"s":${i}}`) })));
    const n = 40;
    for (const [peer, frame, code] of [
      ['127.0.0.11', () => garbage, 'cbor-malformed'],
      ['127.0.0.12', skewed, NodeErrorCodes.CLOCK_SKEW],
    ] as const) {
      const m = await RawConn.open(node.port, peer);
      // All in one write: every frame is handed to the node before the first one has failed.
      m.write(Buffer.concat(Array.from({ length: n }, (_, i) => frame(i))));
      const got: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = decodeWireMessage(await m.next());
        got.push(r.kind === 'error' ? r.error.code : r.kind);
      }
      expect(got.filter((x) => x === code)).toHaveLength(3);
      expect(got.filter((x) => x === NodeErrorCodes.RATE_LIMITED)).toHaveLength(n - 3);
      m.destroy();
    }
    expect(node.enforcer.nextSeq).toBe(0);
    await node.close();
  });

  test('one address holding every connection slot does not keep another address out (break18 F10)', async () => {
    const node = await liveNode({ max_connections: 3, snapshot: { every_receipts: 0, every_s: 0 } }, {}, folder());
    const hog = [
      await RawConn.open(node.port, '127.0.0.6'),
      await RawConn.open(node.port, '127.0.0.6'),
      await RawConn.open(node.port, '127.0.0.6'),
    ];
    const open = async () => await node.metrics.registry.getSingleMetricAsString('jcp_connections');
    for (let i = 0; i < 50 && !(await open()).includes('jcp_connections 3'); i++) await new Promise((r) => setTimeout(r, 10));
    expect(await open()).toContain('jcp_connections 3');
    // Another address: one of the hog's idle connections makes room, and this one is answered.
    const other = await RawConn.open(node.port, '127.0.0.7');
    expect(await outcomes(other, [garbage])).toEqual(['cbor-malformed']);
    const told = await hog[0]!.next();
    expect(decodeWireMessage(told)).toMatchObject({ kind: 'error', error: { code: NodeErrorCodes.BUSY } });
    // The hog itself gets no more: busy, as before.
    const more = await RawConn.open(node.port, '127.0.0.6');
    expect(decodeWireMessage(await more.next())).toMatchObject({ kind: 'error', error: { code: NodeErrorCodes.BUSY } });
    for (const c of [...hog, other, more]) c.destroy();
    await node.close();
  });

  test('one address holding every slot with half-sent frames does not keep another address out', async () => {
    const node = await liveNode({ max_connections: 3, snapshot: { every_receipts: 0, every_s: 0 } }, {}, folder());
    const hog = [
      await RawConn.open(node.port, '127.0.0.8'),
      await RawConn.open(node.port, '127.0.0.8'),
      await RawConn.open(node.port, '127.0.0.8'),
    ];
    // Each hog connection sends a header declaring 64 KiB and 100 bytes of it: a partial frame,
    // within the read timeout, so not idle. None of them is owed a reply.
    const partial = new Uint8Array(4 + 100);
    new DataView(partial.buffer).setUint32(0, 65_536);
    for (const c of hog) c.write(partial);
    const open = async () => await node.metrics.registry.getSingleMetricAsString('jcp_connections');
    for (let i = 0; i < 50 && !(await open()).includes('jcp_connections 3'); i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    const other = await RawConn.open(node.port, '127.0.0.9');
    expect(await outcomes(other, [garbage])).toEqual(['cbor-malformed']);
    const told = await Promise.any(hog.map((c) => c.next()));
    expect(decodeWireMessage(told)).toMatchObject({ kind: 'error', error: { code: NodeErrorCodes.BUSY } });
    for (const c of [...hog, other]) c.destroy();
    await node.close();
  });

  test('abuse.burst 0 turns the limit off; a full table of peers drops the ones that behave first', async () => {
    const node = await liveNode({ abuse: { burst: 0 }, snapshot: { every_receipts: 0, every_s: 0 } }, {}, folder());
    const bad = await RawConn.open(node.port, '127.0.0.4');
    expect(
      await outcomes(
        bad,
        Array.from({ length: 6 }, () => garbage),
      ),
    ).toEqual(Array.from({ length: 6 }, () => 'cbor-malformed'));
    bad.destroy();
    await node.close();
    let t = 0;
    const l = new PeerLimiter({ burst: 2, refillPerS: 1, maxPeers: 2 }, () => t);
    l.charge('a');
    l.charge('a');
    l.charge('b');
    expect(l.admits('a')).toBe(false);
    t = 1; // b is full again, a has one token
    l.charge('c');
    expect(l.peers).toBe(2);
    expect(l.admits('a')).toBe(true);
    l.charge('a');
    expect(l.admits('a')).toBe(false);
    // Charges past the last token are a debt refill pays first (read-timeouts past the last token still cost).
    l.charge('a');
    l.charge('a');
    t = 3; // two tokens back: the debt of two paid, none to spend
    expect(l.admits('a')).toBe(false);
    t = 4;
    expect(l.admits('a')).toBe(true);
  });
});

describe('the peer table when full', () => {
  test('a new peer in a full table of drained buckets costs a bounded step, not a scan of every peer; the least recently charged goes', () => {
    const t = 1000;
    const maxPeers = 65_536;
    const l = new PeerLimiter({ burst: 200, refillPerS: 20, maxPeers }, () => t);
    for (let i = 0; i < maxPeers; i++) l.charge(`p${i}`); // every bucket short of full: none may simply be dropped
    for (let i = 0; i < 200; i++) l.charge(`q${i}`);
    expect(l.peers).toBe(maxPeers);
    // A scan of the whole table per new peer looked at all 65,536 buckets each time (~14 ms each).
    expect(l.evictLooks).toBe(200 * EVICT_SCAN);
    // The oldest charged peers made room; a peer charged since keeps its bucket.
    const m = new PeerLimiter({ burst: 2, refillPerS: 0, maxPeers: 3 }, () => t);
    for (const p of ['a', 'b', 'c']) {
      m.charge(p);
      m.charge(p);
    }
    m.charge('a'); // a is the most recently charged now
    m.charge('d'); // full: b (the least recently charged) goes
    expect(m.peers).toBe(3);
    expect(m.admits('a')).toBe(false);
    expect(m.admits('c')).toBe(false);
    expect(m.admits('b')).toBe(true); // a fresh bucket if it comes back
  });
});

describe('log growth is visible', () => {
  test('/healthz and /metrics report the log size, receipts per second and the size alarm', async () => {
    const node = await liveNode(
      { metrics: '127.0.0.1:0', log_size_alarm_bytes: 1, snapshot: { every_receipts: 0, every_s: 0 } },
      {},
      folder(),
    );
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    await c.call({ chain: [g], action: 'read', payload: { x: 1 } });
    await c.close();
    const h = (await (await fetch(`http://127.0.0.1:${node.metricsPort}/healthz`)).json()) as Record<string, unknown>;
    expect(h['ok']).toBe(true);
    expect(h['log_bytes']).toBe(node.log.sizeBytes());
    expect(h['log_bytes'] as number).toBeGreaterThan(0);
    expect(h['log_size_alarm']).toBe(true);
    expect(typeof h['receipts_per_s']).toBe('number');
    const text = await (await fetch(`http://127.0.0.1:${node.metricsPort}/metrics`)).text();
    expect(text).toMatch(/^jcp_log_bytes [1-9]\d*$/m);
    expect(text).toMatch(/^jcp_log_size_alarm 1$/m);
    expect(text).toMatch(/^jcp_log_receipts_per_second \d/m);
    await node.close();
    const quietNode = await liveNode({ metrics: '127.0.0.1:0', snapshot: { every_receipts: 0, every_s: 0 } }, {}, folder());
    const q = (await (await fetch(`http://127.0.0.1:${quietNode.metricsPort}/healthz`)).json()) as Record<string, unknown>;
    expect(q['log_size_alarm']).toBe(false);
    await quietNode.close();
  });
});
