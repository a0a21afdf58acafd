import { describe, expect, it } from 'vitest';
import { decode, encode, ErrorCodes } from '../../core/index.ts';
import { codeOf } from '../support.ts';

const hex = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));
describe('cbor - canonical encoding', () => {
  it('sorts text keys length-first then bytewise', () => {
    expect(Buffer.from(encode({ bb: 1, a: 2, c: 3 })).toString('hex')).toBe('a3616102616303626262' + '01');
  });
  it('encodes bigint and number identically', () => {
    expect(encode({ a: 5n })).toEqual(encode({ a: 5 }));
  });
  it('refuses floats, bools and null in a signed core', () => {
    expect(codeOf(() => encode({ a: 1.5 }))).toBe(ErrorCodes.CBOR_FORBIDDEN_TYPE);
    expect(codeOf(() => encode({ a: true }))).toBe(ErrorCodes.CBOR_FORBIDDEN_TYPE);
    expect(codeOf(() => encode({ a: null }))).toBe(ErrorCodes.CBOR_FORBIDDEN_TYPE);
  });
});

describe('cbor - strict decoding', () => {
  it.each([
    ['a2616201616101', ErrorCodes.CBOR_NON_CANONICAL, 'unsorted keys'],
    ['a261610161610102', ErrorCodes.CBOR_NON_CANONICAL, 'duplicate keys'],
    ['1801', ErrorCodes.CBOR_NON_CANONICAL, 'long-form integer'],
    ['9f01ff', ErrorCodes.CBOR_NON_CANONICAL, 'indefinite array'],
    ['f93c00', ErrorCodes.CBOR_FORBIDDEN_TYPE, 'half float'],
    ['f5', ErrorCodes.CBOR_FORBIDDEN_TYPE, 'true'],
    ['f6', ErrorCodes.CBOR_FORBIDDEN_TYPE, 'null'],
    ['c001', ErrorCodes.CBOR_FORBIDDEN_TYPE, 'unexpected tag'],
    ['0000', ErrorCodes.CBOR_MALFORMED, 'trailing bytes'],
    ['62', ErrorCodes.CBOR_MALFORMED, 'truncated'],
  ])('refuses %s (%s: %s)', (h, code, _what) => {
    expect(codeOf(() => decode(hex(h)))).toBe(code);
  });
  it('round-trips integers above 2^53 as bigint', () => {
    const v = { n: 2n ** 60n };
    expect(decode(encode(v))).toEqual(v);
  });
});
