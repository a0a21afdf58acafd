/**
 * The holder's decision journal across a crash (spec §2.2; docs/frost.md "Approvals"): a record
 * cut short by a kill mid-append is cut off when the journal is opened again, so the records
 * appended after the restart stay readable, by the holder (its session bindings) and by an
 * auditor (`jcp frost approvals --journal`).
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { actorFromSeed, type Did } from '../../core/index.ts';
import { DecisionJournal, readDecisionFile, sealDecision } from '../../frost/internal.ts';

const dir = mkdtempSync(join(tmpdir(), 'jcp-decision-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const holder = actorFromSeed(new Uint8Array(32).fill(9));
const group = actorFromSeed(new Uint8Array(32).fill(8)).did as Did;

function record(session: string, decision: 'approve' | 'refuse'): Uint8Array {
  return sealDecision(
    {
      proto: 'jcp-frost-approval/1',
      holder: holder.did,
      group,
      identifier: 1,
      session,
      request: '11'.repeat(32),
      policy: '22'.repeat(32),
      policy_kind: 'rules',
      decision,
      reason: `${decision} ${session}`,
      at_s: 1_760_000_000,
      action: 'write_file',
      resource: '33'.repeat(32),
    },
    holder,
  );
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
