/**
 * det-CBOR under generated and mutated input (spec §3, bad input: a stable code, nothing lost):
 * - fast-check: canonical round-trip of arbitrary JCP values (integers to 64 bits, text, bytes,
 *   arrays, text-keyed maps), and key-order independence of the encoding;
 * - a seeded, deterministic corpus of more than 100,000 byte strings (valid encodings mutated by
 *   bit flips, truncation, insertion, deletion, trailing bytes, argument and length tampering,
 *   indefinite lengths, swapped/duplicated keys, injected floats/tags, broken UTF-8, and plain
 *   random bytes) through `decode`. Invariants: every refusal is a JcpError with a CBOR code;
 *   whatever is accepted re-encodes to exactly its input; and mutations whose outcome is known
 *   from their construction are refused with that code;
 * - the hot-path encoder (`core/cbor.ts` `encode`) against cborg's RFC 8949 deterministic encoder, byte
 *   for byte, on the same generated values;
 * - the decoder's fast path (`core/cbor.ts` `readCanonical`) against the cborg path
 *   (`decodeByCborg`) on valid and mutated bytes: whatever the fast path accepts, the cborg path
 *   accepts with an identical value (types included); and it accepts every valid encoding
 *   without tags and with integers inside ±(2^53 − 1).
 */
import { encode as cborgEncode, rfc8949EncodeOptions } from 'cborg';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decode, decodeByCborg, encode, type ErrorCode, ErrorCodes, JcpError, readCanonical } from '../../core/internal.ts';

const CBOR_CODES: readonly string[] = [ErrorCodes.CBOR_MALFORMED, ErrorCodes.CBOR_NON_CANONICAL, ErrorCodes.CBOR_FORBIDDEN_TYPE];
const U64 = 2n ** 64n - 1n;

/** A JCP value with every integer as bigint, for comparing decoded values with generated ones. */
function norm(v: unknown): unknown {
  if (typeof v === 'number') return BigInt(v);
  if (Array.isArray(v)) return v.map(norm);
  if (v instanceof Uint8Array) return v;
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
}

const jcpValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('leaf'), tie('array'), tie('map')),
  leaf: fc.oneof(
    fc.maxSafeInteger(),
    fc.bigInt({ min: -U64 - 1n, max: U64 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme-ascii', maxLength: 64 }),
    fc.uint8Array({ maxLength: 64 }),
  ),
  array: fc.array(tie('value'), { maxLength: 6 }),
  map: fc.dictionary(fc.string({ unit: 'binary', maxLength: 8 }), tie('value'), { maxKeys: 6 }),
})).value;

describe('cbor fuzz - properties (fast-check)', () => {
  it('round-trips every JCP value canonically: decode(encode(v)) = v, encode(decode(b)) = b', () => {
    fc.assert(
      fc.property(jcpValue, (v) => {
        const bytes = encode(v);
        const back = decode(bytes);
        expect(norm(back)).toEqual(norm(v));
        expect(encode(back)).toEqual(bytes);
      }),
      { seed: 8949, numRuns: 1000 },
    );
  });

  it('encodes a map the same whatever the insertion order of its keys', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ unit: 'binary', maxLength: 8 }), fc.maxSafeInteger(), { maxKeys: 12 }), (m) => {
        const reversed = Object.fromEntries(Object.entries(m).reverse());
        expect(encode(reversed)).toEqual(encode(m));
      }),
      { seed: 8949, numRuns: 500 },
    );
  });

  it('never accepts an overwritten byte unless it is again canonical', () => {
    fc.assert(
      fc.property(jcpValue, fc.nat(), fc.integer({ min: 0, max: 255 }), (v, at, byte) => {
        const bytes = encode(v);
        const mutated = new Uint8Array(bytes);
        mutated[at % bytes.length] = byte;
        const r = attempt(mutated);
        if (r.kind === 'accepted') expect(r.reencoded).toEqual(mutated);
        else expect(CBOR_CODES).toContain(r.code);
      }),
      { seed: 8949, numRuns: 2000 },
    );
  });
});

describe('cbor fuzz - hot-path encoder against cborg RFC 8949 deterministic encoding', () => {
  const cborgBytes = (v: unknown) => Buffer.from(cborgEncode(v, rfc8949EncodeOptions)).toString('hex');
  const ours = (v: unknown) => Buffer.from(encode(v)).toString('hex');

  it('gives the same bytes as cborg for every JCP value', () => {
    fc.assert(
      fc.property(jcpValue, (v) => {
        expect(ours(v)).toBe(cborgBytes(v));
      }),
      { seed: 8949, numRuns: 1000 },
    );
  });

  it('gives the same bytes for objects of one key set inserted in different orders (shape cache)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ unit: 'binary', maxLength: 6 }), { maxLength: 8 }),
        fc.array(fc.maxSafeInteger(), { minLength: 8, maxLength: 8 }),
        (keys, values) => {
          const forward = Object.fromEntries(keys.map((k, i) => [k, values[i]!]));
          const backward = Object.fromEntries(keys.map((k, i) => [k, values[i]!]).reverse());
          expect(ours(forward)).toBe(cborgBytes(forward));
          expect(ours(backward)).toBe(cborgBytes(forward));
        },
      ),
      { seed: 8949, numRuns: 500 },
    );
  });

  it('sorts integer and text keys of a Map like cborg', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.string({ maxLength: 4 })), { maxLength: 8 }),
        (keys) => {
          const m = new Map<unknown, unknown>(keys.map((k, i) => [k, i]));
          expect(ours(m)).toBe(cborgBytes(m));
        },
      ),
      { seed: 8949, numRuns: 300 },
    );
  });

  it.each([
    ['a float', 1.5],
    ['-0', -0],
    ['an unsafe number', 2 ** 53],
    ['2^64', 2n ** 64n],
    ['a lone surrogate', '\ud800'],
    ['a bool', false],
    ['null', null],
    ['undefined', undefined],
  ] as const)('refuses %s with cbor-forbidden-type, as encode() does', (_what, v) => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof JcpError ? e.code : 'untyped';
      }
      return undefined;
    };
    expect(code(() => encode([v]))).toBe(ErrorCodes.CBOR_FORBIDDEN_TYPE);
    expect(code(() => encode([v]))).toBe(ErrorCodes.CBOR_FORBIDDEN_TYPE);
  });
});

// ---- The seeded corpus -------------------------------------------------------------------

/** mulberry32: a tiny seeded PRNG (deterministic corpus; no ambient randomness). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = ReturnType<typeof prng>;
const int = (r: Rand, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

const INT_EDGES = [0n, 1n, 23n, 24n, 255n, 256n, 65535n, 65536n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, U64];
const TEXTS = ['', 'a', 'grant_id', 'budget_uj', 'ü', '水', '𐅑', '\ufeffbom', 'x'.repeat(23), 'y'.repeat(24), 'z'.repeat(300)];

function randomInt(r: Rand): number | bigint {
  const edge = pick(r, INT_EDGES) + BigInt(int(r, 3)) - 1n;
  const v = r() < 0.5 ? edge : BigInt(int(r, 1 << 30)) * BigInt(1 + int(r, 1 << 20));
  const signed = r() < 0.3 ? -v - 1n : v;
  if (signed > U64 || signed < -U64 - 1n) return 7;
  return signed >= BigInt(Number.MIN_SAFE_INTEGER) && signed <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(signed) : signed;
}

function randomValue(r: Rand, depth: number): unknown {
  const k = int(r, depth > 2 ? 3 : 5);
  if (k === 0) return randomInt(r);
  if (k === 1) return pick(r, TEXTS) + (r() < 0.5 ? String(int(r, 1000)) : '');
  if (k === 2) return Uint8Array.from({ length: pick(r, [0, 1, 5, 23, 24, 32, 64, 300]) }, () => int(r, 256));
  if (k === 3) return Array.from({ length: int(r, 5) }, () => randomValue(r, depth + 1));
  const o: Record<string, unknown> = {};
  const n = int(r, 6);
  for (let i = 0; i < n; i++) o[pick(r, TEXTS).slice(0, 12) + (r() < 0.5 ? String(i) : '')] = randomValue(r, depth + 1);
  return o;
}

/** One item of a valid encoding: where its head and its whole extent are. */
interface Item {
  readonly start: number;
  readonly headLen: number;
  readonly end: number;
  readonly major: number;
  readonly arg: bigint;
  readonly isKey: boolean;
  readonly entries?: readonly { readonly start: number; readonly end: number }[];
}

/** Lists the items of a canonical encoding (input is trusted: it came from `encode`). */
function items(b: Uint8Array): Item[] {
  const out: Item[] = [];
  let pos = 0;
  const walk = (isKey: boolean): void => {
    const start = pos;
    const ib = b[pos++]!;
    const major = ib >> 5;
    const ai = ib & 31;
    let arg = BigInt(ai);
    if (ai >= 24) {
      arg = 0n;
      for (let i = 0; i < 1 << (ai - 24); i++) arg = (arg << 8n) | BigInt(b[pos++]!);
    }
    const headLen = pos - start;
    const index = out.length;
    out.push({ start, headLen, end: -1, major, arg, isKey });
    const entries: { start: number; end: number }[] = [];
    if (major === 2 || major === 3) pos += Number(arg);
    else if (major === 4) for (let i = 0n; i < arg; i++) walk(false);
    else if (major === 5)
      for (let i = 0n; i < arg; i++) {
        const s = pos;
        walk(true);
        walk(false);
        entries.push({ start: s, end: pos });
      }
    out[index] = { ...out[index]!, end: pos, ...(major === 5 ? { entries } : {}) };
  };
  walk(false);
  return out;
}

/** The head of an item with `major` and `arg`, using exactly `width` argument bytes (0 = inline). */
function head(major: number, arg: bigint, width: 0 | 1 | 2 | 4 | 8): Uint8Array {
  if (width === 0) return Uint8Array.of((major << 5) | Number(arg));
  const ai = { 1: 24, 2: 25, 4: 26, 8: 27 }[width];
  const out = new Uint8Array(1 + width);
  out[0] = (major << 5) | ai;
  for (let i = 0; i < width; i++) out[width - i] = Number((arg >> BigInt(8 * i)) & 0xffn);
  return out;
}

const splice = (b: Uint8Array, from: number, to: number, insert: Uint8Array) =>
  Uint8Array.from([...b.subarray(0, from), ...insert, ...b.subarray(to)]);

/** A mutated input, and the refusal code its construction guarantees (if any). */
interface Mutant {
  readonly kind: string;
  readonly bytes: Uint8Array;
  readonly mustBe?: ErrorCode;
}

function mutate(r: Rand, b: Uint8Array, its: readonly Item[]): Mutant | undefined {
  const kind = int(r, 13);
  switch (kind) {
    case 0: {
      const m = new Uint8Array(b);
      for (let i = 1 + int(r, 3); i > 0; i--) m[int(r, m.length)]! ^= 1 << int(r, 8);
      return { kind: 'bit flip', bytes: m };
    }
    case 1: // CBOR items are self-delimiting: no proper prefix is a whole item.
      return { kind: 'truncation', bytes: b.subarray(0, int(r, b.length)), mustBe: ErrorCodes.CBOR_MALFORMED };
    case 2: {
      const at = int(r, b.length + 1);
      return {
        kind: 'insertion',
        bytes: splice(
          b,
          at,
          at,
          Uint8Array.from({ length: 1 + int(r, 3) }, () => int(r, 256)),
        ),
      };
    }
    case 3: {
      const at = int(r, b.length);
      return { kind: 'deletion', bytes: splice(b, at, at + 1 + int(r, 2), new Uint8Array()) };
    }
    case 4:
      return {
        kind: 'trailing bytes',
        bytes: splice(b, b.length, b.length, Uint8Array.of(int(r, 256))),
        mustBe: ErrorCodes.CBOR_MALFORMED,
      };
    case 5: {
      // The same argument in a longer form than the shortest.
      const it = pick(r, its);
      const shortest = it.arg < 24n ? 0 : it.arg < 256n ? 1 : it.arg < 65536n ? 2 : it.arg < 2n ** 32n ? 4 : 8;
      const longer = ([1, 2, 4, 8] as const).filter((w) => w > shortest);
      if (longer.length === 0) return undefined;
      const h = head(it.major, it.arg, pick(r, longer));
      return { kind: 'long-form argument', bytes: splice(b, it.start, it.start + it.headLen, h), mustBe: ErrorCodes.CBOR_NON_CANONICAL };
    }
    case 6: {
      // A length field changed (shortest form kept): any outcome, as long as it is typed and canonical.
      const sized = its.filter((i) => i.major >= 2 && i.major <= 5);
      if (sized.length === 0) return undefined;
      const it = pick(r, sized);
      const arg = it.arg + BigInt(pick(r, [-2, -1, 1, 2, 1000, 1 << 20]));
      if (arg < 0n) return undefined;
      const width = arg < 24n ? 0 : arg < 256n ? 1 : arg < 65536n ? 2 : arg < 2n ** 32n ? 4 : 8;
      return { kind: 'length tampering', bytes: splice(b, it.start, it.start + it.headLen, head(it.major, arg, width)) };
    }
    case 7: {
      // Definite → indefinite length (still well-formed CBOR, never canonical).
      const sized = its.filter((i) => i.major >= 2 && i.major <= 5);
      if (sized.length === 0) return undefined;
      const it = pick(r, sized);
      const inner =
        it.major <= 3
          ? Uint8Array.from([(it.major << 5) | 31, ...b.subarray(it.start, it.end), 0xff])
          : Uint8Array.from([(it.major << 5) | 31, ...b.subarray(it.start + it.headLen, it.end), 0xff]);
      return { kind: 'indefinite length', bytes: splice(b, it.start, it.end, inner), mustBe: ErrorCodes.CBOR_NON_CANONICAL };
    }
    case 8: {
      const maps = its.filter((i) => (i.entries?.length ?? 0) >= 2);
      if (maps.length === 0) return undefined;
      const m = pick(r, maps);
      const [e0, e1] = [m.entries![0]!, m.entries![1]!];
      const swapped = Uint8Array.from([...b.subarray(e1.start, e1.end), ...b.subarray(e0.start, e0.end)]);
      return { kind: 'unsorted keys', bytes: splice(b, e0.start, e1.end, swapped), mustBe: ErrorCodes.CBOR_NON_CANONICAL };
    }
    case 9: {
      const maps = its.filter((i) => (i.entries?.length ?? 0) >= 1 && i.arg < 23n);
      if (maps.length === 0) return undefined;
      const m = pick(r, maps);
      const e0 = m.entries![0]!;
      const dup = Uint8Array.from([...head(5, m.arg + 1n, 0), ...b.subarray(e0.start, e0.end), ...b.subarray(e0.start, m.end)]);
      return { kind: 'duplicate key', bytes: splice(b, m.start, m.end, dup), mustBe: ErrorCodes.CBOR_NON_CANONICAL };
    }
    case 10: {
      // A float, a simple value or an unrequested tag where an item was.
      const it = pick(r, its);
      const bad = pick(r, [
        Uint8Array.of(0xf9, 0x3c, 0x00),
        Uint8Array.of(0xfb, 0, 0, 0, 0, 0, 0, 0, 0),
        Uint8Array.of(0xf4),
        Uint8Array.of(0xf5),
        Uint8Array.of(0xf6),
        Uint8Array.of(0xf7),
        Uint8Array.of(0xf8, 0x20),
        Uint8Array.from([0xc2, ...b.subarray(it.start, it.end)]),
        Uint8Array.from([0xd8, 0x2a, ...b.subarray(it.start, it.end)]),
      ]);
      return { kind: 'forbidden type', bytes: splice(b, it.start, it.end, bad), mustBe: ErrorCodes.CBOR_FORBIDDEN_TYPE };
    }
    case 11: {
      const texts = its.filter((i) => i.major === 3 && i.arg > 0n);
      if (texts.length === 0) return undefined;
      const it = pick(r, texts);
      const m = new Uint8Array(b);
      m[it.start + it.headLen + int(r, Number(it.arg))] = pick(r, [0xff, 0xfe, 0xc0, 0x80, 0xed]);
      // 0xed and 0x80 can still be valid inside a multi-byte sequence: no fixed expectation then.
      return { kind: 'broken UTF-8', bytes: m };
    }
    default:
      return { kind: 'random bytes', bytes: Uint8Array.from({ length: 1 + int(r, 24) }, () => int(r, 256)) };
  }
}

type Attempt = { kind: 'accepted'; reencoded: Uint8Array } | { kind: 'refused'; code: string };

function attempt(bytes: Uint8Array): Attempt {
  let value: unknown;
  try {
    value = decode(bytes);
  } catch (e) {
    return { kind: 'refused', code: e instanceof JcpError ? e.code : `untyped ${(e as Error)?.name}: ${String(e)}` };
  }
  return { kind: 'accepted', reencoded: encode(value) };
}

const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

describe('cbor fuzz - 100,000+ generated and mutated byte strings', () => {
  it('refuses with a typed code or accepts only canonical bytes, and refuses known-bad mutants with their code', () => {
    const r = prng(0x8949);
    const TARGET = 100_000;
    const byKind = new Map<string, { total: number; accepted: number; codes: Map<string, number> }>();
    const untyped: string[] = [];
    const nonCanonicalAccepted: string[] = [];
    const wrongCode: string[] = [];
    let total = 0;
    let valid = 0;
    while (total < TARGET) {
      const base = encode(randomValue(r, 0));
      const its = items(base);
      // The unmutated encoding must be accepted as-is.
      const ok = attempt(base);
      if (ok.kind !== 'accepted' || !sameBytes(ok.reencoded, base)) nonCanonicalAccepted.push(`base ${toHex(base)}`);
      valid++;
      total++;
      for (let i = 0; i < 40; i++) {
        const m = mutate(r, base, its);
        if (!m) continue;
        total++;
        const res = attempt(m.bytes);
        const k = byKind.get(m.kind) ?? { total: 0, accepted: 0, codes: new Map<string, number>() };
        byKind.set(m.kind, k);
        k.total++;
        if (res.kind === 'accepted') {
          k.accepted++;
          if (!sameBytes(res.reencoded, m.bytes)) nonCanonicalAccepted.push(`${m.kind} ${toHex(m.bytes)}`);
          if (m.mustBe) wrongCode.push(`${m.kind}: accepted ${toHex(m.bytes)}`);
        } else {
          k.codes.set(res.code, (k.codes.get(res.code) ?? 0) + 1);
          if (!CBOR_CODES.includes(res.code)) untyped.push(`${m.kind} ${toHex(m.bytes)}: ${res.code}`);
          else if (m.mustBe && res.code !== m.mustBe) wrongCode.push(`${m.kind}: ${res.code} ≠ ${m.mustBe} for ${toHex(m.bytes)}`);
        }
      }
    }
    expect(untyped.slice(0, 5)).toEqual([]);
    expect(nonCanonicalAccepted.slice(0, 5)).toEqual([]);
    expect(wrongCode.slice(0, 5)).toEqual([]);
    expect(total).toBeGreaterThanOrEqual(TARGET);
    expect(valid).toBeGreaterThan(1000);
    // Every mutation kind ran many times, and most kinds were refused with more than one code.
    expect(byKind.size).toBe(13);
    for (const [, k] of byKind) expect(k.total).toBeGreaterThan(1000);
    // Some mutants decode (a flipped bit in a value byte is still canonical): the invariant was exercised.
    expect(byKind.get('bit flip')!.accepted).toBeGreaterThan(0);
    expect(byKind.get('random bytes')!.accepted).toBeGreaterThan(0);
  });
});

/** Same value, same types: numbers vs bigints, plain objects vs Maps, Uint8Array (not Buffer) contents. */
function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a !== typeof b) return false;
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    return a instanceof Uint8Array && b instanceof Uint8Array && !Buffer.isBuffer(a) && !Buffer.isBuffer(b) && sameBytes(a, b);
  }
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map && b instanceof Map) || a.size !== b.size) return false;
    const ka = [...a.keys()];
    const kb = [...b.keys()];
    return ka.every((k, i) => sameValue(k, kb[i]) && sameValue(a.get(k), b.get(kb[i])));
  }
  if (a !== null && typeof a === 'object') {
    const ea = Object.entries(a as object);
    const eb = Object.entries(b as object);
    return (
      Object.getPrototypeOf(a) === Object.getPrototypeOf(b) &&
      ea.length === eb.length &&
      ea.every(([k, v], i) => k === eb[i]![0] && sameValue(v, eb[i]![1]))
    );
  }
  return Object.is(a, b);
}

function onlySafeIntegers(v: unknown): boolean {
  if (typeof v === 'bigint') return false;
  if (Array.isArray(v)) return v.every(onlySafeIntegers);
  if (v instanceof Uint8Array) return true;
  if (v !== null && typeof v === 'object') return Object.values(v).every(onlySafeIntegers);
  return true;
}

describe('cbor fuzz - the decoder fast path agrees with the cborg path', () => {
  it('on 40,000+ valid and mutated byte strings, as objects and as Maps', () => {
    const r = prng(0x5eed);
    const disagreements: string[] = [];
    let fastAccepted = 0;
    let fellBack = 0;
    let total = 0;
    const check = (bytes: Uint8Array, useMaps: boolean, mustAccept: boolean) => {
      total++;
      const fast = readCanonical(bytes, useMaps);
      if (fast === undefined) {
        fellBack++;
        if (mustAccept) disagreements.push(`fast path refused a valid encoding ${toHex(bytes)}`);
        return;
      }
      fastAccepted++;
      let slow: unknown;
      try {
        slow = decodeByCborg(bytes, { useMaps });
      } catch (e) {
        disagreements.push(`fast accepted, cborg refused (${(e as Error).message}): ${toHex(bytes)}`);
        return;
      }
      if (!sameValue(fast, slow)) disagreements.push(`values differ for ${toHex(bytes)}`);
    };
    while (total < 40_000) {
      const v = randomValue(r, 0);
      const base = encode(v);
      const its = items(base);
      check(base, false, onlySafeIntegers(v));
      check(base, true, onlySafeIntegers(v));
      for (let i = 0; i < 10; i++) {
        const m = mutate(r, base, its);
        if (m) check(m.bytes, i % 2 === 1, false);
      }
    }
    // A Buffer input gives plain Uint8Array byte strings, as the cborg path does.
    const buf = Buffer.from(encode({ b: Uint8Array.of(1, 2, 3) }));
    expect(sameValue(decode(buf), decodeByCborg(buf))).toBe(true);
    expect(disagreements.slice(0, 5)).toEqual([]);
    expect(fastAccepted).toBeGreaterThan(5_000);
    expect(fellBack).toBeGreaterThan(5_000);
  });
});
