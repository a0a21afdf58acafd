/**
 * The chain cache decodes exactly as the core decoder does (§11): same request on valid bodies,
 * same error code on every mutated one — with and without the chain in the cache.
 */
import { describe, expect, test } from 'vitest';
import { attenuate, decodeWireMessage, encodeWireRequest, skipItem } from '../../core/internal.ts';
import { ChainCache } from '../../node/index.ts';
import { cast, mint, request } from './fixtures.ts';

const { rng, alice, bob, carol } = cast('chaincache');

function outcome(f: () => unknown): unknown {
  try {
    return { ok: f() };
  } catch (e) {
    return { code: (e as { code?: string }).code };
  }
}

describe('chain cache', () => {
  test('a cached chain is reused, and the request equals the core decoder’s', () => {
    const root = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 10n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error('attenuate');
    const cache = new ChainCache();
    for (const chain of [[root], [root, child.value]]) {
      const signer = chain.length === 1 ? bob : carol;
      for (let i = 0; i < 3; i++) {
        const body = encodeWireRequest(request(signer, chain, { payload: new TextEncoder().encode(`{"i":${i}}`) }));
        expect(cache.decode(body)).toEqual(decodeWireMessage(body));
      }
    }
    expect(cache.hits).toBe(4);
  });

  test('mutated bodies get the core decoder’s verdict, hit or miss', () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const bases = [
      encodeWireRequest(request(bob, [g], { payload: new TextEncoder().encode('{"a":1}') })),
      encodeWireRequest(request(bob, [g])),
    ];
    const cache = new ChainCache();
    for (const b of bases) cache.decode(b);
    let x = 0x9e3779b9;
    const next = () => {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      return x;
    };
    for (let i = 0; i < 4000; i++) {
      const base = bases[i % 2]!;
      const m = new Uint8Array(base);
      const k = 1 + (next() % 3);
      for (let j = 0; j < k; j++) m[next() % m.length] = next() & 0xff;
      const cut = next() % 5 === 0 ? m.subarray(0, next() % m.length) : m;
      expect(outcome(() => cache.decode(cut))).toEqual(outcome(() => decodeWireMessage(cut)));
    }
    expect(cache.hits).toBeGreaterThan(100);
  });

  test('skipItem refuses truncated and indefinite items', () => {
    expect(skipItem(Uint8Array.of(0x82, 0x01, 0x02), 0)).toBe(3);
    expect(skipItem(Uint8Array.of(0x82, 0x01), 0)).toBe(-1);
    expect(skipItem(Uint8Array.of(0x9f, 0x01, 0xff), 0)).toBe(-1);
    expect(skipItem(Uint8Array.of(0x5a, 0xff, 0xff, 0xff, 0xff), 0)).toBe(-1);
  });
});
