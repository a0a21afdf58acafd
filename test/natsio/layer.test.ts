/**
 * The NATS layer against real servers: retry to a deadline against a server that starts late or
 * is stopped (a nats-server of our own on a free loopback port), create-if-missing idempotence
 * and follow-from-start ordering (the shared NATS on 127.0.0.1:4222, unique names, removed after).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, NatsServer } from '../../testkit/index.ts';
import {
  ensureStream,
  type FollowedMsg,
  followFromStart,
  NATS_DEADLINE,
  NATS_UNAVAILABLE,
  NatsLink,
  retryUntil,
  streamConfig,
} from '../../natsio/index.ts';

const NATS = 'nats://127.0.0.1:4222';
const tag = `T${randomBytes(5).toString('hex')}`;
const enc = new TextEncoder();

describe('natsio retry', () => {
  it('retries with backoff until the deadline, then fails nats-deadline with the last error', async () => {
    let attempts = 0;
    const t0 = Date.now();
    const err = await retryUntil(
      'op',
      async () => {
        attempts++;
        throw new Error(`no ${attempts}`);
      },
      { deadlineMs: 300 },
    ).catch((e) => e);
    const took = Date.now() - t0;
    expect(err.code).toBe(NATS_DEADLINE);
    expect(err.message).toBe(`op failed within 300 ms: no ${attempts}`);
    expect(took).toBeGreaterThanOrEqual(290);
    // 25, 50, 100, 200 ms pauses fit in 300 ms: a handful of attempts, not a busy loop
    expect(attempts).toBeGreaterThanOrEqual(3);
    expect(attempts).toBeLessThanOrEqual(6);
  });

  it('a late success is returned; a zero deadline still makes one attempt; stopped() ends it at once', async () => {
    let n = 0;
    expect(await retryUntil('op', async () => (++n < 3 ? Promise.reject(new Error('not yet')) : n), { deadlineMs: 2_000 })).toBe(3);
    let one = 0;
    await retryUntil('op', async () => void one++, { deadlineMs: 0 });
    expect(one).toBe(1);
    const err = await retryUntil('op', async () => 1, { deadlineMs: 1_000, stopped: () => 'closed' }).catch((e) => e);
    expect(err.message).toBe('op: closed');
  });
});

describe('natsio link against a server that starts late or stops', () => {
  let port: number;
  let server: NatsServer | undefined;
  let link: NatsLink | undefined;

  beforeAll(async () => {
    port = await freePort();
  });

  afterAll(async () => {
    await link?.close();
    await server?.dispose();
  });

  it('waits for a server that starts late: not ready (nats-unavailable, with the reason) before, connected after', async () => {
    link = NatsLink.start(`nats://127.0.0.1:${port}`, { name: 'natsio-test', requestTimeoutMs: 500, deadlineMs: 3_000 });
    const early = await link.ready(400).catch((e) => e);
    expect(early.code).toBe(NATS_UNAVAILABLE);
    expect(early.message).toMatch(/not ready within 400 ms \(.*refused/);
    server = await NatsServer.start({ port });
    const nc = await link.ready(10_000);
    expect(nc.isClosed()).toBe(false);
    expect(link.connected).toBe(true);
  });

  it('an operation while the server is stopped is retried to its deadline; one that outlives the outage succeeds', async () => {
    const { jsm } = await link!.jetstream();
    const cfg = streamConfig({ name: `${tag}_LATE`, subjects: [`${tag.toLowerCase()}.late.>`], maxMsgsPerSubject: -1, discard: 'new' });
    await ensureStream(jsm, cfg);
    const { js } = await link!.jetstream();
    await server!.stop();
    const t0 = Date.now();
    const failed = await link!
      .retry('publish', () => js.publish(`${tag.toLowerCase()}.late.a`, enc.encode('x'), { timeout: 300 }))
      .catch((e) => e);
    expect(failed.code).toBe(NATS_DEADLINE);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2_900);
    expect(link!.counts.publishRetries).toBeGreaterThan(1);
    // stopped again, restarted within the deadline: the same call succeeds
    const pending = link!.retry('publish', () => js.publish(`${tag.toLowerCase()}.late.b`, enc.encode('y'), { msgID: 'b', timeout: 300 }));
    await new Promise((r) => setTimeout(r, 500));
    await server!.start();
    const ack = await pending;
    expect(ack.stream).toBe(`${tag}_LATE`);
    expect(link!.counts.disconnects).toBeGreaterThanOrEqual(1);
  });
});

describe('natsio streams and follow on the shared NATS', () => {
  let link: NatsLink;
  const names: string[] = [];

  beforeAll(async () => {
    link = NatsLink.start(NATS, { name: 'natsio-test' });
    await link.ready(10_000);
  });

  afterAll(async () => {
    const { jsm } = await link.jetstream();
    for (const n of names) await jsm.streams.delete(n).catch(() => false);
    await link.close();
  });

  it('create-if-missing: created once, then unchanged (same creation time, messages kept); five at once all succeed on one stream', async () => {
    const { jsm, js } = await link.jetstream();
    const cfg = streamConfig({ name: `${tag}_IDEM`, subjects: [`${tag.toLowerCase()}.idem.>`], maxMsgsPerSubject: -1, discard: 'new' });
    names.push(cfg.name);
    expect(await ensureStream(jsm, cfg)).toBe('created');
    const before = await jsm.streams.info(cfg.name);
    await js.publish(`${tag.toLowerCase()}.idem.a`, enc.encode('kept'));
    expect(await ensureStream(jsm, cfg)).toBe('unchanged');
    const after = await jsm.streams.info(cfg.name);
    expect(after.created).toEqual(before.created);
    expect(after.state.messages).toBe(1);
    expect(after.config.deny_delete).toBe(true);

    const raced = streamConfig({ name: `${tag}_RACE`, subjects: [`${tag.toLowerCase()}.race.>`], maxMsgsPerSubject: 1, discard: 'old' });
    names.push(raced.name);
    const links = [1, 2, 3, 4].map(() => NatsLink.start(NATS));
    const others = await Promise.all(links.map((l) => l.jetstream(10_000)));
    // the server answers an identical create as a success, so racers may all say 'created'
    const outcomes = await Promise.all([jsm, ...others.map((o) => o.jsm)].map((m) => ensureStream(m, raced)));
    expect(outcomes.every((o) => o === 'created' || o === 'unchanged')).toBe(true);
    const made = await jsm.streams.info(raced.name);
    expect(await ensureStream(others[0]!.jsm, raced)).toBe('unchanged');
    expect((await jsm.streams.info(raced.name)).created).toEqual(made.created);
    expect(made.config.max_msgs_per_subject).toBe(1);
    for (const l of links) await l.close();
  });

  it('reconcile: an existing stream that differs is updated, one that matches is left alone', async () => {
    const { jsm } = await link.jetstream();
    const cfg = streamConfig({ name: `${tag}_REC`, subjects: [`${tag.toLowerCase()}.rec.a.>`], maxMsgsPerSubject: -1, discard: 'new' });
    names.push(cfg.name);
    await ensureStream(jsm, cfg);
    const wider = [`${tag.toLowerCase()}.rec.a.>`, `${tag.toLowerCase()}.rec.b.>`];
    const reconcile = (c: { subjects?: string[] }) =>
      JSON.stringify(c.subjects) === JSON.stringify(wider) ? undefined : { subjects: wider };
    expect(await ensureStream(jsm, cfg, { reconcile })).toBe('updated');
    expect((await jsm.streams.info(cfg.name)).config.subjects).toEqual(wider);
    expect(await ensureStream(jsm, cfg, { reconcile })).toBe('unchanged');
  });

  it('follow-from-start: the backlog in stream order, caughtUp after it, then live messages, none twice; a filter keeps to its subjects', async () => {
    const { jsm, js } = await link.jetstream();
    const root = tag.toLowerCase();
    const cfg = streamConfig({ name: `${tag}_FOLLOW`, subjects: [`${root}.f.>`], maxMsgsPerSubject: -1, discard: 'new' });
    names.push(cfg.name);
    await ensureStream(jsm, cfg);
    for (let i = 0; i < 30; i++) await js.publish(`${root}.f.${i % 3 === 0 ? 'x' : 'y'}`, enc.encode(String(i)));

    const all: FollowedMsg[] = [];
    let atCaughtUp = -1;
    const f = await followFromStart(jsm, js, cfg.name, (m) => all.push(m));
    await f.caughtUp.then(() => {
      atCaughtUp = all.length;
    });
    expect(atCaughtUp).toBe(30);
    expect(all.map((m) => new TextDecoder().decode(m.data))).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
    expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));

    const xs: string[] = [];
    const fx = await followFromStart(jsm, js, cfg.name, (m) => xs.push(new TextDecoder().decode(m.data)), { filter: `${root}.f.x` });
    await fx.caughtUp;
    expect(xs).toEqual(['0', '3', '6', '9', '12', '15', '18', '21', '24', '27']);

    for (let i = 30; i < 35; i++) await js.publish(`${root}.f.x`, enc.encode(String(i)));
    const until = Date.now() + 5_000;
    while ((all.length < 35 || xs.length < 15) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(all.slice(30).map((m) => new TextDecoder().decode(m.data))).toEqual(['30', '31', '32', '33', '34']);
    expect(xs.slice(10)).toEqual(['30', '31', '32', '33', '34']);
    expect(new Set(all.map((m) => m.seq)).size).toBe(all.length);
    await f.stop();
    await fx.stop();

    // an empty stream is caught up at once
    const empty = streamConfig({ name: `${tag}_EMPTY`, subjects: [`${root}.e.>`], maxMsgsPerSubject: -1, discard: 'new' });
    names.push(empty.name);
    await ensureStream(jsm, empty);
    const fe = await followFromStart(jsm, js, empty.name, () => {});
    await fe.caughtUp;
    await fe.stop();
  });
});
