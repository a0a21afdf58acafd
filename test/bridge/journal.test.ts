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

  test('identical calls in one second: the clock second, the next salt; a new second starts at salt 0', () => {
    const j = new CallJournal({}, 100);
    const a = j.stampFor('call-1', 'same', 100);
    j.begin('call-1', 'same', a);
    const b = j.stampFor('call-2', 'same', 100);
    j.begin('call-2', 'same', b);
    const c = j.stampFor('call-3', 'same', 100);
    expect([a, b, c].map((s) => [s.nowS, s.salt, s.resent])).toEqual([
      [100, 0, false],
      [100, 1, false],
      [100, 2, false],
    ]);
    expect(j.stampFor('call-4', 'same', 101)).toEqual({ nowS: 101, salt: 0, resent: false });
    expect(j.stampFor('call-5', 'other', 100)).toEqual({ nowS: 100, salt: 0, resent: false });
    // A clock that stepped back keeps the later second: never one request for two calls.
    expect(j.stampFor('call-6', 'same', 99)).toEqual({ nowS: 100, salt: 2, resent: false });
  });

  test('saltBase / fresh calls start at the base; the next salt never falls below it', () => {
    const j = new CallJournal({ saltBase: 4000 }, 100);
    const a = j.stampFor('call-1', 'same', 100);
    j.begin('call-1', 'same', a);
    expect(a).toEqual({ nowS: 100, salt: 4000, resent: false });
    expect(j.stampFor('call-2', 'same', 100)).toEqual({ nowS: 100, salt: 4001, resent: false });
    expect(j.stampFor('call-3', 'same', 101)).toEqual({ nowS: 101, salt: 4000, resent: false });
    expect(() => new CallJournal({ saltBase: -1 })).toThrow(RangeError);
    expect(randomSaltBase()).toBeLessThan(4 ** 10);
  });

  test('re-send / an open call keeps its stamp until its answer is delivered', () => {
    const j = new CallJournal({}, 100);
    const a = j.stampFor('k', 'c', 100);
    j.begin('k', 'c', a);
    expect(j.stampFor('k', 'c', 107)).toEqual({ nowS: 100, salt: 0, resent: true });
    j.end('k');
    expect(j.stampFor('k', 'c', 107)).toEqual({ nowS: 107, salt: 0, resent: false });
    expect(j.stampFor('k', 'c', 100)).toEqual({ nowS: 100, salt: 1, resent: false });
  });

  test('restart / a file keeps open calls and the last stamps; a torn last line is ignored; old entries drop', () => {
    const t = tempDir('journal');
    const file = path.join(t.dir, 'calls.journal');
    try {
      const j = new CallJournal({ file, windowS: 60 }, 100);
      j.begin('open', 'c1', j.stampFor('open', 'c1', 100));
      j.begin('done', 'c2', j.stampFor('done', 'c2', 100));
      j.begin('done2', 'c2', j.stampFor('done2', 'c2', 100));
      j.end('done');
      j.end('done2');
      j.close();
      appendFileSync(file, '{"k":"torn","c":"c3","no');
      const r = new CallJournal({ file, windowS: 60 }, 120);
      expect(r.openCalls).toBe(1);
      expect(r.stampFor('open', 'c1', 120)).toEqual({ nowS: 100, salt: 0, resent: true });
      expect(r.stampFor('x', 'c2', 100)).toEqual({ nowS: 100, salt: 2, resent: false });
      r.close();
      const later = new CallJournal({ file, windowS: 60 }, 1000);
      expect(later.openCalls).toBe(0);
      expect(later.stampFor('x', 'c2', 100)).toEqual({ nowS: 100, salt: 0, resent: false });
      later.close();
    } finally {
      t.cleanup();
    }
  });
});
