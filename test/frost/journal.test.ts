/**
 * The nonce journal (frost/journal.ts): each commitment's nonces are handed out for exactly one
 * share, across restarts, torn writes and compaction.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { seededRng } from '../../core/index.ts';
import { commit, deal, FrostErrorCodes, isFrostError, journalKey, NonceJournal } from '../../frost/internal.ts';

const root = mkdtempSync(join(tmpdir(), 'jcp-frost-journal-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const rng = seededRng('test/frost/journal');
const d = deal({ min: 2, max: 3 }, rng);
if (!d.ok) throw new Error(d.error.why);
const share = d.value.shares[0]!;
const key = journalKey(share.signingShare, d.value.did, 1);
const S1 = 'a'.repeat(32);
const S2 = 'b'.repeat(32);
const COORD = 'did:key:z6MkCoordinatorOfTheseTests';
let n = 0;
const fresh = () => join(root, `j${++n}.journal`);

/** Writes `full` with bit `bit` of byte `at` flipped to `path`, opens it: the refusal code, or 'opened'. */
function openedWithFlip(path: string, full: Uint8Array, at: number, bit: number): string {
  const bad = Uint8Array.from(full);
  bad[at] = bad[at]! ^ bit;
  writeFileSync(path, bad);
  try {
    NonceJournal.open(path, key, 0).close();
    return 'opened';
  } catch (e) {
    return isFrostError(e) ? e.code : String(e);
  }
}

/**
 * A fresh journal holding one issued record per session and, with `useFirst`, then a used record
 * for the first session; its bytes, and where its second record starts.
 */
function journalOf(sessions: readonly string[], useFirst: boolean): { path: string; full: Buffer; second: number } {
  const path = fresh();
  const j = NonceJournal.open(path, key, 0);
  const cs = sessions.map((s) => {
    const c = commit(share, rng);
    j.issue(s, c.commitment, c.nonces, 0, COORD);
    return c;
  });
  if (useFirst) expect(j.take(sessions[0]!, cs[0]!.commitment, 1).ok).toBe(true);
  j.close();
  const full = readFileSync(path);
  // Each record: a 4-byte length, the body, an 8-byte check (12 bytes around the body).
  return { path, full, second: 12 + full.readUInt32BE(0) };
}

/** The state of `session` after reopening the journal at `path`, and the file's length after that. */
function reopened(path: string, session: string): { state: string | undefined; length: number } {
  const k = NonceJournal.open(path, key, 0);
  const state = k.forSession(session)?.state;
  k.close();
  return { state, length: readFileSync(path).length };
}

describe('nonce journal / one use per commitment', () => {
  it('a commitment is taken once; the second take is frost-nonce-used, also after reopening', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 1000);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 1000, COORD);
    const t = j.take(S1, c.commitment, 1001);
    expect(t.ok && t.value.hiding).toEqual(c.nonces.hiding);
    expect(j.take(S1, c.commitment, 1002)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    j.close();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const again = NonceJournal.open(path, key, 2000);
    expect(again.take(S1, c.commitment, 2001)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    expect(again.forSession(S1)?.state).toBe('used');
    again.close();
  });

  it('the used record is on disk before take returns (so the share can only leave after it)', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 0, COORD);
    const before = readFileSync(path).length;
    expect(j.take(S1, c.commitment, 1).ok).toBe(true);
    expect(readFileSync(path).length).toBeGreaterThan(before);
    j.close();
  });

  it('claim: a second claim is refused before the background fdatasync ends; the record survives a reopen', async () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 0, COORD);
    const first = j.claim(S1, c.commitment, 1);
    expect(first.ok && first.value.nonces.binding).toEqual(c.nonces.binding);
    expect(j.claim(S1, c.commitment, 2)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    expect(j.take(S1, c.commitment, 3)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    if (!first.ok) throw new Error('claim failed');
    await expect(first.value.durable).resolves.toBeUndefined();
    j.close();
    const again = NonceJournal.open(path, key, 10);
    expect(again.forSession(S1)?.state).toBe('used');
    expect(again.claim(S1, c.commitment, 11)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    again.close();
  });

  it('claim then close at once: close makes the used record durable and a reopen refuses the nonce', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 0, COORD);
    const r = j.claim(S1, c.commitment, 1);
    expect(r.ok).toBe(true);
    if (r.ok) r.value.durable.catch(() => undefined);
    j.close();
    const again = NonceJournal.open(path, key, 10);
    expect(again.take(S1, c.commitment, 11)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    again.close();
  });

  it('an issued, unused commitment survives a restart and can be signed with once', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 0, COORD);
    j.close();
    const k = NonceJournal.open(path, key, 10);
    const t = k.take(S1, c.commitment, 11);
    expect(t.ok && [t.value.hiding, t.value.binding]).toEqual([c.nonces.hiding, c.nonces.binding]);
    expect(k.take(S1, c.commitment, 12).ok).toBe(false);
    k.close();
  });

  it('refuse / unknown commitment, wrong session, released commitment, expired commitment', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const a = commit(share, rng);
    const b = commit(share, rng);
    expect(j.take(S1, a.commitment, 0)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_UNKNOWN } });
    j.issue(S1, a.commitment, a.nonces, 0, COORD);
    expect(j.take(S2, a.commitment, 0)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_UNKNOWN } });
    j.release(S1);
    expect(j.take(S1, a.commitment, 0)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    j.issue(S2, b.commitment, b.nonces, 0, COORD);
    j.close();
    const later = NonceJournal.open(path, key, 60 * 60_000, 60_000);
    expect(later.take(S2, b.commitment, 60 * 60_000)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.NONCE_USED } });
    later.close();
  });

  it('a torn last record (crash mid-append) is cut off; damage before the end is frost-journal-corrupt', () => {
    const { path, full } = journalOf([S1, S2], false);
    truncateSync(path, full.length - 5);
    const k = NonceJournal.open(path, key, 0);
    expect(k.forSession(S1)?.state).toBe('issued');
    expect(k.forSession(S2)).toBeUndefined();
    k.close();
    expect(openedWithFlip(path, full, 10, 0xff)).toBe(FrostErrorCodes.JOURNAL_CORRUPT);
  });

  it('a complete last record that fails its check is frost-journal-corrupt (a flipped bit must not forget a used nonce); a zero-filled tail is cut off', () => {
    // The used record is the second one: its 4-byte length field starts after the issued record.
    const { path, full, second } = journalOf([S1], true);
    const flips: [number, number][] = [
      [full.length - 3, 0x01],
      [full.length - 20, 0x01],
      [second + 3, 0x01],
      [second + 3, 0x40],
      [second + 2, 0x01],
    ];
    for (const [at, bit] of flips) expect(openedWithFlip(path, full, at, bit)).toBe(FrostErrorCodes.JOURNAL_CORRUPT);
    // A crash on a file system that extends the file before writing its data: zeros after the used record.
    writeFileSync(path, Buffer.concat([full, Buffer.alloc(40)]));
    expect(reopened(path, S1)).toEqual({ state: 'used', length: full.length });
  });

  it('a damaged length field in any record, not only the last, is frost-journal-corrupt (nothing after it is dropped)', () => {
    const { path, full, second } = journalOf([S1, S2], true);
    for (const [at, bit] of [
      [0, 0x40],
      [3, 0x80],
      [second, 0x80],
      [second + 2, 0x01],
      [second + 3, 0x20],
    ] as const) {
      expect(`${at}^${bit}: ${openedWithFlip(path, full, at, bit)}`).toBe(`${at}^${bit}: ${FrostErrorCodes.JOURNAL_CORRUPT}`);
      expect(readFileSync(path).length).toBe(full.length);
    }
    // A last record cut short and then zero-filled (a crash on a delayed-allocation file system)
    // still opens: the cut record is dropped, the used record before it kept.
    for (const zeros of [300, 2000]) {
      writeFileSync(path, Buffer.concat([full, full.subarray(second, second + 30), Buffer.alloc(zeros)]));
      expect(reopened(path, S1)).toEqual({ state: 'used', length: full.length });
    }
  });

  it('remembers which coordinator each commitment was issued to, across a restart', () => {
    const path = fresh();
    const j = NonceJournal.open(path, key, 0);
    const c = commit(share, rng);
    j.issue(S1, c.commitment, c.nonces, 0, COORD);
    j.close();
    const k = NonceJournal.open(path, key, 1);
    expect(k.forSession(S1)).toMatchObject({ state: 'issued', coordinator: COORD });
    k.close();
  });

  it('property: across any interleaving of issue, take, release and restart, no commitment is taken twice', () => {
    const pool = Array.from({ length: 4 }, () => commit(share, rng));
    const op = fc.oneof(
      fc.record({ k: fc.constant('issue' as const), i: fc.nat(3) }),
      fc.record({ k: fc.constant('take' as const), i: fc.nat(3) }),
      fc.record({ k: fc.constant('release' as const), i: fc.nat(3) }),
      fc.record({ k: fc.constant('restart' as const), i: fc.nat(3) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 25 }), (ops) => {
        const path = fresh();
        let j = NonceJournal.open(path, key, 0);
        const issued = new Set<number>();
        const taken = new Map<number, number>();
        for (const o of ops) {
          const c = pool[o.i]!;
          const session = `${o.i}`.repeat(32);
          if (o.k === 'issue' && !issued.has(o.i)) {
            // Fresh nonces each time: copies, since a successful share zeroes them.
            j.issue(
              session,
              c.commitment,
              { hiding: Uint8Array.from(c.nonces.hiding), binding: Uint8Array.from(c.nonces.binding) },
              0,
              COORD,
            );
            issued.add(o.i);
          } else if (o.k === 'take') {
            if (j.take(session, c.commitment, 0).ok) taken.set(o.i, (taken.get(o.i) ?? 0) + 1);
          } else if (o.k === 'release') j.release(session);
          else {
            j.close();
            j = NonceJournal.open(path, key, 0);
          }
        }
        j.close();
        return [...taken.values()].every((x) => x === 1);
      }),
      { numRuns: 150 },
    );
  });
});
