/**
 * The typed client (spec §11): signs with an Actor or a signer function, pipelines calls, and
 * after a dropped connection reconnects and re-sends unanswered requests, which the node answers
 * from its log without debiting them twice.
 */
import { createServer, type Socket } from 'node:net';
import { describe, expect, test } from 'vitest';
import { frameMessage, FrameReader, grantId, openReceipt, sign } from '../../core/index.ts';
import { ConnectionLost, JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, tempDir } from './fixtures.ts';

const { rng, alice, bob } = cast('client');

describe('client', () => {
  test('a signer function signs like the actor it stands for', async () => {
    const node = await liveNode();
    const c = await JcpClient.connect({
      host: '127.0.0.1',
      port: node.port,
      signer: { did: bob.did, sign: async (m) => sign(bob.key, m) },
    });
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    expect((await c.call({ chain: [g], action: 'read' })).decision.verdict).toBe('allow');
    await c.close();
    await node.cleanup();
  });

  test('reconnect / after the node restarts, unanswered requests are re-sent and debited once', async () => {
    const t = tempDir('client-reconnect');
    const a = await liveNode({}, {}, t.dir);
    const port = a.port;
    const c = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob, reconnectDelayMs: 50, reconnectAttempts: 20 });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const calls = Array.from({ length: 300 }, (_, i) =>
      c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 1n, provenance: 'Estimator' } }),
    );
    await new Promise((r) => setTimeout(r, 20));
    await a.close();
    const b = await liveNode({ listen: `127.0.0.1:${port}` }, {}, t.dir);
    const results = await Promise.all(calls);
    expect(results.every((r) => r.decision.verdict === 'allow')).toBe(true);
    const seqs = new Set(results.map((r) => (openReceipt(r.receipt, b.did) as { value: { seq: number } }).value.seq));
    expect(seqs.size).toBe(300);
    expect(b.ledger.spent(grantId(g.grant))).toBe(300n);
    await c.close();
    await b.close();
    t.cleanup();
  });

  test('a node that never comes back fails the pending calls with ConnectionLost', async () => {
    const node = await liveNode();
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, reconnectAttempts: 2, reconnectDelayMs: 10 });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    await node.cleanup();
    const e = await c.call({ chain: [g], action: 'read' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConnectionLost);
    await c.close();
  });

  test('a node that takes each connection and closes it unanswered (a TLS port reached in plaintext) fails the call after the attempts, and no socket is left open', async () => {
    let accepted = 0;
    const open = new Set<Socket>();
    const server = createServer((sock: Socket) => {
      accepted++;
      open.add(sock);
      sock.on('close', () => open.delete(sock));
      sock.on('error', () => undefined);
      sock.once('data', () => sock.destroy());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const c = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob, reconnectAttempts: 4, reconnectDelayMs: 10, timeoutS: 30 });
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    const t0 = Date.now();
    const e = await c.call({ chain: [g], action: 'read' }).catch((x: unknown) => x);
    // Before: each new connection started the attempts afresh, 20 a second until the 30 s timeout.
    expect(e).toBeInstanceOf(ConnectionLost);
    expect((e as Error).message).toContain('closed the connection before answering');
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(accepted).toBe(1 + 4);
    await c.close();
    for (let i = 0; i < 50 && open.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(open.size).toBe(0);
    await new Promise((r) => server.close(r));
  });

  test('a reply over replyCap fails its own call (frame-too-large); replies ahead of it in the same chunk arrive, calls behind it are re-sent', async () => {
    const bodies = (n: number) => Uint8Array.of(0xa0 + n);
    let connection = 0;
    const server = createServer((sock: Socket) => {
      const reader = new FrameReader();
      const mine = connection++;
      let seen = 0;
      sock.on('data', (chunk: Buffer) => {
        seen += reader.push(new Uint8Array(chunk)).length;
        if (mine === 0 && seen === 3) {
          // One chunk: reply 1, then a length header for reply 2 far over the client's cap.
          const huge = new Uint8Array(4);
          new DataView(huge.buffer).setUint32(0, 1 << 20);
          sock.write(Buffer.concat([frameMessage(bodies(1)), huge]));
        }
        if (mine === 1 && seen === 1) sock.write(frameMessage(bodies(3)));
      });
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const c = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob, replyCap: 1024, reconnectDelayMs: 10 });
    try {
      const [r1, r2, r3] = await Promise.allSettled([c.roundTrip(bodies(1)), c.roundTrip(bodies(2)), c.roundTrip(bodies(3))]);
      expect(r1).toEqual({ status: 'fulfilled', value: bodies(1) });
      expect(r2.status).toBe('rejected');
      expect((r2 as PromiseRejectedResult).reason).toMatchObject({ code: 'frame-too-large' });
      expect(r3).toEqual({ status: 'fulfilled', value: bodies(3) });
      expect(connection).toBe(2);
    } finally {
      await c.close();
      await new Promise((r) => server.close(r));
    }
  });
});
