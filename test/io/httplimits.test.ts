/**
 * io/httplimits.ts createBoundedServer, the connection bounds of every HTTP listener (metrics,
 * standing webhooks, the bridge's HTTP and A2A faces, the console): a connection over the
 * per-peer or total bound is closed as it is accepted while other peers are still served, a
 * request whose headers never finish (slow loris) is closed after the headers timeout, and the
 * counts drop as connections close. Linux routes all of 127/8 to loopback, so 127.0.0.2 is a
 * second peer.
 */
import { get } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type BoundedServer, createBoundedServer, type HttpLimits, peerAddress } from '../../io/index.ts';

const started: BoundedServer[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(started.splice(0).map((b) => new Promise((r) => b.server.close(r))));
});

async function serve(limits: HttpLimits): Promise<{ b: BoundedServer; port: number }> {
  const b = createBoundedServer((_req, res) => res.end('ok'), limits);
  started.push(b);
  await new Promise<void>((r) => b.server.listen(0, '127.0.0.1', () => r()));
  return { b, port: (b.server.address() as AddressInfo).port };
}

/** A raw connection from `from`; resolves once connected, with a promise of its close. */
function open(port: number, from = '127.0.0.1'): Promise<{ sock: Socket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host: '127.0.0.1', port, localAddress: from });
    sockets.push(sock);
    const t0 = Date.now();
    const closed = new Promise<number>((r) => sock.once('close', () => r(Date.now() - t0)));
    sock.on('error', () => {});
    sock.once('connect', () => resolve({ sock, closed }));
    sock.once('error', reject);
  });
}

/** Whether `p` settles within `ms`. */
const within = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

function fetchFrom(port: number, from: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/', localAddress: from, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe('createBoundedServer', () => {
  it('closes connections over the per-peer bound at once and still serves another peer', async () => {
    const { b, port } = await serve({ maxPerPeer: 3, maxConnections: 100 });
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await open(port));
    await until(() => b.counts().open === 3);
    const extra = [await open(port), await open(port)];
    for (const e of extra) expect(await within(e.closed, 1000)).toBe(true);
    for (const h of held) expect(await within(h.closed, 100)).toBe(false);
    expect(await fetchFrom(port, '127.0.0.2')).toBe(200);
    expect(b.counts()).toMatchObject({ refusedPeer: 2, refusedTotal: 0 });
  });

  it('at the total bound, refuses a newcomer whose peer holds within one of the most', async () => {
    const { b, port } = await serve({ maxPerPeer: 10, maxConnections: 4 });
    const held = [];
    for (let i = 0; i < 2; i++) held.push(await open(port, '127.0.0.1'));
    for (let i = 0; i < 2; i++) held.push(await open(port, '127.0.0.2'));
    await until(() => b.counts().open === 4);
    const extra = await open(port, '127.0.0.2');
    expect(await within(extra.closed, 1000)).toBe(true);
    for (const h of held) expect(await within(h.closed, 100)).toBe(false);
    expect(b.counts()).toMatchObject({ open: 4, refusedTotal: 1, refusedPeer: 0, evicted: 0 });
  });

  it('at the total bound, a newcomer from a peer holding fewer takes the place of a connection of the peer holding the most', async () => {
    const { b, port } = await serve({ maxPerPeer: 10, maxConnections: 4 });
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await open(port, '127.0.0.1'));
    await until(() => b.counts().open === 4);
    // Without the eviction, a few addresses filling the listener keep every other one out.
    expect(await fetchFrom(port, '127.0.0.2')).toBe(200);
    const closed = await Promise.all(held.map((h) => within(h.closed, 500)));
    expect(closed.filter(Boolean)).toHaveLength(1);
    // The oldest of the biggest holder's connections went.
    expect(closed[0]).toBe(true);
    expect(b.counts()).toMatchObject({ evicted: 1, refusedTotal: 0 });
  });

  it('destroys a connection with more than maxPipelined requests in flight, its extra requests unanswered', async () => {
    let handled = 0;
    const b = createBoundedServer(
      (_req, res) => {
        handled++;
        setTimeout(() => res.end('ok'), 100);
      },
      { maxPipelined: 2 },
    );
    started.push(b);
    await new Promise<void>((r) => b.server.listen(0, '127.0.0.1', () => r()));
    const port = (b.server.address() as AddressInfo).port;
    const { sock, closed } = await open(port);
    // Five requests in one write, never read: without the bound each is handled and its answer held.
    sock.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n'.repeat(5));
    expect(await within(closed, 1000)).toBe(true);
    expect(handled).toBe(2);
    expect(b.counts()).toMatchObject({ refusedPipelined: 1 });
    // Within the bound: two pipelined requests, both answered.
    const ok = await open(port, '127.0.0.2');
    let got = '';
    ok.sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
    });
    ok.sock.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n'.repeat(2));
    await until(() => got.split('HTTP/1.1 200').length === 3);
    expect(got.split('HTTP/1.1 200')).toHaveLength(3);
  });

  it('closes a slow-loris connection (headers never finished) after the headers timeout', async () => {
    const { port } = await serve({ headersTimeoutMs: 300, requestTimeoutMs: 1000, checkIntervalMs: 100 });
    const { sock, closed } = await open(port);
    sock.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const iv = setInterval(() => sock.writable && sock.write('X-a: b\r\n'), 100);
    try {
      expect(await within(closed, 3000)).toBe(true);
      expect(await closed).toBeGreaterThanOrEqual(250);
    } finally {
      clearInterval(iv);
    }
  });

  it('drops the counts as connections close, so a refused peer may connect again', async () => {
    const { b, port } = await serve({ maxPerPeer: 2, maxConnections: 2 });
    const first = [await open(port), await open(port)];
    await until(() => b.counts().open === 2);
    for (const f of first) f.sock.destroy();
    await until(() => b.counts().open === 0);
    expect(b.counts().open).toBe(0);
    const again = [await open(port), await open(port)];
    for (const a of again) expect(await within(a.closed, 200)).toBe(false);
    for (const a of again) a.sock.destroy();
    await until(() => b.counts().open === 0);
    expect(await fetchFrom(port, '127.0.0.1')).toBe(200);
  });

  it('refuses a bound that is not a positive integer', () => {
    expect(() => createBoundedServer(() => {}, { maxPerPeer: 0 })).toThrow(RangeError);
    expect(() => createBoundedServer(() => {}, { maxConnections: 1.5 })).toThrow(RangeError);
  });

  it('counts IPv6 peers by /64 (the peer address the node counts by)', () => {
    expect(peerAddress('2001:db8:1:2::1')).toBe(peerAddress('2001:db8:1:2::ffff'));
  });
});
