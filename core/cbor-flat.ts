/**
 * Hand-assembled det-CBOR for the hot paths (RFC 8949 §3, §4.2.1): item heads for the
 * COSE_Sign1 envelope and its Sig_structure, "flat maps" — text keys to unsigned integers,
 * text, or arrays of text — which is all a receipt core holds, and {@link readCanonical}, the
 * fast path of `cbor.ts` `decode` for any JCP value already in canonical form.
 *
 * Writing produces exactly what `cbor.ts` `encode` produces (tests compare the two). Reading
 * accepts only bytes that are already canonical (shortest heads, definite lengths, keys strictly
 * ascending by their encoding, valid UTF-8, nothing after the item) and returns undefined for
 * anything else, so the caller falls back to the general strict decoder, which names the
 * precise fault. Nothing accepted here would be refused by `cbor.ts` `decode`.
 */
import { ErrorCodes, JcpError } from './errors.ts';

/** CBOR major types used here. */
export const MAJOR = { uint: 0, bytes: 2, text: 3, array: 4, map: 5, tag: 6 } as const;

/** A shortest-form head read from a byte array: major type, argument, and where the content starts. */
export interface Head {
  readonly major: number;
  /** The argument: a length, or an unsigned value (bigint above 2^53 − 1). */
  readonly value: number | bigint;
  /** Offset just past the head. */
  readonly next: number;
}

/**
 * Reads the head at `off`. Returns undefined when it is truncated, indefinite, reserved, or not
 * in shortest form (the caller falls back to the general decoder for the precise error).
 */
export function readHead(bytes: Uint8Array, off: number): Head | undefined {
  return headAt(bytes, off) ? { major: hMajor, value: hValue, next: hNext } : undefined;
}

/** Reads a definite byte or text string of major type `major` at `off`: its content bounds, or undefined. */
export function readString(bytes: Uint8Array, off: number, major: number): { start: number; end: number } | undefined {
  const h = readHead(bytes, off);
  if (!h || h.major !== major || typeof h.value !== 'number') return undefined;
  const end = h.next + h.value;
  if (end > bytes.length) return undefined;
  return { start: h.next, end };
}

/** A flat-map value: an unsigned integer (< 2^64), text, or an array of text. */
export type FlatValue = number | bigint | string | readonly string[];

const utf8Enc = new TextEncoder();
// ignoreBOM: a leading U+FEFF is kept, as the strict decoder keeps it (the value must re-encode to its bytes).
const utf8Dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const U64_LIMIT = 1n << 64n;

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** UTF-8 bytes of `s`; a plain loop for ASCII (the common case: dids, hex ids, enums), else TextEncoder. */
function utf8Of(s: string): Uint8Array {
  const n = s.length;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return utf8Enc.encode(s);
    out[i] = c;
  }
  return out;
}

/** Bytes in the shortest head for argument `n`. */
export function headLength(n: number | bigint): number {
  if (typeof n === 'bigint') return n < 24n ? 1 : n < 0x100n ? 2 : n < 0x10000n ? 3 : n < 0x1_0000_0000n ? 5 : 9;
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x1_0000_0000 ? 5 : 9;
}

/** Writes the shortest head of (`major`, `n`) into `out` at `off`; returns the new offset. */
export function writeHead(out: Uint8Array, off: number, major: number, n: number | bigint): number {
  const m = major << 5;
  const v = typeof n === 'bigint' && n < 0x1_0000_0000n ? Number(n) : n;
  if (typeof v === 'number' && v < 0x1_0000_0000) {
    if (v < 24) {
      out[off] = m | v;
      return off + 1;
    }
    if (v < 0x100) {
      out[off] = m | 24;
      out[off + 1] = v;
      return off + 2;
    }
    if (v < 0x10000) {
      out[off] = m | 25;
      out[off + 1] = v >>> 8;
      out[off + 2] = v & 0xff;
      return off + 3;
    }
    out[off] = m | 26;
    out[off + 1] = v >>> 24;
    out[off + 2] = (v >>> 16) & 0xff;
    out[off + 3] = (v >>> 8) & 0xff;
    out[off + 4] = v & 0xff;
    return off + 5;
  }
  // 8-byte argument (≥ 2^32), written in place: as two 32-bit halves when it is a safe integer.
  out[off] = m | 27;
  const dv = new DataView(out.buffer, out.byteOffset + off + 1, 8);
  if (typeof v === 'number' || v <= MAX_SAFE) {
    const x = Number(v);
    const hi = Math.floor(x / 0x1_0000_0000);
    dv.setUint32(0, hi, false);
    dv.setUint32(4, x - hi * 0x1_0000_0000, false);
  } else {
    dv.setBigUint64(0, v, false);
  }
  return off + 9;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function checkUint(v: number | bigint, key: string): void {
  const ok = typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : v >= 0n && v < U64_LIMIT;
  if (!ok) throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `${key}: not an unsigned integer below 2^64`);
}

/**
 * A writer for flat maps over a fixed key set: keys are sorted once into canonical order
 * (bytewise by their encoding, i.e. length-first for text), then each call writes the present
 * entries in that order into one buffer sized up front.
 */
export class FlatMapWriter {
  readonly #keys: readonly { key: string; bytes: Uint8Array }[];

  constructor(keys: readonly string[]) {
    this.#keys = keys
      .map((key) => {
        const b = utf8Of(key);
        const bytes = new Uint8Array(headLength(b.length) + b.length);
        bytes.set(b, writeHead(bytes, 0, MAJOR.text, b.length));
        return { key, bytes };
      })
      .sort((x, y) => compareBytes(x.bytes, y.bytes));
  }

  /**
   * Canonical det-CBOR of the map `{k: obj[k]}` over the writer's keys (undefined values omitted).
   * Written into one scratch buffer shared by all writers and copied out once (a receipt core is
   * about 15 entries: one allocation instead of one per text value).
   * @throws JcpError `cbor-forbidden-type` for a value that is not a flat-map value.
   */
  write(obj: Readonly<Record<string, FlatValue | undefined>>): Uint8Array {
    let count = 0;
    for (const { key } of this.#keys) if (obj[key] !== undefined) count++;
    let off = writeHead(room(0, 9), 0, MAJOR.map, count);
    for (const { key, bytes } of this.#keys) {
      const v = obj[key];
      if (v === undefined) continue;
      room(off, bytes.length).set(bytes, off);
      off += bytes.length;
      if (typeof v === 'string') {
        off = writeTextAt(off, v);
      } else if (typeof v === 'number' || typeof v === 'bigint') {
        checkUint(v, key);
        off = writeHead(room(off, 9), off, MAJOR.uint, v);
      } else if (Array.isArray(v)) {
        off = writeHead(room(off, 9), off, MAJOR.array, v.length);
        for (const x of v as readonly unknown[]) {
          if (typeof x !== 'string') throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `${key}: an array item is not text`);
          off = writeTextAt(off, x);
        }
      } else {
        throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `${key}: not a flat-map value`);
      }
    }
    return scratch.slice(0, off);
  }
}

/** The shared output buffer of {@link FlatMapWriter.write} (grown on demand, never shrunk below 4 KiB). */
let scratch = new Uint8Array(4096);

/** The scratch buffer with room for `n` more bytes at `off` (grown, keeping `[0, off)`, if needed). */
function room(off: number, n: number): Uint8Array {
  if (off + n > scratch.length) {
    let size = scratch.length * 2;
    while (size < off + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(scratch.subarray(0, off));
    scratch = next;
  }
  return scratch;
}

/** Writes text item `s` into the scratch buffer at `off`; returns the new offset. */
function writeTextAt(off: number, s: string): number {
  const n = s.length;
  const h = headLength(n);
  const out = room(off, h + n);
  let i = 0;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) break;
    out[off + h + i] = c;
  }
  if (i === n) return writeHead(out, off, MAJOR.text, n) + n;
  const b = utf8Enc.encode(s); // not ASCII: the byte length differs from the UTF-16 length
  const at = writeHead(room(off, 9 + b.length), off, MAJOR.text, b.length);
  scratch.set(b, at);
  return at + b.length;
}

function isAscii(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) if (b[i]! >= 0x80) return false;
  return true;
}

/**
 * The text of UTF-8 bytes, or undefined if not valid UTF-8. Short ASCII runs (enums, small keys)
 * are read without a native call; anything longer goes to the fatal decoder, whose validating
 * fast path beats a JS loop from about 16 bytes on.
 */
function textOf(slice: Uint8Array): string | undefined {
  if (slice.length <= 16 && isAscii(slice)) return String.fromCharCode.apply(null, slice as unknown as number[]);
  try {
    return utf8Dec.decode(slice);
  } catch {
    return undefined;
  }
}

/**
 * Reads canonical flat-map bytes. Returns undefined for anything that is not already a canonical
 * flat map (the caller then uses the general strict decoder for the precise refusal).
 */
export function readFlatMap(bytes: Uint8Array): Record<string, FlatValue> | undefined {
  if (!headAt(bytes, 0) || hMajor !== MAJOR.map || typeof hValue !== 'number') return undefined;
  const n = hValue;
  const out: Record<string, FlatValue> = {};
  let off = hNext;
  let prevStart = -1;
  let prevEnd = -1;
  for (let i = 0; i < n; i++) {
    const keyStart = off;
    const key = textAt(bytes, off);
    if (key === undefined || key === '__proto__') return undefined;
    off = hNext;
    if (prevStart >= 0 && compareRanges(bytes, prevStart, prevEnd, keyStart, off) >= 0) return undefined;
    prevStart = keyStart;
    prevEnd = off;
    if (!headAt(bytes, off)) return undefined;
    const major = hMajor as number; // (set by headAt; the compiler keeps the map check's narrowing)
    if (major === MAJOR.uint) {
      out[key] = hValue;
      off = hNext;
    } else if (major === MAJOR.text) {
      const t = textAt(bytes, off);
      if (t === undefined) return undefined;
      out[key] = t;
      off = hNext;
    } else if (major === MAJOR.array && typeof hValue === 'number') {
      const len = hValue;
      const arr: string[] = [];
      off = hNext;
      for (let j = 0; j < len; j++) {
        const t = textAt(bytes, off);
        if (t === undefined) return undefined;
        arr.push(t);
        off = hNext;
      }
      out[key] = arr;
    } else {
      return undefined;
    }
  }
  return off === bytes.length ? out : undefined;
}

// The last head read by headAt (no object per head on the hot read paths).
let hMajor = 0;
let hValue: number | bigint = 0;
let hNext = 0;

/**
 * Reads the head at `off` into `hMajor`/`hValue`/`hNext` ({@link readHead}'s rules: false when it
 * is truncated, indefinite, reserved or not in shortest form; arguments above 2^53 − 1 as bigint).
 */
function headAt(b: Uint8Array, off: number): boolean {
  if (off >= b.length) return false;
  const b0 = b[off]!;
  hMajor = b0 >> 5;
  const ai = b0 & 31;
  if (ai < 24) {
    hValue = ai;
    hNext = off + 1;
    return true;
  }
  if (ai === 24) {
    if (off + 2 > b.length || b[off + 1]! < 24) return false;
    hValue = b[off + 1]!;
    hNext = off + 2;
    return true;
  }
  if (ai === 25) {
    if (off + 3 > b.length) return false;
    const v = (b[off + 1]! << 8) | b[off + 2]!;
    if (v < 0x100) return false;
    hValue = v;
    hNext = off + 3;
    return true;
  }
  if (ai === 26) {
    if (off + 5 > b.length) return false;
    const v = b[off + 1]! * 0x1000000 + ((b[off + 2]! << 16) | (b[off + 3]! << 8) | b[off + 4]!);
    if (v < 0x10000) return false;
    hValue = v;
    hNext = off + 5;
    return true;
  }
  if (ai === 27) {
    if (off + 9 > b.length) return false;
    const hi = b[off + 1]! * 0x1000000 + ((b[off + 2]! << 16) | (b[off + 3]! << 8) | b[off + 4]!);
    const lo = b[off + 5]! * 0x1000000 + ((b[off + 6]! << 16) | (b[off + 7]! << 8) | b[off + 8]!);
    if (hi === 0) return false; // fits in 4 bytes: not the shortest form
    hValue = hi < 0x200000 ? hi * 0x1_0000_0000 + lo : (BigInt(hi) << 32n) | BigInt(lo);
    hNext = off + 9;
    return true;
  }
  return false;
}

/** The text item at `off` (its end in `hNext`), or undefined when it is not a valid definite text item. */
function textAt(b: Uint8Array, off: number): string | undefined {
  if (!headAt(b, off) || hMajor !== MAJOR.text || typeof hValue !== 'number') return undefined;
  const end = hNext + hValue;
  if (end > b.length) return undefined;
  const t = textOf(b.subarray(hNext, end));
  hNext = end;
  return t;
}

/** Deepest nesting {@link readCanonical} walks; deeper items go to the general decoder. */
const READ_MAX_DEPTH = 64;
/** Largest n whose negative integer −1 − n is still a safe JS number. */
const NEG_SAFE_MAX = Number.MAX_SAFE_INTEGER - 1;

/** Reader state: the input and the read offset. */
interface Cursor {
  readonly b: Uint8Array;
  off: number;
}

/**
 * Reads one canonical det-CBOR item of a JCP value at the cursor, or undefined (cursor then
 * meaningless). Integers outside the safe range, tags, floats and simple values, a non-text key
 * when `useMaps` is false, and `__proto__` keys all return undefined: the general decoder
 * handles those, with the same result or the precise refusal.
 */
function readItem(c: Cursor, useMaps: boolean, depth: number): unknown {
  const b = c.b;
  // A safe-integer argument in shortest form, or the general decoder's job.
  if (!headAt(b, c.off) || typeof hValue !== 'number') return undefined;
  const major = hMajor;
  const n = hValue;
  const next = hNext;
  switch (major) {
    case 0:
      c.off = next;
      return n;
    case 1:
      if (n > NEG_SAFE_MAX) return undefined;
      c.off = next;
      return -1 - n;
    case 2: {
      const end = next + n;
      if (end > b.length) return undefined;
      c.off = end;
      return b.slice(next, end);
    }
    case 3: {
      const end = next + n;
      if (end > b.length) return undefined;
      const t = textOf(b.subarray(next, end));
      if (t === undefined) return undefined;
      c.off = end;
      return t;
    }
    case 4: {
      if (depth >= READ_MAX_DEPTH || n > b.length - next) return undefined;
      c.off = next;
      const arr: unknown[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const v = readItem(c, useMaps, depth + 1);
        if (v === undefined) return undefined;
        arr[i] = v;
      }
      return arr;
    }
    case 5: {
      if (depth >= READ_MAX_DEPTH || n > (b.length - next) / 2) return undefined;
      c.off = next;
      const obj: Record<string, unknown> | undefined = useMaps ? undefined : {};
      const map: Map<unknown, unknown> | undefined = useMaps ? new Map() : undefined;
      let prevStart = -1;
      let prevEnd = -1;
      for (let i = 0; i < n; i++) {
        const keyStart = c.off;
        if (keyStart >= b.length) return undefined;
        const keyMajor = b[keyStart]! >> 5;
        // Text keys; as Maps also integer keys (COSE headers). Other keys go to the general decoder.
        if (keyMajor !== MAJOR.text && (!useMaps || keyMajor > 1)) return undefined;
        const k = readItem(c, useMaps, depth + 1);
        if (k === undefined || k === '__proto__') return undefined;
        const keyEnd = c.off;
        if (prevStart >= 0 && compareRanges(b, prevStart, prevEnd, keyStart, keyEnd) >= 0) return undefined;
        prevStart = keyStart;
        prevEnd = keyEnd;
        const v = readItem(c, useMaps, depth + 1);
        if (v === undefined) return undefined;
        if (map) map.set(k, v);
        else obj![k as string] = v;
      }
      return map ?? obj;
    }
    default:
      return undefined; // tags, floats, simple values
  }
}

/** Bytewise comparison of b[a0..a1) and b[c0..c1) (RFC 8949 §4.2.1 key order). */
function compareRanges(b: Uint8Array, a0: number, a1: number, c0: number, c1: number): number {
  const n = Math.min(a1 - a0, c1 - c0);
  for (let i = 0; i < n; i++) {
    const d = b[a0 + i]! - b[c0 + i]!;
    if (d !== 0) return d;
  }
  return a1 - a0 - (c1 - c0);
}

/**
 * Decodes `bytes` when they are already one canonical det-CBOR JCP value (shortest heads,
 * definite lengths, map keys strictly ascending by their encoding, valid UTF-8, integers within
 * ±(2^53 − 1), no tags, floats or simple values, nothing after the item); `useMaps` decodes maps
 * as `Map` (text or integer keys), otherwise as plain objects with text keys. Byte strings are copies.
 * Returns undefined for anything else — the caller falls back to the general strict decoder,
 * which gives the same value or the precise refusal (test/core/cbor-fuzz.test.ts checks both
 * paths agree on valid and mutated inputs).
 */
export function readCanonical(bytes: Uint8Array, useMaps = false): unknown {
  const c: Cursor = { b: bytes, off: 0 };
  const v = readItem(c, useMaps, 0);
  return v !== undefined && c.off === bytes.length ? v : undefined;
}
