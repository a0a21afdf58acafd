/**
 * The JetStream bus against the real NATS on 127.0.0.1:4222, with unique stream names per run.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Actor,
  actorFromSeed,
  contentId,
  encode,
  grantId,
  seededRng,
  signedGrantToCbor,
  signedRevocationToCbor,
  signedStatementToCbor,
  signGrant,
  signRevocation,
  signStatement,
} from '../../core/index.ts';
import { auditChannel, type BusEvent, channelNames, ChannelPoint, JetStreamBus } from '../../channel/index.ts';

const NATS = 'nats://127.0.0.1:4222';
const names = channelNames(`t${randomBytes(5).toString('hex')}`);
const actor = (name: string): Actor => actorFromSeed(seededRng(`jetstream/${name}`)(32));
const alice = actor('alice');
const bob = actor('bob');
const grant = contentId({ jcp_test_grant: `jetstream-${names.root}` });

let bus: JetStreamBus;
let bus2: JetStreamBus;

beforeAll(async () => {
  bus = await JetStreamBus.connect(NATS, { names });
  bus2 = await JetStreamBus.connect(NATS, { names });
});

afterAll(async () => {
  await bus.deleteStreams();
  await bus.close();
  await bus2.close();
});

function statementBytes(who: Actor, spent: bigint, seq: number): Uint8Array {
  return encode(signedStatementToCbor(signStatement({ grant_id: grant, point: who.did, spent_uj: spent, seq }, who)));
}

describe('jetstream bus - streams', () => {
  it('creates both streams on start, idempotently, with one statement kept per subject and no direct get', async () => {
    const jsm = await jetstreamManager(bus.connection!);
    const st = await jsm.streams.info(names.statementStream);
    const rv = await jsm.streams.info(names.revocationStream);
    expect([st.config.max_msgs_per_subject, st.config.allow_direct ?? false, st.config.deny_delete]).toEqual([1, false, true]);
    expect([rv.config.max_msgs_per_subject, rv.config.subjects]).toEqual([-1, [`${names.root}.rev.>`]]);
    const again = await JetStreamBus.connect(NATS, { names });
    await again.close();
    expect((await jsm.streams.info(names.statementStream)).created).toEqual(st.created);
  });
});

describe('jetstream bus - statements', () => {
  it('keeps only the latest statement of each (grant, point) and reads it back', async () => {
    await bus.publishStatement(grant, alice.did, statementBytes(alice, 10n, 1), 'a1');
    await bus.publishStatement(grant, alice.did, statementBytes(alice, 20n, 2), 'a2');
    await bus.publishStatement(grant, bob.did, statementBytes(bob, 5n, 1), 'b1');
    const latest = await bus2.readLatest(grant);
    expect(latest.length).toBe(2);
    const audit = await auditChannel(bus2, grant, 100n);
    expect(audit.totalUj).toBe(25n);
  });

  it('a retried publish with the same message id is stored once', async () => {
    const g = contentId({ jcp_test_grant: `dedupe-${names.root}` });
    const bytes = encode(signedStatementToCbor(signStatement({ grant_id: g, point: alice.did, spent_uj: 1n, seq: 1 }, alice)));
    const jsm = await jetstreamManager(bus.connection!);
    const before = (await jsm.streams.info(names.statementStream)).state.last_seq;
    await bus.publishStatement(g, alice.did, bytes, 'same-id');
    await bus.publishStatement(g, alice.did, bytes, 'same-id');
    const after = (await jsm.streams.info(names.statementStream)).state.last_seq;
    expect(after - before).toBe(1);
  });

  it('two points settle over NATS and each counts the other one spend', async () => {
    const g = contentId({ jcp_test_grant: `settle-${names.root}` });
    const a = new ChannelPoint({ grantId: g, windowUj: 100n, self: alice, bus });
    const b = new ChannelPoint({ grantId: g, windowUj: 100n, self: bob, bus: bus2 });
    expect((await a.settle()).ok).toBe(true);
    expect((await b.settle()).ok).toBe(true);
    expect(a.tryReserve(70n, 1_000n).ok).toBe(true);
    a.commit(70n);
    await a.settleNow();
    const r = await b.settleNow();
    expect(r.ok ? r.peersUj : -1n).toBe(70n);
    const audit = await auditChannel(bus, g, 50n);
    expect([audit.totalUj, audit.overdraftUj, audit.proofVerifies]).toEqual([70n, 20n, true]);
  });

  it('the channel grant stored on the stream gives the auditor its budget', async () => {
    const sg = signGrant(
      {
        issuer: alice.did,
        subject: bob.did,
        capability: { resource: contentId({ r: 1 }), actions: ['read'] },
        budget_uj: 64n,
        expiry: 0,
        nonce: new Uint8Array(16),
      },
      alice,
    );
    const id = grantId(sg.grant);
    await bus.publishGrant(id, encode(signedGrantToCbor(sg)));
    const audit = await auditChannel(bus2, id);
    expect([audit.budgetSource, audit.budgetUj]).toEqual(['stream', 64n]);
  });
});

describe('jetstream bus - revocations', () => {
  it('a follower gets every stored revocation from the start, then new ones, each once', async () => {
    const rng = seededRng(`revocations/${names.root}`);
    const rev = (i: number) => signRevocation(contentId({ revoked: i, root: names.root }), alice, rng(16));
    for (const i of [1, 2, 3]) {
      const sr = rev(i);
      const bytes = encode(signedRevocationToCbor(sr));
      await bus.publishRevocation(sr.body.grant_id, bytes, `rev-${i}`);
      await bus.publishRevocation(sr.body.grant_id, bytes, `rev-${i}`);
    }
    const got: Uint8Array[] = [];
    const follow = await bus2.followRevocations((b) => got.push(b));
    await follow.caughtUp;
    expect(got.length).toBe(3);
    const sr = rev(4);
    await bus.publishRevocation(sr.body.grant_id, encode(signedRevocationToCbor(sr)), 'rev-4');
    for (let i = 0; i < 100 && got.length < 4; i++) await new Promise((r) => setTimeout(r, 20));
    expect(got.length).toBe(4);
    await follow.stop();
  });
});

describe('jetstream bus - slow consumers are reported', () => {
  it('a subscription that falls behind raises a slow-consumer event', async () => {
    const events: BusEvent[] = [];
    bus.onEvent((e) => events.push(e));
    const nc = bus.connection!;
    const sub = nc.subscribe(`${names.root}.slow`, { slow: 5 });
    for (let i = 0; i < 50; i++) nc.publish(`${names.root}.slow`, new Uint8Array([i]));
    await nc.flush();
    for (let i = 0; i < 50 && !events.some((e) => e.type === 'slow-consumer'); i++) await new Promise((r) => setTimeout(r, 20));
    sub.unsubscribe();
    expect(events.some((e) => e.type === 'slow-consumer')).toBe(true);
    expect(bus.counts.slowConsumers).toBeGreaterThan(0);
  });
});
