/** The caller signature's message spliced from a request's own bytes equals the re-encoded one (§11). */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { encodeWireRequest, signWireRequestSync, wireRequestSigningBytes, wireRequestSigningBytesOf } from '../../core/index.ts';
import { cast, mint, request } from './fixtures.ts';

const { rng, alice, bob } = cast('signing');

describe('caller signature message', () => {
  test('spliced bytes equal wireRequestSigningBytes, with and without a payload', () => {
    fc.assert(
      fc.property(
        fc.option(fc.uint8Array({ maxLength: 300 }), { nil: undefined }),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        (payload, costUj, action, now) => {
          const g = mint(alice, bob, 'tools', [action], 10n, rng);
          const req = request(bob, [g], { ...(payload !== undefined ? { payload } : {}), costUj, action, now });
          expect(wireRequestSigningBytesOf(encodeWireRequest(req), req)).toEqual(wireRequestSigningBytes(req));
        },
      ),
      { numRuns: 200 },
    );
  });

  test('spliced bytes equal wireRequestSigningBytes for a request with every optional field (payload, notify, nonce: 9 entries)', () => {
    const g = mint(alice, bob, 'tools', ['read'], 10n, rng);
    const base = request(bob, [g], { payload: Uint8Array.of(1) });
    const { signature: _s, ...unsigned } = base;
    const req = signWireRequestSync({ ...unsigned, notify: 1, nonce: new Uint8Array(16).fill(1) }, bob);
    const body = encodeWireRequest(req);
    expect(body[0]).toBe(0xa9);
    expect(wireRequestSigningBytesOf(body, req)).toEqual(wireRequestSigningBytes(req));
  });

  test('a body of another shape falls back to re-encoding', () => {
    const g = mint(alice, bob, 'tools', ['read'], 10n, rng);
    const req = request(bob, [g]);
    expect(wireRequestSigningBytesOf(Uint8Array.of(0xa1, 0x00), req)).toEqual(wireRequestSigningBytes(req));
  });
});
