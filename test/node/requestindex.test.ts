/** The request index (node/requestindex.ts): id → seq by 128-bit prefix, first record wins, packed inserts equal one-by-one ones (§11 idempotent replay). */
import { describe, expect, test } from 'vitest';
import { seededRng, toHex } from '../../core/index.ts';
import { REQUEST_KEY_WORDS, RequestIndex, requestKeyWords } from '../../node/internal.ts';

const rng = seededRng('requestindex');
const ids = (n: number) => Array.from({ length: n }, () => toHex(rng(32)));

describe('RequestIndex', () => {
  test('holds what a Map holds through growth from the smallest table, the first record of an id winning', () => {
    const index = new RequestIndex(1);
    const model = new Map<string, number>();
    const all = ids(5_000);
    for (let i = 0; i < 7_000; i++) {
      const id = all[(i * 7919) % all.length]!; // ids come back: the later records must not win
      index.set(id, i);
      if (!model.has(id)) model.set(id, i);
    }
    expect(index.size).toBe(model.size);
    for (const [id, seq] of model) expect(index.get(id)).toBe(seq);
    for (const id of ids(200)) expect(index.get(id)).toBeUndefined();
  });

  test('an id sharing the 128-bit prefix of a recorded one finds its seq (a lookup key: callers compare the full id)', () => {
    const index = new RequestIndex();
    const [id] = ids(1);
    index.set(id!, 42);
    expect(index.get(`${id!.slice(0, 32)}${'0'.repeat(32)}`)).toBe(42);
    expect(index.get(`${id!.slice(0, 31)}${id![31] === '0' ? '1' : '0'}${id!.slice(32)}`)).toBeUndefined();
  });

  test('insertWords of packed prefixes equals set() one by one, and packs what requestKeyWords writes', () => {
    const all = ids(3_000);
    const seqs = Float64Array.from(all, (_, i) => i * 3);
    const keys = new Uint32Array(all.length * REQUEST_KEY_WORDS);
    for (const [i, id] of all.entries()) requestKeyWords(id, keys, i * REQUEST_KEY_WORDS);
    expect([...keys.subarray(0, 4)].map((w) => w.toString(16).padStart(8, '0')).join('')).toBe(all[0]!.slice(0, 32));
    const packed = new RequestIndex(1);
    packed.set(all[5]!, 999_999); // recorded before: keeps its seq
    packed.insertWords(keys, seqs);
    const single = new RequestIndex(1);
    single.set(all[5]!, 999_999);
    for (const [i, id] of all.entries()) single.set(id, seqs[i]!);
    expect(packed.size).toBe(single.size);
    for (const id of all) expect(packed.get(id)).toBe(single.get(id));
    expect(packed.get(all[5]!)).toBe(999_999);
  });

  test('insertWords refuses key words that do not match the seqs', () => {
    expect(() => new RequestIndex().insertWords(new Uint32Array(7), new Float64Array(2))).toThrow(RangeError);
  });
});
