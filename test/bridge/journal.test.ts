/** The bridge's call journal (bridge/journal.ts): re-sends keep their stamp, real calls never share one. */
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { CallJournal, randomSaltBase, saltText } from '../../bridge/index.ts';
import { tempDir } from '../node/fixtures.ts';

describe('bridge journal', () => {
  test('salt / insignificant JSON whitespace, k in base 4 over space, tab, LF, CR', () => {
    expect(saltText(0)).toBe('');
    expect(saltText(1)).toBe('\t');
    expect(saltText(3)).toBe('\r');
    expect(saltText(4)).toBe(' \t');
    expect(saltText(1000).length).toBe(5);
    const seen = new Set(Array.from({ length: 5000 }, (_, k) => saltText(k)));
    expect(seen.size).toBe(5000);
    expect(JSON.parse(`{"a":1}${saltText(4095)}`)).toEqual({ a: 1 });
  });

  test('identical calls in one second: the clock second, each its own random nonce, no salt', () => {
    const j = new CallJournal({}, 100);
    const stamps = Array.from({ length: 3 }, (_, i) => {
      const st = j.stampFor(`call-${i}`, 'same', 100);
      j.begin(`call-${i}`, 'same', st);
      return st;
    });
    expect(stamps.map((s) => [s.nowS, s.salt, s.resent, s.nonce?.length])).toEqual([
      [100, 0, false, 16],
      [100, 0, false, 16],
      [100, 0, false, 16],
    ]);
    expect(new Set(stamps.map((s) => Buffer.from(s.nonce!).toString('hex'))).size).toBe(3);
    // A clock that stepped back is taken as it is: the nonce keeps the calls apart.
    expect(j.stampFor('call-9', 'same', 99)).toMatchObject({ nowS: 99, salt: 0, resent: false });
  });

  test('saltBase / still accepted (earlier bridges set it), no longer changes a stamp', () => {
    const j = new CallJournal({ saltBase: 4000 }, 100);
    expect(j.stampFor('call-1', 'same', 100)).toMatchObject({ nowS: 100, salt: 0, resent: false });
    expect(() => new CallJournal({ saltBase: -1 })).toThrow(RangeError);
    expect(randomSaltBase()).toBeLessThan(4 ** 10);
  });

  test('re-send / an open call keeps its stamp (now and nonce) until its answer is delivered', () => {
    const j = new CallJournal({}, 100);
    const a = j.stampFor('k', 'c', 100);
    j.begin('k', 'c', a);
    expect(j.stampFor('k', 'c', 107)).toEqual({ nowS: 100, salt: 0, nonce: a.nonce, resent: true });
    j.end('k');
    expect(j.openCalls).toBe(0);
    // Answered: past the answered window (30 s after its `now`) the key names a new call.
    const b = j.stampFor('k', 'c', 131);
    expect(b).toMatchObject({ nowS: 131, salt: 0, resent: false });
    expect(b.nonce).not.toEqual(a.nonce);
  });

  test('memory / open calls past the window are dropped even after the clock stepped ahead and came back', () => {
    // One call seen at a clock 9,000 s ahead (an NTP step, a VM clock fault), then the clock back:
    // entries must still expire with the window, not wait until the clock reaches that second.
    const j = new CallJournal({ windowS: 10 }, 1_000);
    j.open('ahead', 'c', 10_000);
    for (let t = 1_000; t < 1_100; t++) for (let i = 0; i < 20; i++) j.open(`${t}-${i}`, 'c', t);
    // Within the window: the last 11 seconds of 20 calls (and the one from ahead, dropped or not).
    expect(j.openCalls).toBeLessThanOrEqual(11 * 20 + 1);
  });

  test('re-send / an answered call that names itself (idempotency key, or its session) is the same request within the answered window; an MCP id alone is not', () => {
    const j = new CallJournal({}, 100);
    const a = j.open('k', 'c', 100, {});
    j.end('k');
    // The answer was lost past the bridge (a proxy retry, a replica racing): the same stamp, replayed by the node.
    expect(j.open('k', 'c', 110, {})).toEqual({ nowS: 100, salt: 0, nonce: a.nonce, resent: true });
    expect(j.openCalls).toBe(0);
    expect(j.open('k', 'c', 130, {})).toMatchObject({ nowS: 100, resent: true });
    expect(j.open('k', 'c', 131, {})).toMatchObject({ nowS: 131, resent: false });
    const s = j.open('s', 'c', 100, { session: 'session-a' });
    j.end('s');
    expect(j.open('s', 'c', 101, { session: 'session-a' })).toEqual({ ...s, resent: true });
    expect(j.open('s', 'c', 101, { session: 'session-b' })).toMatchObject({ nowS: 101, resent: false });
    // Named by its MCP id alone (no session, no key): a new call once answered.
    j.open('bare', 'c', 100);
    j.end('bare');
    expect(j.open('bare', 'c', 101)).toMatchObject({ nowS: 101, resent: false });
    const off = new CallJournal({ answeredWindowS: 0 }, 100);
    off.open('k', 'c', 100, {});
    off.end('k');
    expect(off.open('k', 'c', 100, {})).toMatchObject({ resent: false });
    expect(() => new CallJournal({ answeredWindowS: -1 })).toThrow(RangeError);
  });

  test('restart / a file keeps open calls with their nonces; a torn last line is ignored; old entries drop', () => {
    const t = tempDir('journal');
    const file = path.join(t.dir, 'calls.journal');
    try {
      const j = new CallJournal({ file, windowS: 60 }, 100);
      const open = j.stampFor('open', 'c1', 100);
      j.begin('open', 'c1', open);
      j.begin('done', 'c2', j.stampFor('done', 'c2', 100));
      j.end('done');
      j.close();
      appendFileSync(file, '{"k":"torn","c":"c3","no');
      const r = new CallJournal({ file, windowS: 60 }, 120);
      expect(r.openCalls).toBe(1);
      expect(r.stampFor('open', 'c1', 120)).toEqual({ nowS: 100, salt: 0, nonce: open.nonce, resent: true });
      // Answered at 100: re-sent within the answered window after a restart, the same request; then a new call.
      expect(r.stampFor('done', 'c2', 120, {})).toMatchObject({ nowS: 100, resent: true });
      expect(r.stampFor('done', 'c2', 120)).toMatchObject({ nowS: 120, resent: false });
      expect(r.stampFor('done', 'c2', 131, {})).toMatchObject({ nowS: 131, resent: false });
      r.close();
      const later = new CallJournal({ file, windowS: 60 }, 1000);
      expect(later.openCalls).toBe(0);
      later.close();
    } finally {
      t.cleanup();
    }
  });

  test('restart / a signed call keeps its signature (threshold callers); a malformed one is not taken back', () => {
    const t = tempDir('journal');
    const file = path.join(t.dir, 'calls.journal');
    try {
      const j = new CallJournal({ file, windowS: 60 }, 100);
      const st = j.stampFor('sig', 'c1', 100);
      j.begin('sig', 'c1', st);
      const signature = new Uint8Array(64).map((_, i) => i);
      j.signed('sig', signature);
      j.signed('never-opened', signature); // not open: nothing recorded
      j.close();
      appendFileSync(file, `${JSON.stringify({ k: 'bad', c: 'c2', now: 100, g: 'zz' })}\n`);
      const r = new CallJournal({ file, windowS: 60 }, 110);
      expect(r.openCalls).toBe(1);
      expect(r.stampFor('sig', 'c1', 110)).toEqual({ nowS: 100, salt: 0, nonce: st.nonce, resent: true, signature });
      expect(r.stampFor('never-opened', 'c1', 110)).toMatchObject({ resent: false });
      expect(r.stampFor('bad', 'c2', 110)).toMatchObject({ resent: false });
      expect(r.stampFor('bad', 'c2', 110).signature).toBeUndefined();
      r.close();
    } finally {
      t.cleanup();
    }
  });

  test("an earlier bridge's journal: its open call (a salt, no nonce) re-sends as it was signed", () => {
    const t = tempDir('journal');
    const file = path.join(t.dir, 'calls.journal');
    try {
      appendFileSync(
        file,
        `${JSON.stringify({ k: 'old', c: 'c1', now: 100, s: 5 })}\n${JSON.stringify({ k: '', c: 'c1', now: 100, s: 5, done: 1 })}\n`,
      );
      const r = new CallJournal({ file, windowS: 60 }, 110);
      expect(r.openCalls).toBe(1);
      expect(r.stampFor('old', 'c1', 110)).toEqual({ nowS: 100, salt: 5, nonce: undefined, resent: true });
      r.close();
    } finally {
      t.cleanup();
    }
  });
});
