/**
 * Bad input over a live socket (spec §11: a receiver MUST reject over-long and non-canonical
 * messages): at least 100,000 generated and mutated frames — no crash, no debit, every one gets an
 * error code or a deny; streams with lying length prefixes are answered and closed; 1,000 idle
 * (or trickling) connections do not stop a busy one.
 */
import { encode as cborgEncode } from 'cborg';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bytesEqual, decodeWireMessage, encodeWireRequest, frameMessage, grantId, wireRequestToCbor } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, RawConn, request } from './fixtures.ts';

const { rng, alice, bob, carol } = cast('fuzz');
const MUTATED = 80_000;
const GENERATED = 20_000;

/** xorshift32: a fast seeded stream for mutations. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

function mutate(base: Uint8Array, next: () => number): Uint8Array {
  let b = new Uint8Array(base);
  const n = 1 + (next() % 4);
  for (let k = 0; k < n; k++) {
    const at = next() % Math.max(1, b.length);
    switch (next() % 6) {
      case 0:
        b[at]! ^= 1 << (next() % 8);
        break;
      case 1:
        b[at] = next() & 0xff;
        break;
      case 2: {
        const c = new Uint8Array(b.length + 1);
        c.set(b.subarray(0, at));
        c[at] = next() & 0xff;
        c.set(b.subarray(at), at + 1);
        b = c;
        break;
      }
      case 3:
        b = new Uint8Array([...b.subarray(0, at), ...b.subarray(at + 1)]);
        break;
      case 4:
        b = b.slice(0, at);
        break;
      default: {
        const len = 1 + (next() % 16);
        b = new Uint8Array([...b.subarray(0, at), ...b.subarray(at, at + len), ...b.subarray(at)]);
      }
    }
  }
  return b;
}

describe('bad input over a live socket', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  beforeAll(async () => {
    // The per-peer abuse limiter is off here: every stream comes from 127.0.0.1, and this suite
    // checks the framing and decoding, not the limiter (test/node/abuse.test.ts does).
    node = await liveNode({
      frame_cap: 65_536,
      read_timeout_ms: 300,
      max_connections: 2_000,
      max_pending_per_connection: 256,
      abuse: { burst: 0 },
    });
  });
  afterAll(async () => node.cleanup());

  test(`${MUTATED + GENERATED} generated and mutated frames: no crash, no debit, each gets an error code or a deny`, async () => {
    const root = mint(alice, bob, 'tools', ['read', 'write'], 1_000_000n, rng);
    const other = mint(alice, carol, 'tools', ['read'], 1_000_000n, rng);
    const bases = [
      request(bob, [root], { costUj: 5n, payload: new TextEncoder().encode('{"path":"/tmp/x"}') }),
      request(bob, [root], { action: 'write', costUj: 7n }),
      request(carol, [other], { costUj: 1n }),
    ].map(encodeWireRequest);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    for (const b of bases) expect(decodeWireMessage(await c.roundTrip(b)).kind).toBe('response');
    await c.close();
    const spentBefore = [...node.ledger.entries()];
    const seqBefore = node.enforcer.nextSeq;

    const next = prng(0x5eed);
    const bodies: Uint8Array[] = [];
    for (let i = 0; i < MUTATED; i++) {
      const m = mutate(bases[i % bases.length]!, next);
      if (bases.some((b) => bytesEqual(b, m))) continue;
      bodies.push(m);
    }
    const shaped = fc.record({
      frame: fc.oneof(fc.jsonValue(), fc.constant(wireRequestToCbor(request(bob, [root]))['frame'])),
      chain: fc.array(fc.jsonValue(), { maxLength: 3 }),
      caller: fc.oneof(fc.string(), fc.constant(bob.did)),
      cost: fc.oneof(fc.jsonValue(), fc.record({ uj: fc.nat(), provenance: fc.constantFrom('Estimator', 'HwShunt', 'x') })),
      now: fc.oneof(fc.nat(), fc.double()),
      signature: fc.uint8Array({ minLength: 0, maxLength: 80 }),
    });
    const generated = fc.sample(fc.oneof(fc.jsonValue(), shaped, fc.uint8Array({ maxLength: 200 })), { seed: 42, numRuns: GENERATED });
    for (const v of generated) {
      let body: Uint8Array;
      try {
        body = v instanceof Uint8Array ? v : cborgEncode(v);
      } catch {
        body = new TextEncoder().encode(JSON.stringify(v) ?? 'x');
      }
      bodies.push(body.length === 0 ? Uint8Array.of(0xff) : body);
    }
    expect(bodies.length).toBeGreaterThanOrEqual(99_000);

    const conns = await Promise.all(Array.from({ length: 8 }, () => RawConn.open(node.port)));
    const outcomes = new Map<string, number>();
    const deniedBodies = new Set<string>();
    const WINDOW = 128;
    await Promise.all(
      conns.map(async (conn, ci) => {
        const mine = bodies.filter((_, i) => i % conns.length === ci);
        let sent = 0;
        let got = 0;
        while (got < mine.length) {
          while (sent < mine.length && sent - got < WINDOW) conn.write(frameMessage(mine[sent++]!));
          const raw = await conn.next(30_000);
          // Every 50th reply is decoded in full; the rest are told apart by their bytes: an error
          // reply is the 1-entry map {"error": ...}, a decided one ends with its decision map.
          let key: string;
          if (got % 50 === 0) {
            const reply = decodeWireMessage(raw);
            key =
              reply.kind === 'error'
                ? `error:${reply.error.code}`
                : reply.kind === 'response'
                  ? reply.response.decision.verdict
                  : reply.kind;
          } else if (raw[0] === 0xa1 && raw[1] === 0x65) key = 'error:*';
          else key = Buffer.from(raw.subarray(Math.max(0, raw.length - 24))).includes('allow') ? 'allow' : 'deny';
          if (key === 'deny' || key === 'allow') deniedBodies.add(Buffer.from(mine[got]!).toString('base64'));
          got++;
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        }
        conn.destroy();
      }),
    );
    const total = [...outcomes.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(bodies.length);
    expect(outcomes.get('allow') ?? 0).toBe(0);
    for (const k of outcomes.keys()) expect(k === 'deny' || k.startsWith('error:')).toBe(true);
    expect(outcomes.get('deny') ?? 0).toBeGreaterThan(0);
    expect([...node.ledger.entries()]).toEqual(spentBefore);
    // Each distinct denied body was sealed once; a repeat got its original deny back (§11).
    expect(node.enforcer.nextSeq).toBe(seqBefore + deniedBodies.size);
  }, 180_000);

  test('lying length prefixes: each stream gets an error reply (or is closed) and the node keeps serving', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
    const body = encodeWireRequest(request(bob, [g]));
    const next = prng(7);
    let answered = 0;
    const streams = Array.from({ length: 200 }, (_, i) => {
      const head = new Uint8Array(4);
      const declared = i % 4 === 0 ? 0xffff_ffff - (next() % 1000) : i % 4 === 1 ? 65_537 + (next() % 1e6) : next() % (body.length * 2);
      new DataView(head.buffer).setUint32(0, declared);
      return new Uint8Array([...head, ...body]);
    });
    await Promise.all(
      streams.map(async (s) => {
        const conn = await RawConn.open(node.port);
        conn.write(s);
        try {
          const reply = decodeWireMessage(await conn.next(5_000));
          if (reply.kind === 'error' || reply.kind === 'response') answered++;
        } catch {
          // closed without a reply: allowed only for streams that never completed a frame
        }
        expect(await conn.waitClosed(5_000)).toBe(true);
        conn.destroy();
      }),
    );
    expect(answered).toBeGreaterThan(150);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    expect((await c.call({ chain: [g], action: 'read', payload: { after: 'lies' } })).decision.verdict).toBe('allow');
    await c.close();
  }, 60_000);

  test('a declared length of 4 GiB − 1 is refused before any buffer is allocated', async () => {
    const before = process.memoryUsage().arrayBuffers;
    const conn = await RawConn.open(node.port);
    conn.write(Uint8Array.of(0xff, 0xff, 0xff, 0xff));
    const reply = decodeWireMessage(await conn.next());
    expect(reply.kind === 'error' && reply.error.code).toBe('frame-too-large');
    expect((process.memoryUsage().arrayBuffers - before) / 2 ** 20).toBeLessThan(64);
    conn.destroy();
  });

  test('1,000 idle and trickling connections do not stop a busy one', async () => {
    const idle = await Promise.all(Array.from({ length: 1_000 }, () => RawConn.open(node.port)));
    // Half of them hold a partial frame open (a slow-loris), the rest send nothing at all.
    idle.forEach((c, i) => {
      if (i % 2 === 0) c.write(Uint8Array.of(0, 0));
    });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const busy = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        busy.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 1n, provenance: 'Estimator' } }),
      ),
    );
    expect(results.every((r) => r.decision.verdict === 'allow')).toBe(true);
    expect(node.ledger.spent(grantId(g.grant))).toBe(300n);
    // The trickling ones are cut off by the read timeout; the silent ones stay until idle timeout.
    for (let i = 0; i < idle.length; i += 2) expect(await idle[i]!.waitClosed(5_000)).toBe(true);
    expect(idle.filter((c, i) => i % 2 === 1 && !c.closed).length).toBe(500);
    await busy.close();
    for (const c of idle) c.destroy();
  }, 60_000);
});
