/**
 * RFC 8949 Appendix A (cbor/test-vectors `appendix_a.json`, 82 items) through `core/cbor.ts`.
 *
 * The expected verdict of each item is derived from its bytes by `classify` below, a small
 * independent reading of RFC 8949 §3 and the JCP rules of spec §3 / docs/design.md "Encodings":
 * integers (to 64 bits), text, byte strings, arrays and text-keyed maps in canonical form are
 * accepted and must re-encode byte-identically; the first offending feature in byte order
 * decides the refusal code otherwise:
 * - float, simple value (false/true/null/undefined/simple(n)), tag, non-text map key → `cbor-forbidden-type`;
 * - indefinite length, an argument not in shortest form, unsorted/duplicate keys → `cbor-non-canonical`;
 * - not well-formed (a two-byte simple value below 32, RFC 8949 §3.3; truncation; trailing bytes) → `cbor-malformed`.
 */
import { describe, expect, it } from 'vitest';
import { decode, encode, type ErrorCode, ErrorCodes, JcpError } from '../../core/index.ts';
import { hex, vectorJson, vectorText } from './load.ts';

interface AppendixItem {
  hex: string;
  roundtrip: boolean;
  decoded?: unknown;
  diagnostic?: string;
}

type Verdict = { readonly accept: true } | { readonly accept: false; readonly code: ErrorCode; readonly why: string };

class Refusal {
  readonly code: ErrorCode;
  readonly why: string;
  constructor(code: ErrorCode, why: string) {
    this.code = code;
    this.why = why;
  }
}

const SIMPLE_NAMES: Record<number, string> = { 20: 'false', 21: 'true', 22: 'null', 23: 'undefined' };

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The verdict the JCP rules give for `b`, from its bytes alone. */
function classify(b: Uint8Array): Verdict {
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > b.length) throw new Refusal(ErrorCodes.CBOR_MALFORMED, 'truncated');
  };
  const item = (isKey: boolean): void => {
    need(1);
    const ib = b[pos++]!;
    const major = ib >> 5;
    const ai = ib & 31;
    let arg = BigInt(ai);
    if (ai >= 24 && ai <= 27) {
      const n = 1 << (ai - 24);
      need(n);
      arg = 0n;
      for (let i = 0; i < n; i++) arg = (arg << 8n) | BigInt(b[pos++]!);
      if (major === 7) {
        if (ai === 24 && arg < 32n) throw new Refusal(ErrorCodes.CBOR_MALFORMED, `two-byte simple(${arg}) is not well-formed`);
      } else if (arg < [24n, 256n, 65536n, 2n ** 32n][ai - 24]!) {
        throw new Refusal(ErrorCodes.CBOR_NON_CANONICAL, `argument ${arg} not in shortest form`);
      }
    }
    if (isKey && major !== 3) throw new Refusal(ErrorCodes.CBOR_FORBIDDEN_TYPE, `map key of major type ${major}, not text`);
    if (ai === 31 && major >= 2 && major <= 5) throw new Refusal(ErrorCodes.CBOR_NON_CANONICAL, 'indefinite length');
    switch (major) {
      case 0:
      case 1:
        return;
      case 2:
      case 3:
        need(Number(arg));
        pos += Number(arg);
        return;
      case 4:
        for (let i = 0n; i < arg; i++) item(false);
        return;
      case 5: {
        let prev: Uint8Array | undefined;
        for (let i = 0n; i < arg; i++) {
          const start = pos;
          item(true);
          const key = b.subarray(start, pos);
          if (prev && compareBytes(prev, key) >= 0) throw new Refusal(ErrorCodes.CBOR_NON_CANONICAL, 'map keys not in order');
          prev = key;
          item(false);
        }
        return;
      }
      case 6:
        throw new Refusal(ErrorCodes.CBOR_FORBIDDEN_TYPE, `tag ${arg}`);
      default:
        if (ai >= 25 && ai <= 27) throw new Refusal(ErrorCodes.CBOR_FORBIDDEN_TYPE, 'float');
        throw new Refusal(ErrorCodes.CBOR_FORBIDDEN_TYPE, `simple value ${SIMPLE_NAMES[ai] ?? `simple(${arg})`}`);
    }
  };
  try {
    item(false);
    if (pos !== b.length) throw new Refusal(ErrorCodes.CBOR_MALFORMED, 'trailing bytes');
  } catch (e) {
    if (e instanceof Refusal) return { accept: false, code: e.code, why: e.why };
    throw e;
  }
  return { accept: true };
}

const items = vectorJson<AppendixItem[]>('cbor-test-vectors/appendix_a.json');
// JSON.parse rounds integers beyond 2^53; read those from the file's text instead.
const bigDecoded = new Map<string, bigint>();
for (const m of vectorText('cbor-test-vectors/appendix_a.json').matchAll(
  /"hex": "([0-9a-f]*)",\s*"roundtrip": \w+,\s*"decoded": (-?\d{16,})\s*[\n}]/g,
)) {
  bigDecoded.set(m[1]!, BigInt(m[2]!));
}

/** A comparable form: integers as bigint, bytes as {h: hex}. */
function norm(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (v instanceof Uint8Array) return { h: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return v.map(norm);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
}

/** The value the file says the item holds (only needed for accepted items). */
function expectedValue(it: AppendixItem): unknown {
  const big = bigDecoded.get(it.hex);
  if (big !== undefined) return big;
  if ('decoded' in it) return norm(it.decoded);
  const bytes = /^h'([0-9a-f]*)'$/.exec(it.diagnostic ?? '');
  if (bytes) return { h: bytes[1] };
  throw new Error(`no comparable value for ${it.hex}: ${it.diagnostic}`);
}

function refusalCode(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof JcpError ? e.code : `untyped: ${String(e)}`;
  }
  return undefined;
}

const rows = items.map((item, i) => {
  const verdict = classify(hex(item.hex));
  const label = verdict.accept ? 'accepted' : `refused ${verdict.code} (${verdict.why})`;
  return { i, item, verdict, label, what: item.diagnostic ?? JSON.stringify(item.decoded) };
});

describe('cbor - RFC 8949 Appendix A', () => {
  it('has the 82 items', () => {
    expect(items.length).toBe(82);
  });

  it.each(rows)('#$i $item.hex ($what): $label', ({ item, verdict }) => {
    const bytes = hex(item.hex);
    if (verdict.accept) {
      expect(item.roundtrip).toBe(true);
      const value = decode(bytes);
      expect(Buffer.from(encode(value)).toString('hex')).toBe(item.hex);
      expect(norm(value)).toEqual(expectedValue(item));
    } else {
      expect(refusalCode(() => decode(bytes))).toBe(verdict.code);
    }
  });

  it('accepts only integers, text, bytes, arrays and text-keyed maps; refuses each other kind with its code', () => {
    const tally = new Map<string, number>();
    for (const r of rows) {
      const k = r.verdict.accept ? 'accepted' : r.verdict.code;
      tally.set(k, (tally.get(k) ?? 0) + 1);
    }
    // Every outcome class occurs, so a decoder that accepted (or refused) everything would fail above.
    expect([...tally.keys()].sort()).toEqual(
      ['accepted', ErrorCodes.CBOR_FORBIDDEN_TYPE, ErrorCodes.CBOR_MALFORMED, ErrorCodes.CBOR_NON_CANONICAL].sort(),
    );
    expect([...tally.values()].reduce((a, b) => a + b)).toBe(82);
  });

  it('decodes the integer-keyed map {1: 2, 3: 4} as a Map when asked (COSE headers), byte-identically', () => {
    const bytes = hex('a201020304');
    const value = decode(bytes, { useMaps: true });
    expect(value).toEqual(
      new Map([
        [1, 2],
        [3, 4],
      ]),
    );
    expect(Buffer.from(encode(value)).toString('hex')).toBe('a201020304');
  });
});
