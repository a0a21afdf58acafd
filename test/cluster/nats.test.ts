/**
 * The harness's NATS servers and TCP proxy, driven with real `nats-server` processes on free
 * loopback ports: restarts keep JetStream state, a 3-server cluster keeps settling when the
 * stream leader dies, and a cut proxy partitions a point until it is healed.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type Actor,
  actorFromSeed,
  contentId,
  decode,
  encode,
  readSignedRevocation,
  seededRng,
  signedRevocationToCbor,
  signRevocation,
} from '../../core/index.ts';
import { channelNames, ChannelPoint, JetStreamBus } from '../../channel/index.ts';
import { NatsCluster, NatsServer, TcpProxy } from '../../testkit/internal.ts';

const actor = (name: string): Actor => actorFromSeed(seededRng(`cluster-nats/${name}`)(32));
const alice = actor('alice');
const bob = actor('bob');
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

describe('testkit - one nats-server', () => {
  it('starts on a free loopback port, restarts on the same port, and keeps the statements', async () => {
    const server = await NatsServer.start();
    cleanups.push(() => server.dispose());
    const names = channelNames('solo');
    const grant = contentId({ jcp_test_grant: 'solo' });
    const bus = await JetStreamBus.connect(server.url, { names, deadlineMs: 15_000 });
    cleanups.push(() => bus.close());
    const p = new ChannelPoint({ grantId: grant, windowUj: 100n, self: alice, bus });
    await p.settle();
    p.tryReserve(40n, 1_000n);
    p.commit(40n);
    expect((await p.settleNow()).ok).toBe(true);
    await server.restart();
    expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
    const q = new ChannelPoint({ grantId: grant, windowUj: 100n, self: bob, bus });
    const r = await q.settle();
    expect(r.ok ? r.peersUj : -1n).toBe(40n);
  });
});

describe('testkit - the revocation stream across a NATS restart', () => {
  it('a follower resumes after the server restarts: nothing lost, nothing twice', async () => {
    const server = await NatsServer.start();
    cleanups.push(() => server.dispose());
    const bus = await JetStreamBus.connect(server.url, { names: channelNames('revs'), deadlineMs: 15_000 });
    cleanups.push(() => bus.close());
    const rng = seededRng('cluster-nats/revs');
    const publish = async (i: number) => {
      const sr = signRevocation(contentId({ revoked: i }), alice, rng(16));
      await bus.publishRevocation(sr.body.grant_id, encode(signedRevocationToCbor(sr)), `r${i}`);
    };
    await publish(1);
    const got: Uint8Array[] = [];
    const follow = await bus.followRevocations((b) => got.push(b));
    await follow.caughtUp;
    await server.restart();
    await publish(2);
    await publish(2);
    await publish(3);
    for (let i = 0; i < 200 && got.length < 3; i++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 300));
    await follow.stop();
    expect(got.map((b) => readSignedRevocation(decode(b)).body.grant_id)).toEqual([1, 2, 3].map((i) => contentId({ revoked: i })));
  });
});

describe('testkit - a 3-server JetStream cluster', () => {
  it('replicates the streams three ways and keeps settling after the stream leader is killed', async () => {
    const cluster = await NatsCluster.start(3);
    cleanups.push(() => cluster.dispose());
    const names = channelNames('trio');
    const grant = contentId({ jcp_test_grant: 'trio' });
    const bus = await JetStreamBus.connect(cluster.urls, { names, replicas: 3, deadlineMs: 20_000 }, 30_000);
    cleanups.push(() => bus.close());
    const jsm = await jetstreamManager(bus.connection!);
    const info = await jsm.streams.info(names.statementStream);
    expect(info.config.num_replicas).toBe(3);
    const p = new ChannelPoint({ grantId: grant, windowUj: 100n, self: alice, bus });
    await p.settle();
    p.tryReserve(25n, 1_000n);
    p.commit(25n);
    expect((await p.settleNow()).ok).toBe(true);
    const leader = info.cluster?.leader;
    const idx = cluster.servers.findIndex((s) => s.name === leader);
    expect(idx).toBeGreaterThanOrEqual(0);
    await cluster.servers[idx]!.kill();
    const q = new ChannelPoint({ grantId: grant, windowUj: 100n, self: bob, bus });
    let r = await q.settle();
    for (let i = 0; i < 20 && !r.ok; i++) r = await q.settle();
    expect(r.ok ? r.peersUj : -1n).toBe(25n);
    await cluster.servers[idx]!.start();
  });
});

describe('testkit - the TCP proxy', () => {
  it('a cut proxy partitions a point from NATS: settlement fails until the link is healed', async () => {
    const proxy = await TcpProxy.start(4222);
    cleanups.push(() => proxy.close());
    const names = channelNames(`px${process.pid}`);
    const grant = contentId({ jcp_test_grant: `proxy-${process.pid}` });
    const bus = await JetStreamBus.connect(proxy.natsUrl, { names, deadlineMs: 1_000, requestTimeoutMs: 500 });
    cleanups.push(async () => {
      await bus.deleteStreams().catch(() => {});
      await bus.close();
    });
    const p = new ChannelPoint({ grantId: grant, windowUj: 100n, self: alice, bus });
    expect((await p.settle()).ok).toBe(true);
    proxy.cut();
    expect((await p.settleNow()).ok).toBe(false);
    expect(proxy.counts.cuts).toBe(1);
    proxy.heal();
    let r = await p.settleNow();
    for (let i = 0; i < 10 && !r.ok; i++) r = await p.settleNow();
    expect(r.ok).toBe(true);
  });
});
