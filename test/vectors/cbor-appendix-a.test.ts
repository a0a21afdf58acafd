/**
 * RFC 8949 Appendix A (Table 6, 81 examples) and the reserved two-byte simple values of Appendix
 * F.1 (4 encodings, not well-formed) through `core/cbor.ts`. Both are transcribed from the RFC in
 * `test/vectors/third-party/rfc8949-appendix-a/` (see its SOURCE).
 *
 * The expected verdict of each item is derived from its bytes by `classify` below, a small
 * independent reading of RFC 8949 §3 and the JCP rules of spec §3 / docs/design.md "Encodings":
 * integers (to 64 bits), text, byte strings, arrays and text-keyed maps in canonical form are
 * accepted and must re-encode byte-identically and decode to the value the diagnostic notation
 * names; the first offending feature in byte order decides the refusal code otherwise:
 * - float, simple value (false/true/null/undefined/simple(n)), tag, non-text map key → `cbor-forbidden-type`;
 * - indefinite length, an argument not in shortest form, unsorted/duplicate keys → `cbor-non-canonical`;
 * - not well-formed (a two-byte simple value below 32, RFC 8949 §3.3; truncation; trailing bytes) → `cbor-malformed`.
 */
import { describe, expect, it } from 'vitest';
import { decode, encode, type ErrorCode, ErrorCodes, JcpError } from '../../core/index.ts';
import { hex, vectorText } from './load.ts';

interface AppendixItem {
  /** The encoding, lower-case hex. */
  hex: string;
  /** The diagnostic notation the RFC prints beside it (Appendix F.1 items print none). */
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

const examples: AppendixItem[] = vectorText('rfc8949-appendix-a/appendix-a.txt')
  .split('\n')
  .filter((line) => line !== '' && !line.startsWith('#'))
  .map((line) => {
    const [diagnostic, encoded] = line.split('\t');
    if (!diagnostic || !encoded?.startsWith('0x')) throw new Error(`bad Appendix A line: ${line}`);
    return { hex: encoded.slice(2), diagnostic };
  });
const notWellFormed: AppendixItem[] = vectorText('rfc8949-appendix-a/appendix-f.txt')
  .split('\n')
  .filter((line) => line !== '' && !line.startsWith('#'))
  .map((line) => ({ hex: line.replaceAll(' ', '') }));
const items = [...examples, ...notWellFormed];

/**
 * The value a diagnostic-notation text names, for the accepted kinds only (RFC 8949 §8: integers,
 * "text" with JSON escapes, h'hex', [arrays], {"text": maps}): integers as bigint, bytes as {h: hex}.
 */
function diagnosticValue(text: string): unknown {
  let pos = 0;
  const ws = () => {
    while (text[pos] === ' ') pos++;
  };
  const value = (): unknown => {
    ws();
    const c = text[pos];
    if (c === '[' || c === '{') {
      const close = c === '[' ? ']' : '}';
      pos++;
      const out: unknown[] = [];
      const map: Record<string, unknown> = {};
      ws();
      while (text[pos] !== close) {
        const v = value();
        ws();
        if (close === '}') {
          if (text[pos++] !== ':' || typeof v !== 'string') throw new Error(`not a text-keyed map: ${text}`);
          map[v] = value();
          ws();
        } else out.push(v);
        if (text[pos] === ',') pos++;
        ws();
      }
      pos++;
      return close === ']' ? out : map;
    }
    if (c === '"') {
      let end = pos + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const s = JSON.parse(text.slice(pos, end + 1)) as string;
      pos = end + 1;
      return s;
    }
    const bytes = /^h'([0-9a-f]*)'/.exec(text.slice(pos));
    if (bytes) {
      pos += bytes[0].length;
      return { h: bytes[1] };
    }
    const int = /^-?\d+/.exec(text.slice(pos));
    if (int) {
      pos += int[0].length;
      return BigInt(int[0]);
    }
    throw new Error(`diagnostic notation not of an accepted kind at ${pos}: ${text}`);
  };
  const v = value();
  if (pos !== text.length) throw new Error(`trailing text in ${text}`);
  return v;
}

/** A comparable form: integers as bigint, bytes as {h: hex}. */
function norm(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (v instanceof Uint8Array) return { h: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return v.map(norm);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]));
  return v;
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
  return { i, item, verdict, label, what: item.diagnostic ?? 'Appendix F.1, not well-formed' };
});

describe('cbor - RFC 8949 Appendix A', () => {
  it('has the 81 examples of Appendix A and the 4 reserved two-byte simple values of Appendix F.1', () => {
    expect(examples.length).toBe(81);
    expect(notWellFormed.length).toBe(4);
  });

  it.each(rows)('#$i $item.hex ($what): $label', ({ item, verdict }) => {
    const bytes = hex(item.hex);
    if (verdict.accept) {
      const value = decode(bytes);
      expect(Buffer.from(encode(value)).toString('hex')).toBe(item.hex);
      expect(norm(value)).toEqual(diagnosticValue(item.diagnostic ?? ''));
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
    expect([...tally.values()].reduce((a, b) => a + b)).toBe(85);
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
