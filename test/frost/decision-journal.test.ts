/**
 * The holder's decision journal across a crash (spec §2.2; docs/frost.md "Approvals"): a record
 * cut short by a kill mid-append is cut off when the journal is opened again, so the records
 * appended after the restart stay readable, by the holder (its session bindings) and by an
 * auditor (`jcp frost approvals --journal`). A holder's own records (`appendSealed`) bind their
 * session at once and are durable when their promise resolves. The approvals stream is found
 * once per connection, and made again when it went away.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { actorFromSeed, type Did } from '../../core/index.ts';
import {
  approvalsStream,
  type DecisionBody,
  DecisionJournal,
  publishDecision,
  readDecisionFile,
  readDecisionStream,
  sealDecision,
} from '../../frost/internal.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'jcp-decision-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const holder = actorFromSeed(new Uint8Array(32).fill(9));
const group = actorFromSeed(new Uint8Array(32).fill(8)).did as Did;

function body(session: string, decision: 'approve' | 'refuse', reason = `${decision} ${session}`): DecisionBody {
  return {
    proto: 'jcp-frost-approval/1',
    holder: holder.did,
    group,
    identifier: 1,
    session,
    request: '11'.repeat(32),
    policy: '22'.repeat(32),
    policy_kind: 'rules',
    decision,
    reason,
    at_s: 1_760_000_000,
    action: 'write_file',
    resource: '33'.repeat(32),
  };
}

function record(session: string, decision: 'approve' | 'refuse'): Uint8Array {
  return sealDecision(body(session, decision), holder);
}

function frame(r: Uint8Array): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(r.length);
  return Buffer.concat([head, r]);
}

describe('decision journal / a torn last record', () => {
  it('restart / the torn tail is cut off on open; records appended afterwards read back, and bind their sessions', () => {
    const path = join(dir, `approvals-${randomBytes(4).toString('hex')}.journal`);
    const a = randomBytes(16).toString('hex');
    const b = randomBytes(16).toString('hex');
    const c = randomBytes(16).toString('hex');
    const j1 = DecisionJournal.open(path);
    j1.append(record(a, 'approve'));
    j1.close();
    // Killed mid-append: only part of the next frame reached the disk.
    const torn = frame(record(b, 'approve'));
    appendFileSync(path, torn.subarray(0, torn.length >> 1));
    const j2 = DecisionJournal.open(path);
    expect(j2.forSession(group, 1, a)?.approve).toBe(true);
    expect(j2.forSession(group, 1, b)).toBeUndefined();
    j2.append(record(c, 'refuse'));
    j2.close();
    const read = readDecisionFile(path);
    expect(read.map((d) => (d.record ? `${d.record.body.session} ${d.record.valid}` : `malformed ${d.malformed}`))).toEqual([
      `${a} true`,
      `${c} true`,
    ]);
    const j3 = DecisionJournal.open(path);
    expect(j3.forSession(group, 1, c)).toMatchObject({ approve: false, reason: `refuse ${c}` });
    j3.close();
    expect(readFileSync(path).length).toBe(frame(record(a, 'approve')).length + frame(record(c, 'refuse')).length);
  });
});

describe('decision journal / own records with a background fdatasync', () => {
  it('appendSealed binds the session before it returns, resolves once durable, and reads back as the record it sealed', async () => {
    const path = join(dir, `approvals-${randomBytes(4).toString('hex')}.journal`);
    const a = randomBytes(16).toString('hex');
    const b = randomBytes(16).toString('hex');
    const j = DecisionJournal.open(path);
    const long = 'x'.repeat(2500);
    const da = j.appendSealed(sealDecision(body(a, 'approve', long), holder), body(a, 'approve', long));
    const db = j.appendSealed(sealDecision(body(b, 'refuse'), holder), body(b, 'refuse'));
    // Bound at once (a second request for the session sees the decision while the disk works).
    expect(j.forSession(group, 1, a)).toMatchObject({ approve: true, reason: 'x'.repeat(2000) });
    expect(j.forSession(group, 1, b)).toMatchObject({ approve: false, reason: `refuse ${b}` });
    await Promise.all([da, db, j.settled()]);
    j.close();
    const read = readDecisionFile(path);
    expect(read.map((d) => `${d.record?.body.session} ${d.record?.body.decision} ${d.record?.valid}`)).toEqual([
      `${a} approve true`,
      `${b} refuse true`,
    ]);
    // What the holder indexed is what a restart reads back from the record.
    const again = DecisionJournal.open(path);
    expect(again.forSession(group, 1, a)).toEqual(j.forSession(group, 1, a));
    again.close();
  });
});

describe('decision records on the approvals stream', () => {
  it('a publish after the stream was deleted makes it again (the stream is only looked up once per connection)', async () => {
    const nc = await connect({ servers: NATS_URL });
    const prefix = uniquePrefix('decisions');
    try {
      const a = randomBytes(16).toString('hex');
      const b = randomBytes(16).toString('hex');
      expect(await publishDecision(nc, prefix, group, 1, record(a, 'approve'))).toBe(1);
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(approvalsStream(prefix));
      expect(await publishDecision(nc, prefix, group, 1, record(b, 'refuse'))).toBe(1);
      const read = await readDecisionStream(nc, prefix, group);
      expect(read.map((d) => `${d.seq} ${d.record?.body.session} ${d.record?.valid}`)).toEqual([`1 ${b} true`]);
    } finally {
      await cleanupPrefix(nc, prefix);
      await nc.close();
    }
  });
});
