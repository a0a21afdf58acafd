/**
 * The hand-assembled det-CBOR of the receipt hot paths must agree byte for byte with the general
 * codec (`cbor.ts`), and its reader must never accept what the strict decoder refuses.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  concatItems,
  decode,
  encode,
  encodeSign1,
  FlatMapPicker,
  FlatMapWriter,
  headBytes,
  headLength,
  JcpError,
  leadingTag,
  readFlatMap,
  readHead,
  sigStructure,
  skipItem,
  splitSequence,
  Tagged,
  toHex,
  withoutMapEntry,
  writeHead,
} from '../../core/internal.ts';

const KEYS = ['a', 'b', 'aa', 'seq', 'steward', 'chain_ids', 'budget_remaining_uj', 'é', 'zz', 'k'.repeat(30)];
const writer = new FlatMapWriter(KEYS);
const uint = fc.oneof(
  fc.nat(),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  fc.constantFrom(23, 24, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32),
);
const flatValue = fc.oneof(uint, fc.string({ unit: 'grapheme', maxLength: 300 }), fc.array(fc.string({ maxLength: 70 }), { maxLength: 5 }));
const flatMap = fc.dictionary(fc.constantFrom(...KEYS), flatValue);

/** Up to four byte edits: (position, value, 0 set | 1 insert | 2 delete | 3 truncate). */
const edits = fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.nat(3)), { minLength: 1, maxLength: 4 });

/** `bytes` with `e` applied in turn. */
function edited(bytes: Uint8Array, e: readonly [number, number, number][]): Uint8Array {
  let b = Array.from(bytes);
  for (const [pos, val, op] of e) {
    const i = pos % (b.length + 1);
    if (op === 0 && b.length) b[i % b.length] = val;
    else if (op === 1) b.splice(i, 0, val);
    else if (op === 2 && b.length) b.splice(i % b.length, 1);
    else b = b.slice(0, i);
  }
  return Uint8Array.from(b);
}

/** What the general decoder yields for the same map (bigints at or below 2^53 − 1 become numbers). */
function normal(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o).map(([k, v]) => [k, typeof v === 'bigint' && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v]),
  );
}

describe('cbor flat maps and heads - writing', () => {
  it('heads are the shortest form, as the general encoder writes them', () => {
    fc.assert(
      fc.property(uint, (n) => {
        const out = new Uint8Array(9);
        const end = writeHead(out, 0, 0, n);
        expect(end).toBe(headLength(n));
        expect(toHex(out.subarray(0, end))).toBe(toHex(encode(n)));
      }),
      { numRuns: 500, seed: 2 },
    );
  });
  it('a flat map is written exactly as encode() writes it', () => {
    fc.assert(
      fc.property(flatMap, (m) => {
        expect(toHex(writer.write(m))).toBe(toHex(encode(m)));
      }),
      { numRuns: 500, seed: 4 },
    );
  });
  it('deny / refuses a negative, fractional or oversized integer and a non-text array item', () => {
    for (const bad of [{ a: -1 }, { a: 1.5 }, { a: 2n ** 64n }, { a: -1n }, { chain_ids: [1] as unknown as string[] }]) {
      expect(() => writer.write(bad)).toThrow(JcpError);
    }
  });
  it('a value larger than the shared buffer grows it, and a refused write does not spoil the next', () => {
    const big = { a: 'x'.repeat(20_000), é: 'é'.repeat(5_000), chain_ids: ['ü'.repeat(3_000), 'y'] };
    expect(toHex(writer.write(big))).toBe(toHex(encode(big)));
    expect(() => writer.write({ a: 'partly written', b: -1 })).toThrow(JcpError);
    const small = { a: 'ok', seq: 7 };
    expect(toHex(writer.write(small))).toBe(toHex(encode(small)));
    const first = writer.write(small);
    writer.write(big);
    expect(toHex(first)).toBe(toHex(encode(small))); // a returned map is a copy, not a view of the buffer
  });
  it('Sig_structure and the JCR-1 envelope are assembled exactly as encode() writes them', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 300 }),
        fc.uint8Array({ maxLength: 70000 }),
        fc.uint8Array({ maxLength: 70 }),
        (p, payload, sig) => {
          expect(toHex(sigStructure(p, payload))).toBe(toHex(encode(['Signature1', p, new Uint8Array(0), payload])));
          const fast = encodeSign1({ protectedBytes: p, unprotected: new Map(), payload, signature: sig });
          expect(toHex(fast)).toBe(toHex(encode(new Tagged(18, [p, new Map(), payload, sig]))));
        },
      ),
      { numRuns: 60, seed: 6 },
    );
  });
});

describe('cbor flat maps and heads - reading', () => {
  it('reads back what it writes, equal to the general decoder', () => {
    fc.assert(
      fc.property(flatMap, (m) => {
        const bytes = writer.write(m);
        expect(readFlatMap(bytes)).toEqual(decode(bytes));
        expect(readFlatMap(bytes)).toEqual(normal(m));
      }),
      { numRuns: 300, seed: 8 },
    );
  });
  it('never accepts a mutant the strict decoder refuses, and agrees with it on those it accepts', () => {
    fc.assert(
      fc.property(flatMap, edits, (m, e) => {
        const bytes = edited(writer.write(m), e);
        const fast = readFlatMap(bytes);
        if (fast === undefined) return;
        expect(decode(bytes)).toEqual(fast);
      }),
      { numRuns: 3000, seed: 10 },
    );
  });
  it.each([
    ['unsorted keys', 'a2616201616101'],
    ['a duplicate key', 'a2616101616101'],
    ['a long-form integer', 'a161611801'],
    ['a long-form text length', 'a1617a780161'],
    ['an indefinite map', 'bf616101ff'],
    ['trailing bytes', 'a161610100'],
    ['invalid UTF-8', 'a16161 61ff'.replace(' ', '')],
    ['a byte string value', 'a1616141ff'],
    ['a nested map', 'a16161a0'],
    ['a __proto__ key', 'a1695f5f70726f746f5f5f01'],
    ['truncated', 'a1616162'],
  ])('declines %s (left to the strict decoder)', (_what, h) => {
    expect(readFlatMap(new Uint8Array(Buffer.from(h, 'hex')))).toBeUndefined();
  });
  it('a picker reads the chosen entries as readFlatMap does, and steps over the others', () => {
    const read = ['b', 'seq', 'chain_ids', 'é', 'k'.repeat(30)];
    const picker = new FlatMapPicker(KEYS, read);
    fc.assert(
      fc.property(flatMap, (m) => {
        const full = readFlatMap(writer.write(m))!;
        const want = Object.fromEntries(Object.entries(full).filter(([k]) => read.includes(k)));
        expect(picker.pick(writer.write(m))).toEqual(want);
      }),
      { numRuns: 300, seed: 9 },
    );
  });
  it('a picker accepts no mutant readFlatMap refuses, and agrees with it on what it reads', () => {
    const read = ['a', 'seq', 'chain_ids'];
    const picker = new FlatMapPicker(KEYS, read);
    let picked = 0;
    fc.assert(
      fc.property(flatMap, edits, (m, e) => {
        const bytes = edited(writer.write(m), e);
        const fast = picker.pick(bytes);
        if (fast === undefined) return;
        picked++;
        // Skipped entries are unread: only a map whose skipped text is valid UTF-8 must agree.
        const full = readFlatMap(bytes);
        if (full === undefined) return;
        expect(Object.keys(full).every((k) => KEYS.includes(k))).toBe(true);
        expect(fast).toEqual(Object.fromEntries(Object.entries(full).filter(([k]) => read.includes(k))));
      }),
      { numRuns: 3000, seed: 11 },
    );
    expect(picked).toBeGreaterThan(100);
  });
  it.each([
    ['unsorted keys', 'a2616201616101'],
    ['a duplicate key', 'a2616101616101'],
    ['an unknown key', 'a1617801'],
    ['a long-form integer', 'a161611801'],
    ['trailing bytes', 'a161610100'],
    ['invalid UTF-8 in an entry read', 'a1616161ff'],
    ['a byte string value', 'a1616241ff'],
    ['a nested map', 'a16162a0'],
    ['truncated skipped text', 'a1616262'],
    ['not a map', '8101'],
    ['a skipped text longer than 2^53 − 1', 'a161627b0020000000000000'],
    ['a skipped array item longer than 2^53 − 1', 'a16162817b0020000000000000'],
    ['a text read longer than 2^53 − 1', 'a161617b0020000000000000'],
  ])('a picker declines %s', (_what, h) => {
    const picker = new FlatMapPicker(KEYS, ['a']);
    expect(picker.pick(new Uint8Array(Buffer.from(h, 'hex')))).toBeUndefined();
  });
  it('a picker steps over a skipped entry without reading its text, and refuses to read a key it does not know', () => {
    // {"a": 1, "b": "\xff"}: "b" is skipped, so its invalid UTF-8 is not read
    expect(new FlatMapPicker(KEYS, ['a']).pick(new Uint8Array(Buffer.from('a2616101616261ff', 'hex')))).toEqual({ a: 1 });
    expect(() => new FlatMapPicker(KEYS, ['nope'])).toThrow(/not one of the keys/);
  });
  it('readHead declines non-shortest heads', () => {
    expect(readHead(Uint8Array.of(0x18, 0x17), 0)).toBeUndefined();
    expect(readHead(Uint8Array.of(0x19, 0x00, 0xff), 0)).toBeUndefined();
    expect(readHead(Uint8Array.of(0x18, 0x18), 0)).toEqual({ major: 0, value: 24, next: 2 });
  });
});

describe('cbor items - sequences, splices and constant heads', () => {
  const smallMap = fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), fc.oneof(fc.nat(), fc.string({ maxLength: 20 })), {
    minKeys: 1,
    maxKeys: 23,
  });

  it('withoutMapEntry gives the canonical encoding of the map without that entry', () => {
    fc.assert(
      fc.property(smallMap, fc.nat(), (m, pick) => {
        const body = encode(m);
        // Walk the entries (key, value) to find each one's span.
        const spans: [number, number][] = [];
        let off = 1;
        for (let i = 0; i < Object.keys(m).length; i++) {
          const end = skipItem(body, skipItem(body, off));
          spans.push([off, end]);
          off = end;
        }
        const [start, end] = spans[pick % spans.length]!;
        const key = decode(body.subarray(start, skipItem(body, start))) as string;
        const rest = { ...m };
        delete rest[key];
        expect(toHex(withoutMapEntry(body, start, end)!)).toBe(toHex(encode(rest)));
      }),
      { numRuns: 500, seed: 13 },
    );
  });

  it('withoutMapEntry declines what is not a 1- to 23-entry map or a span outside it', () => {
    expect(withoutMapEntry(encode([1, 2]), 1, 2)).toBeUndefined();
    expect(withoutMapEntry(encode({}), 1, 1)).toBeUndefined();
    const big = encode(Object.fromEntries(Array.from({ length: 24 }, (_, i) => [`k${i}`, i])));
    expect(withoutMapEntry(big, 2, 6)).toBeUndefined();
    const body = encode({ a: 1 });
    expect(withoutMapEntry(body, 0, 2)).toBeUndefined();
    expect(withoutMapEntry(body, 1, body.length + 1)).toBeUndefined();
    expect(toHex(withoutMapEntry(body, 1, body.length)!)).toBe('a0');
  });

  it('splitSequence splits items back to back and stops at the first broken one', () => {
    const items = [encode({ a: [1, 2] }), encode('x'), encode(new Tagged(18, [new Uint8Array(3)]))];
    const seq = concatItems(items);
    const whole = splitSequence(seq);
    expect(whole.end).toBe(seq.length);
    expect(whole.items.map(toHex)).toEqual(items.map(toHex));
    const cut = splitSequence(seq.subarray(0, seq.length - 1));
    expect(cut.items.map(toHex)).toEqual(items.slice(0, 2).map(toHex));
    expect(cut.end).toBe(items[0]!.length + items[1]!.length);
    expect(splitSequence(Uint8Array.of(0x9f, 0x01, 0xff))).toEqual({ items: [], end: 0 });
  });

  it('headBytes, concatItems and leadingTag agree with the general codec', () => {
    expect(toHex(concatItems([headBytes(4, 2), { bstr: Uint8Array.of(1) }, encode('z')]))).toBe(toHex(encode([Uint8Array.of(1), 'z'])));
    expect(toHex(headBytes(6, 18))).toBe('d2');
    expect(leadingTag(encode(new Tagged(18, 1)))).toBe(18);
    expect(leadingTag(encode(new Tagged(1000, 1)))).toBe(1000);
    expect(leadingTag(Uint8Array.of(0xd8, 0x12, 0x01))).toBe(18); // long form: named, the strict decoder refuses it
    expect(leadingTag(encode([1]))).toBeUndefined();
    expect(leadingTag(Uint8Array.of(0xd9, 0x01))).toBeUndefined();
  });
});
