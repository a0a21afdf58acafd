/**
 * A deliberately loose CBOR writer (RFC 8949 §3) for building the bad inputs of the vectors:
 * unsorted keys, long-form integers, indefinite lengths, floats, simple values. The canonical
 * encoder (`core/cbor.ts`) refuses to write any of these, which is the point of having both.
 */
import { concat, utf8 } from '../core/index.ts';

/** An item head with a chosen argument width: 0 = shortest, else 1, 2, 4 or 8 bytes. */
export function rawHead(major: number, n: number | bigint, width: 0 | 1 | 2 | 4 | 8 = 0): Uint8Array {
  const v = BigInt(n);
  const w = width !== 0 ? width : v < 24n ? 0 : v < 0x100n ? 1 : v < 0x10000n ? 2 : v < 0x1_0000_0000n ? 4 : 8;
  if (w === 0) return Uint8Array.of((major << 5) | Number(v));
  const ai = { 1: 24, 2: 25, 4: 26, 8: 27 }[w];
  const out = new Uint8Array(1 + w);
  out[0] = (major << 5) | ai;
  for (let i = 0; i < w; i++) out[w - i] = Number((v >> BigInt(8 * i)) & 0xffn);
  return out;
}

/** Options of {@link rawEncode}. */
export interface RawOpts {
  /** Write map keys in insertion order instead of canonical order. */
  readonly unsorted?: boolean;
  /** Write every unsigned integer with this argument width. */
  readonly intWidth?: 1 | 2 | 4 | 8;
}

/** The canonical order of text keys: shorter first, then bytewise (RFC 8949 §4.2.1 on their encodings). */
function canonicalKeys(keys: string[]): string[] {
  return [...keys].sort((a, b) => {
    const ea = utf8(a);
    const eb = utf8(b);
    if (ea.length !== eb.length) return ea.length - eb.length;
    return Buffer.compare(ea, eb);
  });
}

/**
 * Encodes a JCP value (uint, bigint, text, bytes, array, plain object with text keys) with the
 * given distortions. Anything else throws (a generator bug).
 */
export function rawEncode(v: unknown, opts: RawOpts = {}): Uint8Array {
  if (typeof v === 'number' || typeof v === 'bigint') {
    const n = BigInt(v);
    if (n < 0n) return rawHead(1, -1n - n);
    return rawHead(0, n, opts.intWidth ?? 0);
  }
  if (typeof v === 'string') {
    const b = utf8(v);
    return concat(rawHead(3, b.length), b);
  }
  if (v instanceof Uint8Array) return concat(rawHead(2, v.length), v);
  if (Array.isArray(v)) return concat(rawHead(4, v.length), ...v.map((x) => rawEncode(x, opts)));
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    const keys = opts.unsorted ? Object.keys(o) : canonicalKeys(Object.keys(o));
    return concat(rawHead(5, keys.length), ...keys.flatMap((k) => [rawEncode(k, opts), rawEncode(o[k], opts)]));
  }
  throw new Error(`rawEncode: cannot encode ${typeof v}`);
}

/** A map written from already-encoded (key, value) pairs in the given order. */
export function rawMap(pairs: readonly (readonly [Uint8Array, Uint8Array])[]): Uint8Array {
  return concat(rawHead(5, pairs.length), ...pairs.flat());
}

/** An indefinite-length map (RFC 8949 §3.2.2) from already-encoded pairs. */
export function rawIndefiniteMap(pairs: readonly (readonly [Uint8Array, Uint8Array])[]): Uint8Array {
  return concat(Uint8Array.of(0xbf), ...pairs.flat(), Uint8Array.of(0xff));
}

/** A double-precision float (major type 7, additional info 27). */
export function rawFloat64(x: number): Uint8Array {
  const out = new Uint8Array(9);
  out[0] = 0xfb;
  new DataView(out.buffer).setFloat64(1, x, false);
  return out;
}

/** The simple value true (0xf5): a bool, forbidden in a JCP object. */
export const RAW_TRUE = Uint8Array.of(0xf5);
/** The simple value null (0xf6), forbidden in a JCP object. */
export const RAW_NULL = Uint8Array.of(0xf6);

/** A text key, encoded. */
export function rawKey(k: string): Uint8Array {
  return rawEncode(k);
}
