/**
 * The shared call journal (bridge/journal-nats.ts) against the NATS on 127.0.0.1:4222: two
 * journals (two replicas) racing on one call agree on one stamp; a closed call or one past the
 * window is a new call; the first signature recorded wins; keys are digests (the call key, which
 * names the arguments, never reaches NATS); a full bucket refuses `journal-full`; NATS unreachable
 * refuses `journal-unavailable`. Each test has its own bucket, deleted afterwards.
 */
import { randomBytes } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { entryBound, JournalError, NatsCallJournal, type NatsJournalOptions } from '../../bridge/index.ts';

const NATS = 'nats://127.0.0.1:4222';
const hex = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('hex'));

describe('shared call journal (NATS JetStream KV)', () => {
  let nc: NatsConnection;
  const opened: NatsCallJournal[] = [];
  const buckets = new Set<string>();
  const journal = (bucket: string, o: Partial<NatsJournalOptions> = {}) => {
    buckets.add(bucket);
    const j = new NatsCallJournal({ servers: NATS, bucket, ...o });
    opened.push(j);
    return j;
  };
  const fresh = () => `jcp_test_journal_${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    nc = await natsConnect({ servers: NATS, reconnect: false });
  });
  afterEach(async () => {
    for (const j of opened.splice(0)) await j.close();
    const jsm = await jetstreamManager(nc);
    for (const b of buckets) await jsm.streams.delete(`KV_${b}`).catch(() => undefined);
    buckets.clear();
  });
  afterAll(async () => {
    await nc.close();
  });

  test('two replicas racing on one call get one stamp; a closed call, or one past the window, is a new call', async () => {
    const b = fresh();
    const [a, c] = [journal(b, { windowS: 60 }), journal(b, { windowS: 60 })];
    const [x, y] = await Promise.all([a.open('call-1', 'content', 1_000), c.open('call-1', 'content', 1_001)]);
    expect(hex(x.nonce)).toBe(hex(y.nonce));
    expect(x.nowS).toBe(y.nowS);
    expect([x.resent, y.resent].sort()).toEqual([false, true]);
    // Another key is another call.
    const other = await a.open('call-2', 'content', 1_000);
    expect(other.resent).toBe(false);
    expect(hex(other.nonce)).not.toBe(hex(x.nonce));
    // Answered on one replica, then the same call on the other (the second of two racing replicas,
    // or a retry whose answer was lost past the bridge) within the answered window: the same stamp.
    await a.end('call-1');
    const racing = await c.open('call-1', 'content', 1_002, {});
    expect({ resent: racing.resent, nonce: hex(racing.nonce), nowS: racing.nowS }).toEqual({
      resent: true,
      nonce: hex(x.nonce),
      nowS: x.nowS,
    });
    // Past the answered window (30 s after its `now`): a new call.
    expect(await c.open('call-1', 'content', 1_002)).toMatchObject({ resent: false }); // named by an MCP id alone: new once answered
    await c.end('call-1');
    const after = await c.open('call-1', 'content', 1_033, {});
    expect(after.resent).toBe(false);
    expect(hex(after.nonce)).not.toBe(hex(x.nonce));
    // Open, but opened more than the window ago: a new call.
    const late = await a.open('call-1', 'content', 1_033 + 61);
    expect(late.resent).toBe(false);
    expect(late.nowS).toBe(1_094);
  });

  test('an answered call is replayed for its own session only; another session is a new call', async () => {
    const b = fresh();
    const [a, c] = [journal(b), journal(b)];
    const first = await a.open('s-1', 'content', 7_000, { session: 'session-a' });
    await a.end('s-1');
    expect(await c.open('s-1', 'content', 7_001, { session: 'session-a' })).toEqual({ ...first, resent: true });
    const other = await c.open('s-1', 'content', 7_002, { session: 'session-b' });
    expect(other).toMatchObject({ resent: false, nowS: 7_002 });
    const off = journal(fresh(), { answeredWindowS: 0 });
    await off.open('k', 'content', 7_000, {});
    await off.end('k');
    expect(await off.open('k', 'content', 7_000, {})).toMatchObject({ resent: false });
    // The session is kept as a digest: the bucket never holds a session id (a bearer of the session).
    const kv = await new Kvm(nc).open(b);
    const values: string[] = [];
    for await (const k of await kv.keys()) values.push(new TextDecoder().decode((await kv.get(k))!.value));
    expect(values).toHaveLength(1);
    expect(values[0]).toMatch(/"scope":"[0-9a-f]{32}"/);
    expect(values[0]).not.toContain('session-');
  });

  test('the first signature recorded for an open call wins; a re-send carries it', async () => {
    const b = fresh();
    const [a, c] = [journal(b), journal(b)];
    await a.open('t-1', 'content', 2_000);
    const mine = new Uint8Array(64).fill(1);
    const theirs = new Uint8Array(64).fill(2);
    expect(await a.signed('t-1', mine)).toBeUndefined();
    expect(hex(await c.signed('t-1', theirs))).toBe(hex(mine));
    const again = await c.open('t-1', 'content', 2_001);
    expect(again.resent).toBe(true);
    expect(hex(again.signature)).toBe(hex(mine));
  });

  test('keys are digests of the call key: the call key (arguments) never reaches NATS', async () => {
    const b = fresh();
    const secret = 'call-with-secret-arguments-hunter2';
    await journal(b).open(secret, 'content', 3_000);
    const keys: string[] = [];
    for await (const k of await (await new Kvm(nc).open(b)).keys()) keys.push(k);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(keys[0]).not.toContain('hunter2');
  });

  test('a full bucket refuses the call journal-full (never a fresh stamp)', async () => {
    const j = journal(fresh(), { maxBytes: 4096 });
    let refused: unknown;
    for (let i = 0; i < 200 && refused === undefined; i++) {
      await j.open(`fill-${i}`, 'content', 4_000).catch((e: unknown) => {
        refused = e;
      });
    }
    expect(refused).toBeInstanceOf(JournalError);
    expect((refused as JournalError).code).toBe('journal-full');
  });

  test('at its bound the bucket refuses new calls journal-full and never drops an open one (several bucket name lengths)', async () => {
    // Each answered call is opened and closed (an update of its key); an open call whose client
    // went away must outlive them all: its re-send is the same stamp, never a fresh one.
    for (const len of [6, 11, 17, 23, 30, 41]) {
      const b = `jt${randomBytes(32).toString('hex')}`.slice(0, len);
      const j = journal(b, { windowS: 300, maxBytes: 4096 });
      const held = await j.open('held-open-call', 'content', 6_000);
      expect(held.resent).toBe(false);
      const outcomes: string[] = [];
      for (let i = 0; i < 40; i++) {
        const s = await j.open(`answered-${i}`, 'content', 6_000).catch((e: unknown) => e);
        if (s instanceof JournalError) outcomes.push(s.code);
        else {
          outcomes.push('new');
          await j.end(`answered-${i}`);
        }
      }
      expect(outcomes, `bucket ${b}`).toContain('journal-full');
      const again = await j.open('held-open-call', 'content', 6_001);
      expect({ bucket: b, resent: again.resent, nonce: hex(again.nonce) }).toEqual({ bucket: b, resent: true, nonce: hex(held.nonce) });
      const { state } = await (await jetstreamManager(nc)).streams.info(`KV_${b}`);
      expect(state.bytes, `bucket ${b}`).toBeLessThanOrEqual(4096);
    }
  });

  test('a bucket an earlier bridge bounded by bytes is converted to a count bound (no eviction)', async () => {
    const b = fresh();
    buckets.add(b);
    await new Kvm(nc).create(b, { history: 1, max_bytes: 8192 });
    const j = journal(b, { maxBytes: 1 << 20 });
    await j.ready();
    const { config } = await (await jetstreamManager(nc)).streams.info(`KV_${b}`);
    expect({ max_bytes: config.max_bytes, max_msgs: config.max_msgs, discard: config.discard }).toEqual({
      max_bytes: -1,
      max_msgs: entryBound(8192, b),
      discard: 'new',
    });
  });

  test('an entry not written by a journal for this call key (planted by another NATS writer) is not taken as its stamp', async () => {
    const b = fresh();
    const j = journal(b);
    await j.open('victim', 'content', 8_000, {});
    await j.end('victim');
    const kv = await new Kvm(nc).open(b);
    const keys: string[] = [];
    for await (const k of await kv.keys()) keys.push(k);
    // Rewritten as an open call from 200 s ago (the attack: every later call with the key would be `result-unknown`).
    const planted = { now: 7_800, nonce: 'ab'.repeat(16), state: 'open' };
    await kv.put(keys[0]!, new TextEncoder().encode(JSON.stringify(planted)));
    const next = await j.open('victim', 'content', 8_001, {});
    expect({ resent: next.resent, nowS: next.nowS }).toEqual({ resent: false, nowS: 8_001 });
    expect(hex(next.nonce)).not.toBe(planted.nonce);
    // A genuine entry copied under another key does not verify there either.
    await j.open('other', 'content', 8_002);
    const copied = (await kv.get(keys[0]!))!.value;
    const otherKey = (await (async () => {
      const all: string[] = [];
      for await (const k of await kv.keys()) all.push(k);
      return all.find((k) => k !== keys[0]);
    })())!;
    await kv.put(otherKey, copied);
    expect(await j.open('other', 'content', 8_003)).toMatchObject({ resent: false, nowS: 8_003 });
  });

  test('NATS unreachable: the call is refused journal-unavailable', async () => {
    const j = new NatsCallJournal({ servers: 'nats://127.0.0.1:1', bucket: fresh(), link: { deadlineMs: 300 } });
    opened.push(j);
    const e = await j.open('call', 'content', 5_000).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(JournalError);
    expect((e as JournalError).code).toBe('journal-unavailable');
  });
});
