/**
 * Official BLAKE3 vectors (BLAKE3-team/BLAKE3 `test_vectors/test_vectors.json`), hash mode. The
 * input of each case is `input_len` bytes of 0, 1, …, 250, 0, 1, … (i mod 251). Our `blake3()` is
 * BLAKE3-256 (hash-wasm), so it must equal the first 32 bytes of the 131-byte extended output;
 * `@noble/hashes` cross-checks the full output length.
 */
import { blake3 as nobleBlake3 } from '@noble/hashes/blake3.js';
import { describe, expect, it } from 'vitest';
import { blake3, contentIdOfBytes } from '../../core/index.ts';
import { vectorJson } from './load.ts';

interface Blake3Case {
  input_len: number;
  hash: string;
}
const file = vectorJson<{ cases: Blake3Case[] }>('blake3/test_vectors.json');
const input = (n: number) => Uint8Array.from({ length: n }, (_, i) => i % 251);
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('blake3 - official hash vectors', () => {
  it('has 35 cases from 0 to 102400 bytes, each with a 131-byte output', () => {
    expect(file.cases.length).toBe(35);
    expect(file.cases[0]!.input_len).toBe(0);
    expect(file.cases.at(-1)!.input_len).toBe(102400);
    for (const c of file.cases) expect(c.hash.length).toBe(131 * 2);
  });
  it.each(file.cases)('$input_len bytes: blake3() is the first 32 bytes of the hash', (c) => {
    const out = blake3(input(c.input_len));
    expect(out.length).toBe(32);
    expect(toHex(out)).toBe(c.hash.slice(0, 64));
    expect(contentIdOfBytes(input(c.input_len))).toBe(c.hash.slice(0, 64));
  });
  it.each(file.cases)('$input_len bytes: @noble/hashes gives the full 131-byte output', (c) => {
    expect(toHex(nobleBlake3(input(c.input_len), { dkLen: 131 }))).toBe(c.hash);
  });
  it('hashes a view (non-zero byteOffset) by its own bytes only', () => {
    const c = file.cases.find((x) => x.input_len === 1025)!;
    const padded = new Uint8Array(1025 + 7);
    padded.set(input(1025), 3);
    expect(toHex(blake3(padded.subarray(3, 3 + 1025)))).toBe(c.hash.slice(0, 64));
  });
  it('gives the same digest when called again after a large input (the hasher is reused)', () => {
    const small = file.cases[1]!;
    blake3(input(102400));
    expect(toHex(blake3(input(small.input_len)))).toBe(small.hash.slice(0, 64));
  });
});
