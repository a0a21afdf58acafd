/**
 * frost/curve.ts: the libsodium group operations agree with the noble reference on random and
 * edge-case inputs, and both refuse what RFC 9591 §3.1 DeserializeElement refuses (identity,
 * small order, non-canonical, off-curve, the zcash-frost invalid element); FROST signing over
 * either gives the same shares and signature as noble's own `ed25519_FROST`.
 */
import { ed25519, ed25519_FROST } from '@noble/curves/ed25519.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { seededRng, utf8 } from '../../core/index.ts';
import { checkRound1, curves, dkgRound1, IDENTITY, nobleCurve, sodiumCurve, useCurve } from '../../frost/internal.ts';
import { aggregate, commit, deal, signShare } from '../../frost/index.ts';
import { hex, vectorJson } from '../vectors/load.ts';

const Fn = ed25519.Point.Fn;
const L = Fn.ORDER;
const scalar = fc.bigInt({ min: 0n, max: L - 1n }).map((n) => Fn.toBytes(n));
const point = fc.bigInt({ min: 1n, max: L - 1n }).map((n) => ed25519.Point.BASE.multiply(n).toBytes());
const hexOf = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('frost/curve: sodium against the noble reference', () => {
  it('property: baseMul, mul, add, sub and the scalar operations agree on random inputs', () => {
    fc.assert(
      fc.property(scalar, scalar, point, point, (a, b, p, q) => {
        for (const [name, f] of [
          ['baseMul', (c: typeof sodiumCurve) => c.baseMul(a)],
          ['mul', (c: typeof sodiumCurve) => c.mul(p, b)],
          ['add', (c: typeof sodiumCurve) => c.add(p, q)],
          ['sub', (c: typeof sodiumCurve) => c.sub(p, q)],
          ['scalarAdd', (c: typeof sodiumCurve) => c.scalarAdd(a, b)],
          ['scalarSub', (c: typeof sodiumCurve) => c.scalarSub(a, b)],
          ['scalarMul', (c: typeof sodiumCurve) => c.scalarMul(a, b)],
        ] as const) {
          expect(hexOf(f(sodiumCurve)), name).toBe(hexOf(f(nobleCurve)));
        }
        expect(sodiumCurve.isElement(p)).toBe(true);
        expect(nobleCurve.isElement(p)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('property: scalarReduce64 and scalarInvert agree', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 64, maxLength: 64 }), scalar, (h, a) => {
        expect(hexOf(sodiumCurve.scalarReduce64(h))).toBe(hexOf(nobleCurve.scalarReduce64(h)));
        if (Fn.fromBytes(a) !== 0n) expect(hexOf(sodiumCurve.scalarInvert(a))).toBe(hexOf(nobleCurve.scalarInvert(a)));
      }),
      { numRuns: 60 },
    );
  });

  it('edges: the zero scalar gives the identity; sums through the identity; P − P is the identity', () => {
    const zero = new Uint8Array(32);
    const G = ed25519.Point.BASE.toBytes();
    for (const c of Object.values(curves)) {
      expect(hexOf(c.baseMul(zero)), c.name).toBe(hexOf(IDENTITY));
      expect(hexOf(c.mul(G, zero)), c.name).toBe(hexOf(IDENTITY));
      expect(hexOf(c.sub(G, G)), c.name).toBe(hexOf(IDENTITY));
      expect(hexOf(c.add(G, IDENTITY)), c.name).toBe(hexOf(G));
      expect(hexOf(c.add(IDENTITY, G)), c.name).toBe(hexOf(G));
      expect(() => c.scalarInvert(zero), c.name).toThrow(RangeError);
    }
  });

  it('deny / RFC 9591 §3.1: identity, small-order, non-canonical, off-curve and the zcash invalid element are not elements', () => {
    const bad: Uint8Array[] = [IDENTITY];
    // The eight small-order points (the torsion subgroup), from noble.
    const T = ed25519.Point.fromHex('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa');
    for (let k = 1n; k < 8n; k++) bad.push(T.multiply(k).toBytes());
    // A point of order 8·L (prime-order point plus torsion).
    bad.push(ed25519.Point.BASE.add(T).toBytes());
    // Non-canonical y (y = p, i.e. y ≡ 0 with the encoding not reduced).
    bad.push(hex('edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'));
    // y = 2 is not on the curve.
    bad.push(hex('0200000000000000000000000000000000000000000000000000000000000000'));
    bad.push(new Uint8Array(31));
    const zcash = vectorJson<{ elements: { invalid_element: string } }>('zcash-frost/elements.json');
    bad.push(hex(zcash.elements.invalid_element));
    for (const b of bad) {
      expect(sodiumCurve.isElement(b), hexOf(b)).toBe(false);
      expect(nobleCurve.isElement(b), hexOf(b)).toBe(false);
    }
    expect(sodiumCurve.isElement(ed25519.Point.BASE.toBytes())).toBe(true);
  });

  it('property: a 2-of-3 session over either implementation gives noble ed25519_FROST’s shares and signature', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.constantFrom([1, 2], [1, 3], [2, 3]), (seed, ids) => {
        const d = deal({ min: 2, max: 3 }, seededRng(`curve-${seed}`));
        if (!d.ok) throw new Error(d.error.why);
        const g = d.value.group;
        const msg = utf8(`m${seed}`);
        const results: string[] = [];
        for (const c of Object.values(curves)) {
          const was = useCurve(c);
          try {
            const rng = seededRng(`nonces-${seed}`);
            const signers = ids.map((i) => d.value.shares[i - 1]!);
            const cs = signers.map((s) => commit(s, rng));
            const pkg = { message: msg, commitments: cs.map((x) => x.commitment) };
            // noble's own FROST on copies of the same nonces is the reference.
            const pub = {
              signers: { min: 2, max: 3 },
              commitments: [...g.commitments],
              verifyingShares: Object.fromEntries(g.verifyingShares.map((v, i) => [ed25519_FROST.Identifier.fromNumber(i + 1), v])),
            };
            const list = pkg.commitments.map((x) => ({
              identifier: ed25519_FROST.Identifier.fromNumber(x.identifier),
              hiding: x.hiding,
              binding: x.binding,
            }));
            const shares = new Map<number, Uint8Array>();
            signers.forEach((s, k) => {
              const ref = ed25519_FROST.signShare(
                { identifier: ed25519_FROST.Identifier.fromNumber(s.identifier), signingShare: s.signingShare },
                pub,
                { hiding: cs[k]!.nonces.hiding.slice(), binding: cs[k]!.nonces.binding.slice() },
                list,
                msg,
              );
              const z = signShare(g, s, cs[k]!.nonces, cs[k]!.commitment, pkg);
              if (!z.ok) throw new Error(z.error.why);
              expect(hexOf(z.value), c.name).toBe(hexOf(ref));
              shares.set(s.identifier, z.value);
            });
            const sig = aggregate(g, pkg, shares);
            if (!sig.ok) throw new Error(sig.error.why);
            results.push(hexOf(sig.value));
          } finally {
            useCurve(was);
          }
        }
        expect(results[0]).toBe(results[1]);
      }),
      { numRuns: 8 },
    );
  });

  it('property: dkg round 1 over either implementation gives noble ed25519_FROST.DKG.round1’s package byte for byte', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.constantFrom([2, 3], [3, 5], [2, 2]), (seed, [min, max]) => {
        const t = { min: min!, max: max! };
        const id = (seed % t.max) + 1;
        const refRng = seededRng(`dkg1-${seed}`);
        const nobleRef = ed25519_FROST.DKG.round1(ed25519_FROST.Identifier.fromNumber(id), t, undefined, ((n?: number) =>
          refRng(n ?? 32)) as never);
        expect(nobleRef.public.commitment.length).toBe(t.min);
        for (const c of Object.values(curves)) {
          const was = useCurve(c);
          try {
            const r = dkgRound1(id, t, seededRng(`dkg1-${seed}`));
            if (!r.ok) throw new Error(r.error.why);
            expect(r.value.package.commitment.map(hexOf), c.name).toEqual(nobleRef.public.commitment.map(hexOf));
            expect(hexOf(r.value.package.proof), c.name).toBe(hexOf(nobleRef.public.proofOfKnowledge));
            expect(r.value.state.secret.coefficients, c.name).toEqual(nobleRef.secret.coefficients);
            expect(checkRound1(r.value.package, t), c.name).toEqual({ ok: true, value: undefined });
          } finally {
            useCurve(was);
          }
        }
      }),
      { numRuns: 12 },
    );
  });
});
