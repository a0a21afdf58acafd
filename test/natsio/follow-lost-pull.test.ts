/**
 * Follow-from-start survives a pull request that never reaches the consumer (natsio/follow.ts;
 * the regions bench's "revocation 0 did not reach c2 within 30000 ms"): a proxy between the
 * follower and its own nats-server swallows the follower's first pull request, then a message is
 * published. The follow must notice the silence (missed heartbeats) and pull again; with the
 * client's default 30 s pulls / 15 s heartbeats it stays silent for about 30 s, past this test's
 * 10 s wait.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followFromStart } from '../../natsio/index.ts';
import { NatsServer } from '../../testkit/index.ts';

let server: NatsServer;
let proxy: Server;
const sockets: Socket[] = [];
let dropped = 0;

/**
 * Client→server filter: forwards the NATS protocol command by command and drops the first
 * `PUB $JS.API.CONSUMER.MSG.NEXT.…` (a pull request) with its payload.
 */
function filterPulls(client: Socket, upstream: Socket): void {
  let buf = Buffer.alloc(0);
  client.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const eol = buf.indexOf('\r\n');
      if (eol < 0) return;
      const line = buf.subarray(0, eol).toString('latin1');
      const parts = line.split(' ');
      const verb = parts[0]!.toUpperCase();
      let len = eol + 2;
      if (verb === 'PUB' || verb === 'HPUB') {
        const size = Number(parts[parts.length - 1]);
        if (buf.length < eol + 2 + size + 2) return;
        len = eol + 2 + size + 2;
      }
      const cmd = buf.subarray(0, len);
      buf = buf.subarray(len);
      if (verb === 'PUB' && parts[1]!.startsWith('$JS.API.CONSUMER.MSG.NEXT.') && dropped === 0) {
        dropped++;
        continue;
      }
      upstream.write(cmd);
    }
  });
}

beforeAll(async () => {
  server = await NatsServer.start({ name: 'follow-lost-pull' });
  const port = Number(new URL(server.url).port);
  proxy = createServer((client) => {
    const upstream = tcpConnect(port, '127.0.0.1');
    sockets.push(client, upstream);
    upstream.on('data', (d) => client.write(d));
    filterPulls(client, upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => proxy?.close(r));
  await server?.stop();
});

describe('follow from start - a lost pull request', () => {
  it('a message published after the first pull was lost is still delivered (re-pulled after missed heartbeats)', async () => {
    const addr = proxy.address() as { port: number };
    const follower: NatsConnection = await connect({ servers: `127.0.0.1:${addr.port}` });
    const publisher: NatsConnection = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(publisher);
      await jsm.streams.add({ name: 'LOSTPULL', subjects: ['lostpull.>'] });
      const got: number[] = [];
      let arrived!: () => void;
      const first = new Promise<void>((r) => {
        arrived = r;
      });
      const f = await followFromStart(await jetstreamManager(follower), jetstream(follower), 'LOSTPULL', (m) => {
        got.push(m.seq);
        arrived();
      });
      try {
        await f.caughtUp;
        // Wait until the proxy swallowed the follower's first pull, then publish.
        for (let i = 0; i < 100 && dropped === 0; i++) await new Promise((r) => setTimeout(r, 50));
        expect(dropped).toBe(1);
        await jetstream(publisher).publish('lostpull.a', 'x');
        const inTime = await Promise.race([first.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
        expect(inTime, 'the message was not delivered within 10 s of the lost pull').toBe(true);
        expect(got).toEqual([1]);
      } finally {
        await f.stop();
      }
    } finally {
      await follower.close();
      await publisher.close();
    }
  }, 30_000);
});
