/**
 * det-CBOR (spec §3) does not trust cborg's "strict" mode: each case below is something a strict
 * decoder may let through or classify loosely (cborg 6 in strict mode accepts unsorted keys,
 * floats, bools/null and invalid UTF-8, and drops a leading BOM), refused here with a stable code.
 */
import { describe, expect, it } from 'vitest';
import { decode, encode, ErrorCodes, Tagged } from '../../core/index.ts';
import { codeOf } from '../support.ts';

const h = (s: string) => new Uint8Array(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const { CBOR_MALFORMED: MALFORMED, CBOR_NON_CANONICAL: NON_CANONICAL, CBOR_FORBIDDEN_TYPE: FORBIDDEN } = ErrorCodes;

describe('cbor strict - refused encodings', () => {
  it.each([
    // map key order: bytewise on the encoded keys, so shorter text keys first
    ['unsorted keys {b, a}', 'a2 6162 01 6161 02', NON_CANONICAL],
    ['longer key before shorter {aa, b}', 'a2 626161 01 6162 02', NON_CANONICAL],
    ['duplicate keys {a, a}', 'a2 6161 01 6161 02', NON_CANONICAL],
    ['duplicate keys nested', '81 a2 6161 01 6161 01', NON_CANONICAL],
    // floats of every width, including integral values and the non-finite ones
    ['half float 1.0', 'f9 3c00', FORBIDDEN],
    ['half float 2.0 (integral)', 'f9 4000', FORBIDDEN],
    ['single float 100000.0', 'fa 47c35000', FORBIDDEN],
    ['double float 1.1', 'fb 3ff199999999999a', FORBIDDEN],
    ['NaN', 'f9 7e00', FORBIDDEN],
    ['Infinity', 'f9 7c00', FORBIDDEN],
    ['float as a map value', 'a1 6161 f9 3c00', FORBIDDEN],
    // simple values
    ['false', 'f4', FORBIDDEN],
    ['true', 'f5', FORBIDDEN],
    ['null', 'f6', FORBIDDEN],
    ['undefined', 'f7', FORBIDDEN],
    ['simple(16)', 'f0', FORBIDDEN],
    ['simple(32)', 'f8 20', FORBIDDEN],
    ['two-byte simple(24), not well-formed (RFC 8949 §3.3)', 'f8 18', MALFORMED],
    // trailing bytes
    ['trailing zero after an int', '00 00', MALFORMED],
    ['trailing byte after a map', 'a0 00', MALFORMED],
    ['two items', '6161 6162', MALFORMED],
    // long-form integers
    ['0 in one extra byte', '18 00', NON_CANONICAL],
    ['23 in one extra byte', '18 17', NON_CANONICAL],
    ['255 in two bytes', '19 00ff', NON_CANONICAL],
    ['65535 in four bytes', '1a 0000ffff', NON_CANONICAL],
    ['2^32 − 1 in eight bytes', '1b 00000000ffffffff', NON_CANONICAL],
    ['−1 in one extra byte', '38 00', NON_CANONICAL],
    ['−256 in four bytes', '3a 000000ff', NON_CANONICAL],
    // indefinite lengths
    ['indefinite byte string', '5f 4100 ff', NON_CANONICAL],
    ['indefinite text string', '7f 6161 ff', NON_CANONICAL],
    ['indefinite empty array', '9f ff', NON_CANONICAL],
    ['indefinite map', 'bf 6161 01 ff', NON_CANONICAL],
    ['indefinite array inside a definite one', '82 01 9f ff', NON_CANONICAL],
    // beyond 64 bits: only as bignum tags, which are not JCP
    ['2^64 as a bignum (tag 2)', 'c2 49 010000000000000000', FORBIDDEN],
    ['−2^64 − 1 as a bignum (tag 3)', 'c3 49 010000000000000000', FORBIDDEN],
    // invalid UTF-8 in text
    ['text 0xff', '61 ff', MALFORMED],
    ['text with a bad continuation', '62 c328', MALFORMED],
    ['text cut inside a sequence', '61 c3', MALFORMED],
    ['text encoding a surrogate (CESU-8)', '63 eda080', MALFORMED],
    ['text with an overlong NUL', '62 c080', MALFORMED],
    ['text above U+10FFFF', '64 f4908080', MALFORMED],
    ['map key with invalid UTF-8', 'a1 61ff 01', MALFORMED],
    ['long invalid text (native check path)', `7850 ${'61'.repeat(79)}ff`, MALFORMED],
    // non-minimal lengths
    ['text length 1 in one extra byte', '78 01 61', NON_CANONICAL],
    ['text length 1 in two bytes', '79 0001 61', NON_CANONICAL],
    ['bytes length 1 in one extra byte', '58 01 00', NON_CANONICAL],
    ['bytes length 1 in four bytes', '5a 00000001 00', NON_CANONICAL],
    ['array length 1 in one extra byte', '98 01 01', NON_CANONICAL],
    ['map length 1 in one extra byte', 'b8 01 6161 01', NON_CANONICAL],
    ['map length 1 in eight bytes', 'bb 0000000000000001 6161 01', NON_CANONICAL],
    // not well-formed heads
    ['reserved additional info 28', '1c', MALFORMED],
    ['reserved additional info 30 on a map', 'be', MALFORMED],
    ['additional info 31 on an integer', '1f', MALFORMED],
    ['a stray break', 'ff', MALFORMED],
    ['an array head with too few items', '82 01', MALFORMED],
    ['a text longer than the input', '65 6161', MALFORMED],
    ['a 2^64 − 1 byte string length', '5b ffffffffffffffff', MALFORMED],
    ['empty input', '', MALFORMED],
    // types a JCP object does not hold
    ['an unrequested tag', 'c0 6161', FORBIDDEN],
    ['an integer map key', 'a1 01 01', FORBIDDEN],
    ['a byte-string map key', 'a1 4100 01', FORBIDDEN],
    ['an array map key', 'a1 80 01', FORBIDDEN],
  ] as const)('refuses %s with %s', (_what, bytes, code) => {
    expect(codeOf(() => decode(h(bytes)))).toBe(code);
  });
});

describe('cbor strict - boundaries that are accepted', () => {
  it.each([
    ['2^64 − 1', '1b ffffffffffffffff', 2n ** 64n - 1n],
    ['−2^64', '3b ffffffffffffffff', -(2n ** 64n)],
    ['2^53 (first bigint)', '1b 0020000000000000', 2n ** 53n],
    ['2^53 − 1 (last safe number)', '1b 001fffffffffffff', 2 ** 53 - 1],
    ['24 (first one-byte argument)', '18 18', 24],
    ['text starting with U+FEFF (a BOM is text, not a marker)', '66 efbbbf 616263', '\ufeffabc'],
    ['text of 24 bytes', `78 18 ${'61'.repeat(24)}`, 'a'.repeat(24)],
    ['map with shorter key first', 'a2 6162 01 626161 02', { b: 1, aa: 2 }],
  ] as const)('decodes %s and re-encodes it byte-identically', (_what, bytes, value) => {
    const v = decode(h(bytes));
    expect(v).toEqual(value);
    expect(toHex(encode(v))).toBe(toHex(h(bytes)));
  });

  it('decodes integer keys into a Map only when asked (useMaps), still refusing unsorted ones', () => {
    expect(decode(h('a2 01 02 03 04'), { useMaps: true })).toEqual(
      new Map([
        [1, 2],
        [3, 4],
      ]),
    );
    expect(codeOf(() => decode(h('a2 03 04 01 02'), { useMaps: true }))).toBe(NON_CANONICAL);
    expect(codeOf(() => decode(h('a2 01 02 01 03'), { useMaps: true }))).toBe(NON_CANONICAL);
  });

  it('accepts a requested tag only in its shortest form', () => {
    const tags = { 18: (inner: () => unknown) => new Tagged(18, inner()) };
    expect(decode(h('d2 80'), { tags })).toEqual(new Tagged(18, []));
    expect(codeOf(() => decode(h('d8 12 80'), { tags }))).toBe(NON_CANONICAL);
    expect(codeOf(() => decode(h('d3 80'), { tags }))).toBe(FORBIDDEN);
  });

  it('returns byte strings as plain Uint8Array, even from a Buffer', () => {
    const v = decode(Buffer.from('a1 6162 42 0102'.replace(/\s/g, ''), 'hex')) as { b: Uint8Array };
    expect(v.b.constructor).toBe(Uint8Array);
    expect(encode({ b: v.b }).constructor).toBe(Uint8Array);
  });
});

describe('cbor strict - refused values on encode', () => {
  it.each([
    ['2^64', 2n ** 64n],
    ['−2^64 − 1', -(2n ** 64n) - 1n],
    ['2^53 as a number (must be bigint)', 2 ** 53],
    ['a float', 1.5],
    ['−0', -0],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a lone high surrogate', '\ud800'],
    ['a lone low surrogate in a key', { '\udc00': 1 }],
    ['a bool', true],
    ['null', null],
    ['undefined', undefined],
  ] as const)('refuses %s with cbor-forbidden-type', (_what, value) => {
    expect(codeOf(() => encode(value))).toBe(FORBIDDEN);
  });

  it('encodes a surrogate pair as one 4-byte UTF-8 sequence', () => {
    expect(toHex(encode('\ud800\udd51'))).toBe('64f0908591');
  });
});
