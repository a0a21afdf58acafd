/**
 * Ed25519 edge cases where libraries legitimately differ: ed25519-speccheck (12 cases, "Taming
 * the many EdDSAs") and C2SP CCTV (914 cases). Neither file carries an expected result; the
 * expectations below come from our policy (docs/crypto-policy.md):
 * - a public key of small order, or not canonically encoded, is refused when it is parsed;
 * - a signature with S ≥ L or a non-canonical R is refused before any curve work;
 * - otherwise the cofactorless equation [S]B = R + [k]A decides (k over the bytes as given);
 * - mixed-order keys (canonical, not of small order) and canonical small-order R are accepted.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { describe, expect, it } from 'vitest';
import {
  didFromPublicKey,
  ED25519_L,
  ErrorCodes,
  isCanonicalPointEncoding,
  isCanonicalSignature,
  JcpError,
  parseDid,
  type PublicKey,
  publicKeyFromBytes,
  sign,
  signingKeyFromSeed,
  verify,
} from '../../core/internal.ts';
import { hex, vectorJson } from './load.ts';

/** What the policy says about one case, and the layer that must refuse it. */
type Expectation =
  | { readonly accept: true; readonly why: string }
  | { readonly accept: false; readonly stage: 'key' | 'encoding' | 'equation'; readonly why: string };

/** What actually happened, layer by layer. */
function outcome(key: Uint8Array, msg: Uint8Array, sig: Uint8Array): 'accept' | 'key' | 'encoding' | 'equation' {
  let pub: PublicKey;
  try {
    pub = publicKeyFromBytes(key);
  } catch (e) {
    expect(e).toBeInstanceOf(JcpError);
    expect((e as JcpError).code).toBe(ErrorCodes.DID_INVALID);
    // The same key must be refused at did:key parse time.
    expect(() => parseDid(didFromPublicKey(key))).toThrow(expect.objectContaining({ code: ErrorCodes.DID_INVALID }));
    return 'key';
  }
  if (!isCanonicalSignature(sig)) {
    expect(verify(pub, msg, sig)).toBe(false);
    return 'encoding';
  }
  return verify(pub, msg, sig) ? 'accept' : 'equation';
}

function expectVerdict(exp: Expectation, got: ReturnType<typeof outcome>): void {
  expect(got).toBe(exp.accept ? 'accept' : exp.stage);
}

// ed25519-speccheck, by index. Reasons follow the study's table and the vectors README; the
// point orders were checked with @noble/curves when this table was written.
const SPECCHECK: readonly Expectation[] = [
  { accept: false, stage: 'key', why: 'A (and R) of small order, S = 0: anyone can forge under A' },
  { accept: false, stage: 'key', why: 'A of small order (R mixed order)' },
  { accept: true, why: 'A mixed order, canonical; R of small order but canonical; cofactorless equation holds' },
  { accept: true, why: 'A and R mixed order; both the cofactored and cofactorless equations hold' },
  { accept: false, stage: 'equation', why: 'only the cofactored equation holds; we verify cofactorless' },
  { accept: false, stage: 'equation', why: 'only a cofactored form holds (it separates two cofactored writings)' },
  { accept: false, stage: 'encoding', why: 'S ≥ L (malleability), refused before the equation' },
  { accept: false, stage: 'encoding', why: 'S ≥ L (malleability), refused before the equation' },
  { accept: false, stage: 'encoding', why: 'R not canonically encoded' },
  { accept: false, stage: 'encoding', why: 'R not canonically encoded' },
  { accept: false, stage: 'key', why: 'A not canonically encoded (and of small order)' },
  { accept: false, stage: 'key', why: 'A not canonically encoded (and of small order)' },
];

interface SpeccheckCase {
  message: string;
  pub_key: string;
  signature: string;
}
const speccheck = vectorJson<SpeccheckCase[]>('ed25519-speccheck/cases.json');

describe('ed25519 edges - speccheck', () => {
  it('has one expectation per case', () => {
    expect(speccheck.length).toBe(SPECCHECK.length);
  });
  it.each(speccheck.map((c, i) => ({ i, c, exp: SPECCHECK[i]! })))('case $i: $exp.why', ({ c, exp }) => {
    expectVerdict(exp, outcome(hex(c.pub_key), hex(c.message), hex(c.signature)));
  });
  it('accepts 2 of 12 (cases 2, 3) and refuses 10', () => {
    const accepted = speccheck.flatMap((c, i) => (outcome(hex(c.pub_key), hex(c.message), hex(c.signature)) === 'accept' ? [i] : []));
    expect(accepted).toEqual(SPECCHECK.flatMap((e, i) => (e.accept ? [i] : [])));
  });
});

/** The policy applied to CCTV's flags (C2SP/CCTV ed25519 README). The first matching rule decides. */
function cctvExpectation(flags: readonly string[]): Expectation {
  const has = (f: string) => flags.includes(f);
  if (has('low_order_A')) return { accept: false, stage: 'key', why: 'A of small order' };
  if (has('non_canonical_A')) return { accept: false, stage: 'key', why: 'A not canonically encoded' };
  if (has('non_canonical_R')) return { accept: false, stage: 'encoding', why: 'R not canonically encoded' };
  if (has('low_order_residue')) return { accept: false, stage: 'equation', why: 'only the cofactored equation holds' };
  if (has('reencoded_k')) return { accept: false, stage: 'equation', why: 'k matches only over re-encoded A/R' };
  return { accept: true, why: 'cofactorless equation holds over canonical, non-small-order A' };
}

interface CctvCase {
  number: number;
  key: string;
  sig: string;
  msg: string;
  flags: string[] | null;
}
const cctv = vectorJson<CctvCase[]>('cctv-ed25519/ed25519vectors.json');
const utf8 = (s: string) => new TextEncoder().encode(s);

describe('ed25519 edges - CCTV', () => {
  it.each(cctv.map((c) => ({ c, flags: (c.flags ?? []).join(',') || 'none', exp: cctvExpectation(c.flags ?? []) })))(
    'case $c.number [$flags]: $exp.why',
    ({ c, exp }) => {
      expectVerdict(exp, outcome(hex(c.key), utf8(c.msg), hex(c.sig)));
    },
  );
  it('covers all 914 cases, and every verdict is the one derived from the flags', () => {
    const tally = { accept: 0, key: 0, encoding: 0, equation: 0 };
    let matches = 0;
    for (const c of cctv) {
      const exp = cctvExpectation(c.flags ?? []);
      const got = outcome(hex(c.key), utf8(c.msg), hex(c.sig));
      tally[got]++;
      if (got === (exp.accept ? 'accept' : exp.stage)) matches++;
    }
    expect(cctv.length).toBe(914);
    expect(matches).toBe(914);
    // Every stage is exercised: a suite that only ever refused (or accepted) would be broken.
    expect(Math.min(tally.accept, tally.key, tally.encoding, tally.equation)).toBeGreaterThan(0);
  });
});

describe('ed25519 edges - targeted policy checks', () => {
  const key = signingKeyFromSeed(new Uint8Array(32).fill(7));
  const P = 2n ** 255n - 19n;
  const le32 = (v: bigint) => {
    const b = new Uint8Array(32);
    for (let i = 0; i < 32; i++) b[i] = Number((v >> BigInt(8 * i)) & 0xffn);
    return b;
  };
  const withS = (sig: Uint8Array, s: bigint) => {
    const out = new Uint8Array(sig);
    out.set(le32(s), 32);
    return out;
  };
  const sOf = (sig: Uint8Array) => {
    let s = 0n;
    for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i]!);
    return s;
  };

  it('refuses S + L for signatures whose S + L has every top byte from 0x10 to 0x1f', () => {
    const tops = new Set<number>();
    for (let i = 0; tops.size < 16 && i < 2000; i++) {
      const msg = utf8(`message ${i}`);
      const sig = sign(key, msg);
      expect(verify(key.publicKey, msg, sig)).toBe(true);
      const forged = withS(sig, sOf(sig) + ED25519_L);
      tops.add(forged[63]!);
      expect(isCanonicalSignature(forged)).toBe(false);
      expect(verify(key.publicKey, msg, forged)).toBe(false);
    }
    expect([...tops].sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => 0x10 + i));
  });

  it('refuses S = L exactly, accepts S = L − 1 as an encoding', () => {
    const sig = sign(key, utf8('x'));
    expect(isCanonicalSignature(withS(sig, ED25519_L))).toBe(false);
    expect(isCanonicalSignature(withS(sig, ED25519_L - 1n))).toBe(true);
  });

  it.each([
    ['y = p', le32(P), false],
    ['y = p + 3', le32(P + 3n), false],
    ['y = 2^255 − 1', le32(2n ** 255n - 1n), false],
    ['y = 1 with the sign bit (negative zero)', le32(1n | (1n << 255n)), false],
    ['y = p − 1 with the sign bit (negative zero)', le32(P - 1n + (1n << 255n)), false],
    ['y = p − 1', le32(P - 1n), true],
    ['y = 0 with the sign bit (x ≠ 0 there)', le32(1n << 255n), true],
    ['y = 3', le32(3n), true],
  ] as const)('point encoding %s is canonical: %s', (_what, bytes, canonical) => {
    expect(isCanonicalPointEncoding(bytes)).toBe(canonical);
  });

  it('accepts a mixed-order key (y = 3), refuses its non-canonical twin (y = p + 3)', () => {
    expect(publicKeyFromBytes(le32(3n)).bytes).toEqual(le32(3n));
    expect(() => publicKeyFromBytes(le32(P + 3n))).toThrow(expect.objectContaining({ code: ErrorCodes.DID_INVALID }));
  });

  it('refuses all eight small-order keys (the torsion subgroup) at parse time', () => {
    // Speccheck case 0's key generates the torsion subgroup: its multiples are the 8 small-order points.
    const t = ed25519.Point.fromBytes(hex(speccheck[0]!.pub_key));
    const encodings = new Set<string>();
    let p = t;
    for (let i = 0; i < 8; i++, p = p.add(t)) encodings.add(Buffer.from(p.toBytes()).toString('hex'));
    expect(encodings.size).toBe(8);
    expect(encodings.has('0100000000000000000000000000000000000000000000000000000000000000')).toBe(true);
    for (const k of encodings) {
      expect(() => publicKeyFromBytes(hex(k))).toThrow(expect.objectContaining({ code: ErrorCodes.DID_INVALID }));
    }
  });
});
