/**
 * TLS wherever a link can leave the machine (docs/tls.md): jcp/1 over TLS (server certificate,
 * optional client certificates that never replace the caller's signature; a TLS node refuses
 * plaintext), the NATS client connection over TLS, and NATS routes over TLS. The CA and the
 * certificates are made at test time (testkit/tls.ts, openssl).
 */
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import tls from 'node:tls';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { frameMessage } from '../../core/index.ts';
import { JetStreamBus } from '../../channel/index.ts';
import { channelNames } from '../../channel/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { JcpClient } from '../../client/index.ts';
import { freePort } from '../../testkit/index.ts';
import { makeTlsMaterial } from '../../testkit/index.ts';

type TlsMaterial = ReturnType<typeof makeTlsMaterial>;
import { join } from 'node:path';
import { writeChainFile } from '../../client/index.ts';
import { HANDSHAKES_PER_PEER, JcpServer, NodeMetrics, writeKeyFile } from '../../node/index.ts';
import { runJcpInProcess } from '../support.ts';
import { cast, liveNode, mint } from '../node/fixtures.ts';

const { rng, alice, bob, mallory } = cast('tls');

describe('tls - jcp/1', () => {
  let m: TlsMaterial;
  beforeAll(() => {
    m = makeTlsMaterial();
  });
  afterAll(() => m?.dispose());

  test('allow over TLS; a plaintext client is refused before any decision', async () => {
    const node = await liveNode({ tls: { cert_file: m.server.certFile, key_file: m.server.keyFile } });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
      const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, tls: { ca: m.ca }, timeoutS: 10 });
      expect((await c.call({ chain: [g], action: 'read', payload: { n: 1 } })).decision).toEqual({ verdict: 'allow' });
      await c.close();
      const seq = node.enforcer.nextSeq;
      const plain = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, reconnectAttempts: 0, timeoutS: 5 });
      await expect(plain.call({ chain: [g], action: 'read', payload: { n: 2 } })).rejects.toThrow();
      await plain.close().catch(() => undefined);
      // Nothing was decided or sealed for the plaintext attempt.
      expect(node.enforcer.nextSeq).toBe(seq);
      expect(await node.metrics.tlsRefused.get()).toMatchObject({ values: [expect.objectContaining({ labels: { why: 'handshake' } })] });
      // A client that does not trust the node's CA does not connect either.
      await expect(
        JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, tls: {}, reconnectAttempts: 0, timeoutS: 5 }),
      ).rejects.toThrow();
    } finally {
      await node.cleanup();
    }
  }, 60_000);

  /** An echoing jcp/1 TLS server (`readTimeoutMs`, `maxConnections`), and raw TCP connections to it from a loopback address. */
  async function echoOverTls(readTimeoutMs: number, maxConnections: number) {
    const metrics = new NodeMetrics();
    const server = new JcpServer(
      async (body) => body,
      {
        frameCap: 1 << 20,
        readTimeoutMs,
        idleTimeoutMs: 60_000,
        maxConnections,
        maxPending: 8,
        tls: { cert: readFileSync(m.server.certFile), key: readFileSync(m.server.keyFile), clientCerts: 'off' },
      },
      metrics,
      pino({ level: 'silent' }),
    );
    const port = await server.listen('127.0.0.1', 0);
    const raw = (localAddress: string) =>
      new Promise<Socket>((resolve, reject) => {
        const c = connect({ host: '127.0.0.1', port, localAddress });
        c.on('error', () => undefined);
        c.once('connect', () => resolve(c));
        c.once('error', reject);
      });
    return { metrics, server, raw };
  }

  test('handshakes: one closed or silent before its handshake is let go after read_timeout_ms (before: never), at most 64 held per address', async () => {
    const { metrics, server, raw } = await echoOverTls(1500, 256);
    const closed = (c: Socket) => new Promise<void>((resolve) => (c.destroyed ? resolve() : c.once('close', () => resolve())));
    try {
      // Before: node:tls kept each such socket half-open (CLOSE-WAIT) for good.
      const quitters = await Promise.all(Array.from({ length: 40 }, () => raw('127.0.0.70')));
      for (const c of quitters) c.end();
      const t0 = Date.now();
      await Promise.all(quitters.map(closed));
      expect(Date.now() - t0).toBeLessThan(1500 + 3000);
      // Silent ones: 64 held by one address, the rest closed at once, all of them after the timeout.
      const silent = await Promise.all(Array.from({ length: 70 }, () => raw('127.0.0.71')));
      await new Promise((r) => setTimeout(r, 300));
      expect(server.handshaking).toBe(HANDSHAKES_PER_PEER);
      expect(silent.filter((c) => c.destroyed || c.readableEnded).length).toBeGreaterThanOrEqual(70 - HANDSHAKES_PER_PEER);
      // Another address still gets through its handshake and is answered.
      const ok = tls.connect({ socket: await raw('127.0.0.72'), host: '127.0.0.1', ca: m.ca });
      await new Promise((r) => ok.once('secureConnect', r));
      ok.write(frameMessage(Uint8Array.of(9)));
      const echo = await new Promise<Buffer>((r) => ok.once('data', r));
      expect([...echo.subarray(4)]).toEqual([9]);
      await Promise.all(silent.map(closed));
      // (the node's side of each socket closes on its own turn)
      for (let i = 0; i < 100 && server.handshaking > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(server.handshaking).toBe(0);
      const why = new Map((await metrics.tlsRefused.get()).values.map((v) => [v.labels['why'], v.value]));
      expect(why.get('handshake-limit')).toBe(70 - HANDSHAKES_PER_PEER);
      expect(why.get('handshake-timeout')).toBe(quitters.length + HANDSHAKES_PER_PEER);
      // The TLS connection that completed its handshake is not ended by the handshake timer.
      expect(ok.destroyed).toBe(false);
      ok.destroy();
    } finally {
      await server.close(100);
    }
  }, 60_000);

  test('handshakes full (max_connections): a newcomer from another address takes the oldest of the address holding the most; one of those is refused', async () => {
    const { metrics, server, raw } = await echoOverTls(10_000, 32);
    const held: Socket[] = [];
    try {
      // Two addresses fill every handshake slot (before: every other TLS client was refused until they timed out).
      for (let i = 0; i < 16; i++) held.push(await raw('127.0.0.80'), await raw('127.0.0.81'));
      for (let i = 0; i < 50 && server.handshaking < 32; i++) await new Promise((r) => setTimeout(r, 10));
      expect(server.handshaking).toBe(32);
      for (const from of ['127.0.0.82', '127.0.0.83']) {
        if (server.handshaking < 32) held.push(await raw('127.0.0.81')); // full again
        for (let i = 0; i < 50 && server.handshaking < 32; i++) await new Promise((r) => setTimeout(r, 10));
        const ok = tls.connect({ socket: await raw(from), host: '127.0.0.1', ca: m.ca });
        await new Promise((r, j) => {
          ok.once('secureConnect', r);
          ok.once('error', j);
        });
        ok.write(frameMessage(Uint8Array.of(3)));
        expect([...(await new Promise<Buffer>((r) => ok.once('data', r))).subarray(4)]).toEqual([3]);
        ok.destroy();
      }
      // Full again: one more from the address holding the most is refused.
      held.push(await raw('127.0.0.81'));
      for (let i = 0; i < 50 && server.handshaking < 32; i++) await new Promise((r) => setTimeout(r, 10));
      const again = await raw('127.0.0.81');
      await new Promise<void>((r) => (again.destroyed ? r() : again.once('close', () => r())));
      const why = new Map((await metrics.tlsRefused.get()).values.map((v) => [v.labels['why'], v.value]));
      expect(why.get('handshake-evicted')).toBe(2);
      expect(why.get('handshake-limit')).toBe(1);
    } finally {
      for (const c of held) c.destroy();
      await server.close(100);
    }
  }, 60_000);

  test('jcp call --ca: allow over TLS; without --ca the TLS node is not reached', async () => {
    const node = await liveNode({ tls: { cert_file: m.server.certFile, key_file: m.server.keyFile } });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
      const chainFile = join(m.dir, 'bob.chain.json');
      const keyFile = join(m.dir, 'bob.key');
      writeChainFile(chainFile, [g], { overwrite: true });
      writeKeyFile(keyFile, bob);
      const base = [
        'call',
        '--node',
        `127.0.0.1:${node.port}`,
        '--chain',
        chainFile,
        '--key',
        keyFile,
        '--action',
        'read',
        '--payload',
        '{}',
        '--timeout-s',
        '5',
      ];
      const ok = await runJcpInProcess([...base, '--ca', m.caFile]);
      expect(ok.code, ok.err).toBe(0);
      expect(JSON.parse(ok.out).decision).toEqual({ verdict: 'allow' });
      const plain = await runJcpInProcess(base);
      expect(plain.code).toBe(1);
      const half = await runJcpInProcess([...base, '--ca', m.caFile, '--cert', m.client.certFile]);
      expect(half.code).toBe(2);
    } finally {
      await node.cleanup();
    }
  }, 60_000);

  test('client certificates required: none is refused; one only opens the connection, the signature still decides', async () => {
    const node = await liveNode({
      tls: { cert_file: m.server.certFile, key_file: m.server.keyFile, ca_file: m.caFile, client_certs: 'require' },
    });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
      await expect(
        (async () => {
          const c = await JcpClient.connect({
            host: '127.0.0.1',
            port: node.port,
            signer: bob,
            tls: { ca: m.ca },
            reconnectAttempts: 0,
            timeoutS: 5,
          });
          try {
            return await c.call({ chain: [g], action: 'read', payload: { n: 1 } });
          } finally {
            await c.close().catch(() => undefined);
          }
        })(),
      ).rejects.toThrow();
      const withCert = { ca: m.ca, cert: m.client.cert, key: m.client.key };
      const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, tls: withCert, timeoutS: 10 });
      expect((await c.call({ chain: [g], action: 'read', payload: { n: 1 } })).decision).toEqual({ verdict: 'allow' });
      await c.close();
      // The same client certificate with another caller's key: the grant's subject check still refuses.
      const imp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: mallory, tls: withCert, timeoutS: 10 });
      expect((await imp.call({ chain: [g], action: 'read', payload: { n: 2 } })).decision).toEqual({
        verdict: 'deny',
        deny_reason: 'wrong-subject',
      });
      await imp.close();
    } finally {
      await node.cleanup();
    }
  }, 60_000);
});

describe('tls - NATS', () => {
  let m: TlsMaterial;
  const servers: NatsServer[] = [];
  beforeAll(() => {
    m = makeTlsMaterial();
  });
  afterAll(async () => {
    for (const s of servers) await s.dispose().catch(() => undefined);
    m?.dispose();
  });

  test('client connection over TLS: with the CA it connects; without it (plaintext or untrusted) it does not', async () => {
    const s = await NatsServer.start({ tls: { certFile: m.server.certFile, keyFile: m.server.keyFile, caFile: m.caFile } });
    servers.push(s);
    const url = `tls://127.0.0.1:${s.port}`;
    const names = channelNames(`tlsbus${process.pid}x${Date.now().toString(36)}`);
    const bus = await JetStreamBus.connect(url, { names, tls: { caFile: m.caFile } }, 15_000);
    try {
      expect(bus.connected).toBe(true);
      expect(await bus.revocationStreamLastSeq!(2_000)).toBe(0);
    } finally {
      await bus.deleteStreams().catch(() => undefined);
      await bus.close();
    }
    await expect(JetStreamBus.connect(`nats://127.0.0.1:${s.port}`, { names }, 3_000)).rejects.toThrow();
  }, 60_000);

  test('routes over TLS (verify: both ends present certificates): a 2-server cluster forms', async () => {
    const routePorts = [await freePort(), await freePort()];
    for (let i = 0; i < 2; i++) {
      servers.push(
        await NatsServer.start(
          {
            name: `tls-r${i}-${process.pid}`,
            cluster: { name: `tls${process.pid}`, port: routePorts[i]!, routes: routePorts },
            // Client and route TLS (routes verify the peer's certificate against the CA).
            tls: { certFile: m.server.certFile, keyFile: m.server.keyFile, caFile: m.caFile },
          },
          false,
        ),
      );
    }
    const [a] = servers.slice(-2) as [NatsServer, NatsServer];
    const end = Date.now() + 40_000;
    let routes = 0;
    while (Date.now() < end) {
      // The monitor port may not listen yet (the servers were started without waiting).
      const r = await fetch(`http://127.0.0.1:${a.httpPort}/routez`, { signal: AbortSignal.timeout(2_000) })
        .then((x) => x.json() as Promise<{ num_routes: number }>)
        .catch(() => ({ num_routes: 0 }));
      routes = r.num_routes;
      if (routes > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(routes).toBeGreaterThan(0);
  }, 60_000);
});
