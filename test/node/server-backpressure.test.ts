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
import { JcpServer, NodeErrorCodes, NodeMetrics, REFUSED_IN_A_ROW_MAX } from '../../node/index.ts';
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

  test('2,000 messages in one write are taken maxPending at a time; all answered, in order, once replies go out', async () => {
    let handled = 0;
    const owed: Array<() => void> = [];
    const server = new JcpServer(
      (body) => {
        handled++;
        return new Promise((resolve) => owed.push(() => resolve(body)));
      },
      { ...limits, maxPending: 8 },
      new NodeMetrics(),
      quiet,
    );
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const c = await RawConn.open(port);
    conns.push(c);
    const n = 2000;
    const frames = Array.from({ length: n }, (_, i) => frameMessage(Uint8Array.of(i >> 8, i & 0xff)));
    c.write(Buffer.concat(frames));
    // One 16 KiB write: before, every message of it was handed to the handler at once.
    expect(await settled(() => handled)).toBe(8);
    // Replies go out: the rest is taken, in order, a turn at a time.
    const pump = setInterval(() => {
      for (const release of owed.splice(0)) release();
    }, 2);
    const got: number[] = [];
    try {
      while (got.length < n) {
        const b = await c.next();
        got.push((b[0]! << 8) | b[1]!);
      }
    } finally {
      clearInterval(pump);
    }
    expect(got).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(handled).toBe(n);
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

  test('replies unsent stay within the total budget; a peer that reads its replies is still answered', async () => {
    const budget = 1 << 20;
    const reply = new Uint8Array(64 << 10);
    let handled = 0;
    const maxPending = 4;
    const server = new JcpServer(
      async (body) => {
        handled++;
        return body.length === 1 ? reply : body;
      },
      { ...limits, maxPending, unsentBudgetBytes: budget },
      new NodeMetrics(),
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
    await settled(() => handled, 500);
    // The kernel's socket buffers take some megabytes per connection first; what the node holds is
    // the budget plus at most one round of replies per connection past it.
    const round = maxPending * (reply.length + 4);
    expect(server.unsentBytes).toBeGreaterThan(budget / 2);
    expect(server.unsentBytes).toBeLessThanOrEqual(budget + hogs * round);
    expect(server.overBudget).toBe(true);
    // A peer that reads its replies is answered all the same.
    const honest = await RawConn.open(port, '127.0.0.40');
    conns.push(honest);
    for (let i = 0; i < 10; i++) {
      honest.write(frameMessage(Uint8Array.of(7, i)));
      expect([...(await honest.next())]).toEqual([7, i]);
    }
  });
});

describe('jcp/1 server: an address that keeps sending while rate-limited', () => {
  test(`is closed after ${REFUSED_IN_A_ROW_MAX} refused messages in a row; its new connections are refused; another address is answered`, async () => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 3, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));
    const code = async (c: RawConn) => {
      const m = decodeWireMessage(await c.next());
      return m.kind === 'error' ? m.error : { code: m.kind, message: '' };
    };
    const bad = await RawConn.open(node.port, '127.0.0.50');
    const seen: string[] = [];
    for (let i = 0; i < 3 + REFUSED_IN_A_ROW_MAX; i++) {
      bad.write(garbage);
      seen.push((await code(bad)).code);
    }
    expect(seen.slice(0, 3)).toEqual(['cbor-malformed', 'cbor-malformed', 'cbor-malformed']);
    expect(new Set(seen.slice(3))).toEqual(new Set([NodeErrorCodes.RATE_LIMITED]));
    expect(await bad.waitClosed(5000)).toBe(true);
    // A new connection from that address: told rate-limited and closed before it sends anything.
    const again = await RawConn.open(node.port, '127.0.0.50');
    expect((await code(again)).code).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await again.waitClosed(5000)).toBe(true);
    // Another address: answered as usual.
    const other = await RawConn.open(node.port, '127.0.0.51');
    other.write(garbage);
    expect((await code(other)).code).toBe('cbor-malformed');
    for (const c of [bad, again, other]) c.destroy();
    await node.close();
  });

  test('the closing reply says why; up to it, each refused message is answered', async () => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 1, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));
    const c = await RawConn.open(node.port, '127.0.0.52');
    c.write(garbage);
    await c.next();
    const messages: string[] = [];
    for (let i = 0; i < REFUSED_IN_A_ROW_MAX; i++) {
      c.write(garbage);
      const m = decodeWireMessage(await c.next());
      messages.push(m.kind === 'error' ? m.error.message : m.kind);
    }
    expect(messages.slice(0, -1).every((m) => m.includes('retry later') && !m.includes('closed'))).toBe(true);
    expect(messages.at(-1)).toContain(`${REFUSED_IN_A_ROW_MAX} messages in a row`);
    expect(messages.at(-1)).toContain('the connection is closed');
    expect(await c.waitClosed(5000)).toBe(true);
    c.destroy();
    await node.close();
  });
});
