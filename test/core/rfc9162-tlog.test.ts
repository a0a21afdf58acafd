/**
 * RFC 9162 §2.1 Merkle tree, proofs and verifiers (core/tlog.ts) against a second, deliberately
 * naive implementation written here straight from the RFC's recursive definitions (MTH, PATH,
 * PROOF/SUBPROOF), hashing with node:crypto: it shares no code with ours.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMPTY_ROOT, isJcpError, leafHash, MerkleTree, verifyConsistency, verifyInclusion } from '../../core/internal.ts';

// ---- the reference: RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1, as written there ----
const H = (...parts: Buffer[]): Buffer => createHash('sha256').update(Buffer.concat(parts)).digest();
const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);
function k(n: number): number {
  let p = 1;
  while (p << 1 < n) p <<= 1;
  return p;
}
function MTH(D: Buffer[]): Buffer {
  if (D.length === 0) return H();
  if (D.length === 1) return H(LEAF, D[0]!);
  const s = k(D.length);
  return H(NODE, MTH(D.slice(0, s)), MTH(D.slice(s)));
}
function PATH(m: number, D: Buffer[]): Buffer[] {
  if (D.length === 1) return [];
  const s = k(D.length);
  return m < s ? [...PATH(m, D.slice(0, s)), MTH(D.slice(s))] : [...PATH(m - s, D.slice(s)), MTH(D.slice(0, s))];
}
function SUBPROOF(m: number, D: Buffer[], b: boolean): Buffer[] {
  if (m === D.length) return b ? [] : [MTH(D)];
  const s = k(D.length);
  return m <= s ? [...SUBPROOF(m, D.slice(0, s), b), MTH(D.slice(s))] : [...SUBPROOF(m - s, D.slice(s), false), MTH(D.slice(0, s))];
}
const PROOF = (m: number, D: Buffer[]): Buffer[] => (m === 0 ? [] : SUBPROOF(m, D, true));

const hex = (xs: readonly Uint8Array[]): string[] => xs.map((x) => Buffer.from(x).toString('hex'));
const leaves = (n: number, salt = 0): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.from(`receipt ${salt}/${i}`));
function treeOf(D: Buffer[]): MerkleTree {
  const t = new MerkleTree();
  for (const d of D) t.append(d);
  return t;
}
function codeOf(f: () => void): string | undefined {
  try {
    f();
  } catch (e) {
    if (isJcpError(e)) return e.code;
    throw e;
  }
  return undefined;
}

describe('rfc9162 - tree hash', () => {
  it('empty tree is SHA-256 of nothing, and one leaf is SHA-256(0x00 ‖ leaf)', () => {
    expect(Buffer.from(EMPTY_ROOT).toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex([new MerkleTree().root()])).toEqual(hex([MTH([])]));
    expect(hex([leafHash(Buffer.from('x'))])).toEqual(hex([H(LEAF, Buffer.from('x'))]));
  });

  it('roots of every prefix of a 70-leaf tree equal the reference MTH', () => {
    const D = leaves(70);
    const t = treeOf(D);
    for (let n = 0; n <= 70; n++) expect(hex([t.root(n)]), `size ${n}`).toEqual(hex([MTH(D.slice(0, n))]));
  });
});

describe('rfc9162 - proofs equal the reference', () => {
  it('inclusion (PATH) and consistency (PROOF) for every index and size pair up to 33 leaves', () => {
    const D = leaves(33, 1);
    const t = treeOf(D);
    for (let n = 1; n <= 33; n++) {
      for (let m = 0; m < n; m++) expect(hex(t.inclusionProof(m, n)), `PATH(${m}, ${n})`).toEqual(hex(PATH(m, D.slice(0, n))));
      for (let m = 0; m <= n; m++) expect(hex(t.consistencyProof(m, n)), `PROOF(${m}, ${n})`).toEqual(hex(PROOF(m, D.slice(0, n))));
    }
  });

  it('a seq past the tree is tlog-range, not a proof', () => {
    const t = treeOf(leaves(5));
    expect(codeOf(() => t.inclusionProof(5))).toBe('tlog-range');
    expect(codeOf(() => t.inclusionProof(0, 6))).toBe('tlog-range');
    expect(codeOf(() => t.consistencyProof(3, 6))).toBe('tlog-range');
    expect(codeOf(() => t.consistencyProof(4, 3))).toBe('tlog-range');
    expect(codeOf(() => new MerkleTree().inclusionProof(0, 0))).toBe('tlog-range');
  });

  it('refuse / a proof cut short or made longer is named as such, not only as a root mismatch', () => {
    const D = leaves(11, 2);
    const path = PATH(6, D);
    expect(() => verifyInclusion(H(LEAF, D[6]!), 6, 11, path.slice(0, -1), MTH(D))).toThrow(/shorter/);
    expect(() => verifyInclusion(H(LEAF, D[6]!), 6, 11, [...path, MTH(D)], MTH(D))).toThrow(/longer/);
    const proof = PROOF(5, D);
    expect(() => verifyConsistency(5, 11, proof.slice(0, -1), MTH(D.slice(0, 5)), MTH(D))).toThrow(/shorter/);
    expect(() => verifyConsistency(5, 11, [...proof, MTH(D)], MTH(D.slice(0, 5)), MTH(D))).toThrow(/longer/);
  });
});

describe('rfc9162 - verifiers (fuzzed)', () => {
  it('accept the reference proofs and refuse any altered hash, index or size', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.nat(), fc.nat(), fc.nat(), (n, a, b, salt) => {
        const D = leaves(n, salt);
        const root = MTH(D);
        const m = a % n;
        const path = PATH(m, D);
        const lh = H(LEAF, D[m]!);
        expect(codeOf(() => verifyInclusion(lh, m, n, path, root))).toBeUndefined();
        // a wrong leaf, a wrong index, a changed path hash, a dropped or extra path hash
        expect(codeOf(() => verifyInclusion(H(LEAF, Buffer.from('other')), m, n, path, root))).toBe('proof-invalid');
        if (n > 1) expect(codeOf(() => verifyInclusion(lh, (m + 1) % n, n, path, root))).toBe('proof-invalid');
        if (path.length > 0) {
          const bad = path.map((p) => Buffer.from(p));
          bad[b % bad.length]![b % 32]! ^= 1;
          expect(codeOf(() => verifyInclusion(lh, m, n, bad, root))).toBe('proof-invalid');
          expect(codeOf(() => verifyInclusion(lh, m, n, path.slice(1), root))).toBe('proof-invalid');
        }
        expect(codeOf(() => verifyInclusion(lh, m, n, [...path, root], root))).toBe('proof-invalid');
        expect(codeOf(() => verifyInclusion(lh, n, n, path, root))).toBe('tlog-range');

        const old = b % (n + 1);
        const proof = PROOF(old, D);
        const oldRoot = MTH(D.slice(0, old));
        expect(codeOf(() => verifyConsistency(old, n, proof, oldRoot, root))).toBeUndefined();
        if (old > 0 && old < n) {
          const forged = MTH([...D.slice(0, old - 1), Buffer.from('rewritten')]);
          expect(codeOf(() => verifyConsistency(old, n, proof, forged, root))).toBe('proof-invalid');
          expect(codeOf(() => verifyConsistency(old, n, proof, oldRoot, H(Buffer.from('x'))))).toBe('proof-invalid');
          const bad = proof.map((p) => Buffer.from(p));
          bad[a % bad.length]![a % 32]! ^= 0x80;
          expect(codeOf(() => verifyConsistency(old, n, bad, oldRoot, root))).toBe('proof-invalid');
          expect(codeOf(() => verifyConsistency(old, n, proof.slice(0, -1), oldRoot, root))).toBe('proof-invalid');
          expect(codeOf(() => verifyConsistency(old, n, [...proof, root], oldRoot, root))).toBe('proof-invalid');
          if (n > old + 1)
            expect(codeOf(() => verifyConsistency(old, n - 1, proof, oldRoot, MTH(D.slice(0, n - 1))))).toBe('proof-invalid');
        }
        if (old === n) expect(codeOf(() => verifyConsistency(n, n, [], root, H(Buffer.from('y'))))).toBe('proof-invalid');
      }),
      { numRuns: 300 },
    );
  });

  it('our proofs verify with our verifiers for random sizes up to 600 leaves', () => {
    const D = leaves(600, 7);
    const t = treeOf(D);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 600 }), fc.nat(), fc.nat(), (n, a, b) => {
        const m = a % n;
        verifyInclusion(t.leafHashAt(m), m, n, t.inclusionProof(m, n), t.root(n));
        const old = b % (n + 1);
        verifyConsistency(old, n, t.consistencyProof(old, n), t.root(old), t.root(n));
      }),
      { numRuns: 200 },
    );
  });
});
