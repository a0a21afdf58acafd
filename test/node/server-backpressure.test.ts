/**
 * What one peer that sends and never reads can make the jcp/1 server hold (node/server.ts):
 * messages pipelined in one write are taken `maxPending` at a time (the rest of the bytes wait,
 * the connection paused), replies held unsent are bounded per connection and in total
 * (`unsentBudgetBytes`), and a connection that keeps sending while its address is rate-limited is
 * closed, as are that address's new connections.
 */
import pino from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { decodeWireMessage, frameMessage } from '../../core/index.ts';
import { JcpServer, NodeErrorCodes, NodeMetrics, REFUSED_BEFORE_CLOSE, UNSENT_CEILING_FACTOR } from '../../node/index.ts';
import { liveNode, RawConn, tempFolders } from './fixtures.ts';

const quiet = pino({ level: 'silent' });
const folder = tempFolders('server-backpressure');
const limits = { frameCap: 1 << 20, readTimeoutMs: 10_000, idleTimeoutMs: 60_000, maxConnections: 64 };

/** Waits until `f()` has returned the same value for `quietMs` (at most `ms`); returns it. */
async function settled(f: () => number, quietMs = 300, ms = 10_000): Promise<number> {
  const end = Date.now() + ms;
  let last = f();
  let since = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 25));
    const now = f();
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) break;
  }
  return last;
}

describe('jcp/1 server: a peer that sends and does not read', () => {
  const servers: JcpServer[] = [];
  const conns: RawConn[] = [];
  afterEach(async () => {
    for (const c of conns.splice(0)) c.destroy();
    for (const s of servers.splice(0)) await s.close(100);
  });

  /**
   * A listening server whose handler answers each message with its own body once released:
   * `handled()` counts the messages handed to it, `releasing()` releases them every 2 ms until
   * its stop function is called.
   */
  async function held(l: { maxPending: number; maxInFlight?: number }) {
    let handled = 0;
    const owed: Array<() => void> = [];
    const server = new JcpServer(
      (body) => {
        handled++;
        return new Promise((resolve) => owed.push(() => resolve(body)));
      },
      { ...limits, ...l },
      new NodeMetrics(),
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const releasing = () => {
      const pump = setInterval(() => {
        for (const release of owed.splice(0)) release();
      }, 2);
      return () => clearInterval(pump);
    };
    return { server, port, handled: () => handled, releasing };
  }

  test('2,000 messages in one write are taken maxPending at a time; all answered, in order, once replies go out', async () => {
    const { port, handled, releasing } = await held({ maxPending: 8 });
    const c = await RawConn.open(port);
    conns.push(c);
    const n = 2000;
    const frames = Array.from({ length: n }, (_, i) => frameMessage(Uint8Array.of(i >> 8, i & 0xff)));
    c.write(Buffer.concat(frames));
    // One 16 KiB write: before, every message of it was handed to the handler at once.
    expect(await settled(handled)).toBe(8);
    // Replies go out: the rest is taken, in order, a turn at a time.
    const stop = releasing();
    const got: number[] = [];
    try {
      while (got.length < n) {
        const b = await c.next();
        got.push((b[0]! << 8) | b[1]!);
      }
    } finally {
      stop();
    }
    expect(got).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(handled()).toBe(n);
  });

  test('a peer pipelining 20,000 messages gets turns: another connection is answered long before that backlog is done', async () => {
    let first = 0;
    let firstAtSecond = -1;
    const server = new JcpServer(
      async (body) => {
        if (body[0] === 1) first++;
        else firstAtSecond = first;
        return body;
      },
      { ...limits, maxPending: 256 },
      new NodeMetrics(),
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const a = await RawConn.open(port, '127.0.0.30');
    const b = await RawConn.open(port, '127.0.0.31');
    conns.push(a, b);
    const n = 20_000;
    a.write(Buffer.concat(Array.from({ length: n }, () => frameMessage(Uint8Array.of(1)))));
    for (let i = 0; i < 400 && first === 0; i++) await new Promise((r) => setTimeout(r, 5));
    b.write(frameMessage(Uint8Array.of(2)));
    expect([...(await b.next())]).toEqual([2]);
    // Before, a whole 64 KiB read (9,362 of these messages) was handed to the handler at once.
    expect(firstAtSecond).toBeGreaterThan(0);
    expect(firstAtSecond).toBeLessThan(2000);
    for (let i = 0; i < n; i++) await a.next();
    expect(first).toBe(n);
  });

  test('a partial frame trickled a byte at a time still times out at read_timeout_ms from its first byte', async () => {
    const server = new JcpServer(async (body) => body, { ...limits, maxPending: 8, readTimeoutMs: 500 }, new NodeMetrics(), quiet);
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const c = await RawConn.open(port);
    conns.push(c);
    c.write(Uint8Array.of(0, 0, 0, 100)); // a header declaring 100 bytes
    const t0 = Date.now();
    const trickle = setInterval(() => {
      if (!c.closed) c.sock.write(Uint8Array.of(1));
    }, 100);
    try {
      const m = decodeWireMessage(await c.next(3000));
      expect(m).toMatchObject({ kind: 'error', error: { code: NodeErrorCodes.READ_TIMEOUT } });
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(await c.waitClosed(2000)).toBe(true);
    } finally {
      clearInterval(trickle);
    }
  });

  test('one-byte segments to a connection not being served are not read: its inbox holds a bounded number of reads', async () => {
    const server = new JcpServer(() => new Promise<Uint8Array>(() => undefined), { ...limits, maxPending: 1 }, new NodeMetrics(), quiet);
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const c = await RawConn.open(port);
    conns.push(c);
    c.write(frameMessage(Uint8Array.of(1))); // taken, never answered: the connection has no room
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 3000; i++) {
      c.sock.write(Uint8Array.of(0));
      if (i % 10 === 0) await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setTimeout(r, 200));
    // Before, each segment the node read became one buffer in the inbox (thousands).
    expect(server.inboxReads).toBeLessThanOrEqual(64);
  });

  test('requests in flight are bounded across connections (maxInFlight); all answered in order once they settle', async () => {
    const { server, port, handled, releasing } = await held({ maxPending: 256, maxInFlight: 50 });
    const peers: RawConn[] = [];
    for (let p = 0; p < 10; p++) {
      const c = await RawConn.open(port, `127.0.0.${60 + p}`);
      conns.push(c);
      peers.push(c);
      c.write(Buffer.concat(Array.from({ length: 100 }, (_, i) => frameMessage(Uint8Array.of(p, i)))));
    }
    // Before, each connection's turns took up to maxPending: 1,000 handed over at once.
    expect(await settled(handled)).toBe(50);
    expect(server.inFlight).toBe(50);
    const stop = releasing();
    try {
      for (let p = 0; p < 10; p++) for (let i = 0; i < 100; i++) expect([...(await peers[p]!.next())]).toEqual([p, i]);
    } finally {
      stop();
    }
    expect(handled()).toBe(1000);
    expect(server.inFlight).toBe(0);
  });

  test('replies unsent stay within the total budget; a peer that reads its replies is still answered', async () => {
    const budget = 1 << 20;
    const reply = new Uint8Array(64 << 10);
    let handled = 0;
    const maxPending = 64;
    const maxInFlight = 32;
    const metrics = new NodeMetrics();
    const server = new JcpServer(
      async (body) => {
        handled++;
        return body.length === 1 ? reply : body;
      },
      { ...limits, maxPending, unsentBudgetBytes: budget, maxInFlight },
      metrics,
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    // Six peers each ask for 400 replies of 64 KiB (25 MiB each) and read none of them.
    const hogs = 6;
    const ask = Buffer.concat(Array.from({ length: 400 }, () => frameMessage(Uint8Array.of(1))));
    for (let i = 0; i < hogs; i++) {
      const c = await RawConn.open(port, `127.0.0.${20 + i}`);
      c.sock.pause(); // reads nothing
      conns.push(c);
      c.write(ask);
    }
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, server.unsentBytes)), 2);
    await settled(() => handled, 500);
    clearInterval(sampler);
    // The kernel's socket buffers take some megabytes per connection first. Past the budget a turn
    // takes one message, and past twice the budget the connections holding the most are closed:
    // what the node holds never passes that, plus the reply whose write crossed it.
    expect(peak).toBeLessThanOrEqual(budget * UNSENT_CEILING_FACTOR + reply.length + 4);
    expect((await metrics.unsentShed.get()).values[0]?.value).toBeGreaterThan(0);
    expect(server.unsentBytes).toBeLessThanOrEqual(budget * UNSENT_CEILING_FACTOR);
    // A peer that reads its replies is answered all the same.
    const honest = await RawConn.open(port, '127.0.0.40');
    conns.push(honest);
    for (let i = 0; i < 10; i++) {
      honest.write(frameMessage(Uint8Array.of(7, i)));
      expect([...(await honest.next())]).toEqual([7, i]);
    }
  });
});

describe('jcp/1 server: unsent bytes are counted by address', () => {
  const servers: JcpServer[] = [];
  const conns: RawConn[] = [];
  afterEach(async () => {
    for (const c of conns.splice(0)) c.destroy();
    for (const s of servers.splice(0)) await s.close(100);
  });

  test('new connections that never read get no reply past the address’s 4 MiB; another address is answered', async () => {
    // Each connection asks once for an 8 MiB reply and reads nothing. The kernel takes the first
    // few megabytes of each socket; the rest is held by the node, unsent.
    const reply = new Uint8Array(8 << 20);
    let handled = 0;
    const server = new JcpServer(
      async (body) => {
        handled++;
        return body.length === 1 ? reply : body;
      },
      { ...limits, frameCap: 16 << 20, maxPending: 64, maxConnections: 256 },
      new NodeMetrics(),
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const ask = frameMessage(Uint8Array.of(1));
    for (let i = 0; i < 40; i++) {
      const c = await RawConn.open(port, '127.0.0.60');
      c.sock.pause();
      conns.push(c);
      c.write(ask);
      await new Promise((r) => setTimeout(r, 10));
    }
    await settled(() => handled, 500);
    // Before: every connection got its reply (40 × 8 MiB less what the kernel took). Now: once
    // the address holds more than 4 MiB unsent, its connections are not taken from.
    expect(handled).toBeLessThanOrEqual(4);
    expect(server.peerUnsent('127.0.0.60')).toBeLessThanOrEqual((4 << 20) + 2 * (reply.length + 4));
    expect(server.peerUnsent('127.0.0.60')).toBe(server.unsentBytes);
    const honest = await RawConn.open(port, '127.0.0.61');
    conns.push(honest);
    honest.write(frameMessage(Uint8Array.of(7, 1)));
    expect([...(await honest.next())]).toEqual([7, 1]);
    // Once the address's connections close, its count goes back to zero.
    for (const c of conns.splice(0, 40)) c.destroy();
    expect(await settled(() => server.peerUnsent('127.0.0.60'), 200)).toBe(0);
    expect(server.unsentBytes).toBe(0);
  });

  test('many addresses each holding replies past the budget: the total stays within twice it; the biggest holders are closed', async () => {
    const budget = 1 << 20;
    const reply = new Uint8Array(1 << 20);
    const metrics = new NodeMetrics();
    const server = new JcpServer(
      async (body) => (body.length === 1 ? reply : body),
      { ...limits, frameCap: 16 << 20, maxPending: 64, unsentBudgetBytes: budget, maxConnections: 256 },
      metrics,
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, server.unsentBytes)), 2);
    const hogs: RawConn[] = [];
    try {
      // Before: each address was given replies up to its own 4 MiB (and one past the total budget): 30 × several MiB.
      for (let i = 0; i < 30; i++) {
        const c = await RawConn.open(port, `127.0.1.${i + 1}`);
        c.sock.pause();
        hogs.push(c);
        conns.push(c);
        c.write(Buffer.concat(Array.from({ length: 20 }, () => frameMessage(Uint8Array.of(1)))));
      }
      await settled(() => server.unsentBytes + server.connections, 500);
      const honest = await RawConn.open(port, '127.0.2.1');
      conns.push(honest);
      for (let i = 0; i < 5; i++) {
        honest.write(frameMessage(Uint8Array.of(7, i)));
        expect([...(await honest.next())]).toEqual([7, i]);
      }
    } finally {
      clearInterval(sampler);
    }
    expect(peak).toBeLessThanOrEqual(budget * UNSENT_CEILING_FACTOR + reply.length + 4);
    expect(server.unsentBytes).toBeLessThanOrEqual(budget * UNSENT_CEILING_FACTOR);
    const shed = (await metrics.unsentShed.get()).values[0]?.value ?? 0;
    expect(shed).toBeGreaterThan(0);
    // The node closed them: their clients see it.
    for (let i = 0; i < 100 && hogs.filter((c) => c.closed).length < shed; i++) await new Promise((r) => setTimeout(r, 30));
    expect(hogs.filter((c) => c.closed).length).toBe(shed);
  });

  test('a connection of the address that reads is taken from again once the address’s unsent bytes go out', async () => {
    const reply = new Uint8Array(1 << 20);
    const server = new JcpServer(
      async (body) => (body.length === 1 ? reply : body),
      { ...limits, maxPending: 64 },
      new NodeMetrics(),
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const hog = await RawConn.open(port, '127.0.0.62');
    hog.sock.pause();
    conns.push(hog);
    hog.write(Buffer.concat(Array.from({ length: 40 }, () => frameMessage(Uint8Array.of(1)))));
    await settled(() => server.peerUnsent('127.0.0.62'), 300);
    expect(server.peerUnsent('127.0.0.62')).toBeGreaterThan(4 << 20);
    // Another connection from the same address waits while the address holds more than 4 MiB …
    const second = await RawConn.open(port, '127.0.0.62');
    conns.push(second);
    second.write(frameMessage(Uint8Array.of(7, 2)));
    const answered = second.next().then((b) => [...b]);
    const early = await Promise.race([answered, new Promise((r) => setTimeout(() => r('waiting'), 300))]);
    expect(early).toBe('waiting');
    // … and is answered once the hog's bytes go out (here: it reads them).
    hog.sock.resume();
    expect(await answered).toEqual([7, 2]);
  });
});

describe('jcp/1 server: an address that keeps sending while rate-limited', () => {
  const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));
  /** A node whose abuse limits are `burst` tokens, refilled `refillPerS` a second on `clock()`. */
  const limited = (burst: number, refillPerS: number, clock: () => number) =>
    liveNode({ abuse: { burst, refill_per_s: refillPerS }, snapshot: { every_receipts: 0, every_s: 0 } }, { clockS: clock }, folder());
  /** The next reply on `c`: its error (code and message), or its kind. */
  const reply = async (c: RawConn) => {
    const m = decodeWireMessage(await c.next());
    return m.kind === 'error' ? m.error : { code: m.kind, message: '' };
  };
  test(`is closed after ${REFUSED_BEFORE_CLOSE} refused messages in a row; its new connections are refused; another address is answered`, async () => {
    const node = await limited(3, 0, () => 1_900_000_000);
    const bad = await RawConn.open(node.port, '127.0.0.50');
    const seen: string[] = [];
    for (let i = 0; i < 3 + REFUSED_BEFORE_CLOSE; i++) {
      bad.write(garbage);
      seen.push((await reply(bad)).code);
    }
    expect(seen.slice(0, 3)).toEqual(['cbor-malformed', 'cbor-malformed', 'cbor-malformed']);
    expect(new Set(seen.slice(3))).toEqual(new Set([NodeErrorCodes.RATE_LIMITED]));
    expect(await bad.waitClosed(5000)).toBe(true);
    expect((await node.metrics.rateLimitedCloses.get()).values).toEqual([{ labels: { why: 'messages' }, value: 1 }]);
    // A new connection from that address: told rate-limited and closed before it sends anything.
    const again = await RawConn.open(node.port, '127.0.0.50');
    expect((await reply(again)).code).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await again.waitClosed(5000)).toBe(true);
    // Another address: answered as usual.
    const other = await RawConn.open(node.port, '127.0.0.51');
    other.write(garbage);
    expect((await reply(other)).code).toBe('cbor-malformed');
    for (const c of [bad, again, other]) c.destroy();
    await node.close();
  });

  test('messages admitted as the bucket refills do not reset the count: 64 refused within 10 s close the connection', async () => {
    let clock = 1_900_000_000;
    const node = await limited(2, 1, () => clock);
    const c = await RawConn.open(node.port, '127.0.0.53');
    const send = async () => {
      c.write(garbage);
      return (await reply(c)).code;
    };
    const seen: string[] = [];
    for (let i = 0; i < 42; i++) seen.push(await send()); // 2 failures, then 40 refused
    clock += 1; // one token back: one message admitted (and failed) between the refusals
    for (let i = 0; i < 30 && !c.closed; i++) seen.push(await send().catch(() => 'closed'));
    expect(seen.filter((x) => x === 'cbor-malformed')).toHaveLength(3);
    expect(seen.filter((x) => x === NodeErrorCodes.RATE_LIMITED)).toHaveLength(REFUSED_BEFORE_CLOSE);
    expect(await c.waitClosed(5000)).toBe(true);
    c.destroy();
    await node.close();
  });

  test('the closing reply says why; up to it, each refused message is answered', async () => {
    const node = await limited(1, 0, () => 1_900_000_000);
    const c = await RawConn.open(node.port, '127.0.0.52');
    c.write(garbage);
    await c.next();
    const messages: string[] = [];
    for (let i = 0; i < REFUSED_BEFORE_CLOSE; i++) {
      c.write(garbage);
      messages.push((await reply(c)).message);
    }
    expect(messages.slice(0, -1).every((m) => m.includes('retry later') && !m.includes('closed'))).toBe(true);
    expect(messages.at(-1)).toContain(`${REFUSED_BEFORE_CLOSE} messages within 10 s`);
    expect(messages.at(-1)).toContain('the connection is closed');
    expect(await c.waitClosed(5000)).toBe(true);
    c.destroy();
    await node.close();
  });
});
