/**
 * The one det-CBOR module (spec §3; RFC 8949 §3, §4.2.1): item heads (reading and writing),
 * the canonical encoder, the strict decoder with its fast path, the flat-map writer and reader
 * of the receipt hot path, and the byte-level helpers the wire and COSE layers assemble or
 * splice messages with. Nothing else in the repository reads or writes CBOR bytes by hand.
 *
 * Encoding ({@link encode}): definite lengths, shortest integer forms, map keys sorted bytewise
 * by their encoding (length-first for text keys). A JCP object holds only unsigned/negative
 * integers, text, byte strings, arrays and maps (and tags, for COSE): floats, -0, bools, null,
 * undefined, unsafe integers as `number` (use bigint), integers beyond 64 bits, strings with lone
 * surrogates and any other JS value are refused with `cbor-forbidden-type`. Integers outside
 * ±(2^53−1) must be `bigint` (they decode as bigint).
 *
 * Why our own encoder, when `cborg` is used for decoding: cborg's deterministic mode sorts map
 * keys by re-encoding them on every comparison, and its type hooks run per value; measured here a
 * 20-field receipt core cost about half an Ed25519 signature to encode. This encoder caches the
 * canonical key order of each object shape and writes into one reused buffer.
 * `test/core/cbor-fuzz.test.ts` checks it byte for byte against cborg's RFC 8949 deterministic
 * encoder on generated values.
 *
 * Decoding ({@link decode}) never trusts the library's strict mode alone. Our own tokenizer guard
 * reads every item head before cborg does (RFC 8949 §3) and refuses, with a code chosen here
 * rather than from cborg's message text:
 * - reserved additional info 28–30, a stray break, a two-byte simple value below 32, invalid
 *   UTF-8 in a text string, truncation, trailing bytes → `cbor-malformed`;
 * - an argument (integer, length, tag number) not in its shortest form, an indefinite length,
 *   a repeated map key → `cbor-non-canonical`;
 * - floats, simple values (false/true/null/undefined/simple(n)), tags not asked for, and (for
 *   plain-object decoding) map keys that are not text → `cbor-forbidden-type`.
 * After the decode the value is re-encoded and must equal the input bytes, so unsorted keys and
 * anything else not canonical are refused too (`cbor-non-canonical`).
 *
 * Fast path: bytes that are already a canonical JCP value without tags (every well-formed
 * message) are read by {@link readCanonical} in one pass, with no library and no re-encoding;
 * anything it does not accept takes the path above ({@link decodeByCborg}), which gives the same
 * value or the precise refusal. {@link readFlatMap} and {@link FlatMapWriter} do the same for
 * the flat maps of receipt cores (text keys to unsigned integers, text or arrays of text).
 */
import { isUtf8 } from 'node:buffer';
import { decode as cborgDecode, Tagged, Tokenizer } from 'cborg';
import type { DecodeOptions, TagDecoder } from 'cborg';
import { bytesEqual } from './bytes.ts';
import { type ErrorCode, ErrorCodes, JcpError } from './errors.ts';

export { Tagged };

// ---------------------------------------------------------------------------------------------
// Shared helpers

function forbid(what: string): never {
  throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `det-CBOR: ${what} is not allowed in a JCP object (§3)`);
}

function refuse(code: ErrorCode, what: string, offset: number): never {
  throw new JcpError(code, `det-CBOR: ${what} at byte ${offset}`, { offset });
}

/** Bytewise order of two encodings (RFC 8949 §4.2.1 key order): negative, zero or positive. */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** True when every byte is below 0x80 (callers use it on short strings only: cheaper than a native call). */
function isAscii(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) if (b[i]! >= 0x80) return false;
  return true;
}

const utf8Enc = new TextEncoder();
/** Largest unsigned value a head can carry (2^64 − 1). */
const MAX_U64 = (1n << 64n) - 1n;
// ignoreBOM: a leading U+FEFF is kept, as the strict decoder keeps it (the value must re-encode to its bytes).
const utf8Dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// ---------------------------------------------------------------------------------------------
// Item heads (RFC 8949 §3): major type and argument, shortest form only (§4.2.1)

/** CBOR major types (RFC 8949 §3.1). */
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

/** The shortest head of (`major`, `n`) as its own bytes (for constant prefixes of hand-assembled items). */
export function headBytes(major: number, n: number | bigint): Uint8Array {
  const out = new Uint8Array(headLength(n));
  writeHead(out, 0, major, n);
  return out;
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

/** The big-endian argument of `n` bytes at `at` (n ≤ 8; approximate above 2^53, enough for the shortest-form check). */
function readArg(data: Uint8Array, at: number, n: number): number {
  let v = 0;
  for (let i = 0; i < n; i++) v = v * 256 + data[at + i]!;
  return v;
}

/**
 * The tag number at the head of `bytes` (any width, shortest or not), or undefined when the first
 * item is not a tag or its head is truncated or reserved. Used to name a wrong tag before the
 * strict decoder runs (which still refuses a tag number not in its shortest form).
 */
export function leadingTag(bytes: Uint8Array): number | undefined {
  const b0 = bytes[0]!;
  if (b0 >> 5 !== MAJOR.tag) return undefined;
  const ai = b0 & 31;
  if (ai < 24) return ai;
  const width = ai === 24 ? 1 : ai === 25 ? 2 : ai === 26 ? 4 : ai === 27 ? 8 : 0;
  if (width === 0 || bytes.length < 1 + width) return undefined;
  return readArg(bytes, 1, width);
}

/** Deepest container nesting {@link skipItem} walks. */
const SKIP_MAX_DEPTH = 64;

/**
 * End offset of the CBOR item at `off` (RFC 8949 §3), or -1 when it is not a well-formed
 * definite-length item inside `b` (truncated, indefinite, reserved additional info, nested deeper
 * than 64 containers). Only the structure is walked: nothing is decoded or checked canonical.
 */
export function skipItem(b: Uint8Array, off: number): number {
  let pending = 1;
  let depth = 0;
  while (pending > 0) {
    if (off >= b.length) return -1;
    const ib = b[off]!;
    const major = ib >> 5;
    const ai = ib & 0x1f;
    off++;
    let arg = ai;
    if (ai >= 24) {
      if (ai > 27) return -1;
      const n = 1 << (ai - 24);
      if (off + n > b.length) return -1;
      arg = readArg(b, off, n);
      off += n;
    }
    pending--;
    switch (major) {
      case 2:
      case 3:
        if (off + arg > b.length) return -1;
        off += arg;
        break;
      case 4:
      case 5:
        if (++depth > SKIP_MAX_DEPTH || arg > b.length) return -1;
        pending += major === 4 ? arg : 2 * arg;
        break;
      case 6:
        pending++;
        break;
      default:
        break;
    }
  }
  return off;
}

/**
 * Splits a CBOR sequence (RFC 8742: items back to back) into its items, as views of `bytes`.
 * `end` is where the last whole item ends: `bytes.length` when every byte belongs to one
 * ({@link skipItem}'s rules), less when the rest is not a well-formed item.
 */
export function splitSequence(bytes: Uint8Array): { readonly items: Uint8Array[]; readonly end: number } {
  const items: Uint8Array[] = [];
  let off = 0;
  while (off < bytes.length) {
    const end = skipItem(bytes, off);
    if (end < 0) break;
    items.push(bytes.subarray(off, end));
    off = end;
  }
  return { items, end: off };
}

// ---------------------------------------------------------------------------------------------
// Diagnosing items that are not well-formed (for `jcp inspect`, which names the byte at fault)

/** The major type (0–7, RFC 8949 §3.1) of a head's first byte. */
export function majorOf(firstByte: number): number {
  return firstByte >> 5;
}

/** Why the bytes at an offset are not one well-formed definite-length item. */
export interface ItemFault {
  /** `cbor-malformed` (truncation, reserved additional info, a stray break, too deep) or `cbor-non-canonical` (an indefinite length). */
  readonly code: typeof ErrorCodes.CBOR_MALFORMED | typeof ErrorCodes.CBOR_NON_CANONICAL;
  readonly message: string;
  /** Byte offset (in the bytes given) of the head at fault. */
  readonly offset: number;
}

class ItemFaultSignal {
  readonly fault: ItemFault;
  constructor(fault: ItemFault) {
    this.fault = fault;
  }
}

function itemFault(code: ItemFault['code'], message: string, offset: number): never {
  throw new ItemFaultSignal({ code, message, offset });
}

/** {@link itemEndOrFault}'s walk: the end offset, or throws an ItemFaultSignal. */
function walkItem(bytes: Uint8Array, off: number, depth: number, maxDepth: number): number {
  const M = ErrorCodes.CBOR_MALFORMED;
  if (depth > maxDepth) itemFault(M, `nesting deeper than ${maxDepth}`, off);
  if (off >= bytes.length) itemFault(M, `truncated: an item expected at byte ${off}`, off);
  const ib = bytes[off]!;
  const major = majorOf(ib);
  const ai = ib & 31;
  if (ai >= 28 && ai <= 30) itemFault(M, `reserved additional info ${ai} at byte ${off}`, off);
  if (ai === 31) {
    if (major === 7) itemFault(M, `a break outside an indefinite-length item at byte ${off}`, off);
    itemFault(ErrorCodes.CBOR_NON_CANONICAL, `an indefinite-length item at byte ${off}`, off);
  }
  const width = ai < 24 ? 0 : 1 << (ai - 24);
  if (off + 1 + width > bytes.length) itemFault(M, `truncated item head at byte ${off}`, off);
  const arg = ai < 24 ? ai : readArg(bytes, off + 1, width);
  let next = off + 1 + width;
  switch (major) {
    case MAJOR.bytes:
    case MAJOR.text:
      if (next + arg > bytes.length)
        itemFault(M, `truncated: the string at byte ${off} declares ${arg} bytes, ${bytes.length - next} follow`, off);
      return next + arg;
    case MAJOR.array:
    case MAJOR.map: {
      const n = major === MAJOR.map ? arg * 2 : arg;
      if (n > bytes.length - next)
        itemFault(M, `truncated: the ${major === MAJOR.map ? 'map' : 'array'} at byte ${off} declares ${arg} entries`, off);
      for (let i = 0; i < n; i++) next = walkItem(bytes, next, depth + 1, maxDepth);
      return next;
    }
    case MAJOR.tag:
      return walkItem(bytes, next, depth + 1, maxDepth);
    default:
      return next;
  }
}

/**
 * The end offset of the CBOR item at `off` (definite lengths only; heads of any width, since
 * only the structure is walked), or why there is no such item: {@link skipItem} with the reason
 * and the byte at fault. Containers nest at most `maxDepth` deep (default 512).
 */
export function itemEndOrFault(bytes: Uint8Array, off: number, maxDepth = 512): { readonly end: number } | { readonly fault: ItemFault } {
  try {
    return { end: walkItem(bytes, off, 0, maxDepth) };
  } catch (e) {
    if (e instanceof ItemFaultSignal) return { fault: e.fault };
    throw e;
  }
}

/**
 * The offset of the first item head in `bytes` (one well-formed item) that a JCP object may not
 * hold (§3): a float or simple value (major type 7), or a tag other than `allowedTag`. Undefined
 * when there is none or the bytes are not well-formed. Names the byte behind a
 * `cbor-forbidden-type` refusal, which the strict decoder reports without an offset.
 */
export function firstForbiddenHead(bytes: Uint8Array, allowedTag?: number, maxDepth = 512): number | undefined {
  let found: number | undefined;
  const stop = new Error('stop');
  const visit = (off: number, depth: number): number => {
    if (found !== undefined || depth > maxDepth || off >= bytes.length) throw stop;
    const ib = bytes[off]!;
    const major = majorOf(ib);
    const ai = ib & 31;
    const width = ai < 24 ? 0 : ai < 28 ? 1 << (ai - 24) : 0;
    let arg = ai < 24 ? ai : 0;
    for (let i = 1; i <= width; i++) arg = arg * 256 + (bytes[off + i] ?? 0);
    if (major === 7 || (major === MAJOR.tag && arg !== allowedTag)) {
      found = off;
      throw stop;
    }
    let next = off + 1 + width;
    if (ai >= 28) throw stop;
    if (major === MAJOR.bytes || major === MAJOR.text) return next + arg;
    if (major === MAJOR.array || major === MAJOR.map) {
      for (let i = 0; i < (major === MAJOR.map ? arg * 2 : arg); i++) next = visit(next, depth + 1);
      return next;
    }
    if (major === MAJOR.tag) return visit(next, depth + 1);
    return next;
  };
  try {
    visit(0, 0);
  } catch {
    // stopped: found, or not well-formed
  }
  return found;
}

/** Loose tag decoders that keep any tag (0–255) as a `Tagged` value. */
function keepAnyTag(): TagDecoder[] {
  const tags: TagDecoder[] = [];
  for (let t = 0; t < 256; t++) tags[t] = (inner: unknown) => new Tagged(t, inner);
  return tags;
}

/**
 * Where the canonical re-encoding of `bytes` first differs from them: decode loosely (any
 * order, any width, any tag), re-encode with {@link encode}, compare. Names the byte behind a
 * `cbor-non-canonical` refusal that the strict decoder reports without an offset. Undefined
 * when the bytes cannot be loosely decoded or re-encoded, or are canonical.
 */
export function firstNonCanonicalByte(bytes: Uint8Array): number | undefined {
  let again: Uint8Array;
  try {
    again = encode(cborgDecode(bytes, { useMaps: true, tags: keepAnyTag() }));
  } catch {
    return undefined;
  }
  const n = Math.min(again.length, bytes.length);
  for (let i = 0; i < n; i++) if (again[i] !== bytes[i]) return i;
  return again.length !== bytes.length ? n : undefined;
}

// ---------------------------------------------------------------------------------------------
// Assembling and splicing items by hand (the hot paths of the wire and COSE layers)

/** Bytes of a byte or text string item whose content is `n` bytes long (head + content). */
export function stringItemLength(n: number): number {
  return headLength(n) + n;
}

/** Copies `b` into `out` at `off`; returns the new offset. */
export function writeRaw(out: Uint8Array, off: number, b: Uint8Array): number {
  out.set(b, off);
  return off + b.length;
}

/** Writes a byte or text string item (`major` 2 or 3) holding `b` into `out` at `off`; returns the new offset. */
export function writeStringItem(out: Uint8Array, off: number, major: number, b: Uint8Array): number {
  return writeRaw(out, writeHead(out, off, major, b.length), b);
}

/**
 * Concatenates parts into one buffer: raw bytes as they are, `{bstr}` parts as byte string items
 * (shortest head, then the content). The caller makes the raw parts canonical heads or items.
 */
export function concatItems(parts: readonly (Uint8Array | { readonly bstr: Uint8Array })[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p instanceof Uint8Array ? p.length : stringItemLength(p.bstr.length);
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) off = p instanceof Uint8Array ? writeRaw(out, off, p) : writeStringItem(out, off, MAJOR.bytes, p.bstr);
  return out;
}

/** True when the bytes of `b` at `off` are exactly `item` (e.g. an encoded map key). */
export function itemAt(b: Uint8Array, off: number, item: Uint8Array): boolean {
  if (off + item.length > b.length) return false;
  for (let i = 0; i < item.length; i++) if (b[off + i] !== item[i]) return false;
  return true;
}

/**
 * The map `body` (a canonical map of 1 to 23 entries, so its head is one byte) without the entry
 * spanning `[start, end)`: the bytes before and after it, with the entry count one less. Removing
 * an entry keeps the others in canonical order, so when `body` is canonical the result is the
 * canonical encoding of the map without that key. Returns undefined when `body` does not start
 * with such a head or the span is not inside it. The caller finds the span ({@link skipItem}).
 */
export function withoutMapEntry(body: Uint8Array, start: number, end: number): Uint8Array | undefined {
  const head = body[0]!;
  if (head < 0xa1 || head > 0xb7 || start < 1 || end <= start || end > body.length) return undefined;
  const out = new Uint8Array(body.length - (end - start));
  out.set(body.subarray(0, start));
  out.set(body.subarray(end), start);
  out[0] = head - 1;
  return out;
}

// ---------------------------------------------------------------------------------------------
// The canonical encoder (§3)

/** A growable output buffer. */
class Writer {
  buf: Uint8Array;
  len = 0;

  constructor(size = 512) {
    this.buf = new Uint8Array(size);
  }

  ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** Writes a head: major type (0–7) and argument (< 2^64), in its shortest form ({@link writeHead}). */
  head(major: number, arg: number | bigint): void {
    this.ensure(9);
    this.len = writeHead(this.buf, this.len, major, arg);
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
}

/** Canonical key order and pre-encoded keys of one object shape (its own-key list). */
interface Shape {
  readonly keys: string[];
  readonly encoded: Uint8Array[];
}

const shapes = new Map<string, Shape>();

function encodedText(s: string): Uint8Array {
  const w = new Writer();
  writeText(w, s);
  return w.buf.slice(0, w.len);
}

function shapeOf(keys: string[]): Shape {
  const sig = JSON.stringify(keys);
  let s = shapes.get(sig);
  if (!s) {
    const pairs = keys.map((k) => ({ k, e: encodedText(k) }));
    pairs.sort((x, y) => compareBytes(x.e, y.e));
    s = { keys: pairs.map((p) => p.k), encoded: pairs.map((p) => p.e) };
    if (shapes.size > 4096) shapes.clear();
    shapes.set(sig, s);
  }
  return s;
}

function writeText(w: Writer, s: string): void {
  // ASCII fast path: one byte per char.
  let ascii = true;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  if (ascii) {
    w.head(3, s.length);
    w.ensure(s.length);
    for (let i = 0; i < s.length; i++) w.buf[w.len++] = s.charCodeAt(i);
    return;
  }
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed()) {
    forbid('a string with a lone surrogate (not UTF-8 text)');
  }
  const b = utf8Enc.encode(s);
  w.head(3, b.length);
  w.bytes(b);
}

function writeValue(w: Writer, v: unknown, depth: number): void {
  if (depth > 64) forbid('nesting deeper than 64');
  switch (typeof v) {
    case 'number':
      if (!Number.isInteger(v) || Object.is(v, -0)) forbid(`the float ${String(v)}`);
      if (!Number.isSafeInteger(v)) forbid(`the unsafe integer ${v} (use bigint)`);
      if (v >= 0) w.head(0, v);
      else w.head(1, -1 - v);
      return;
    case 'bigint':
      if (v > MAX_U64 || v < -MAX_U64 - 1n) forbid(`the integer ${v} (beyond 64 bits)`);
      if (v >= 0n) w.head(0, v);
      else w.head(1, -1n - v);
      return;
    case 'string':
      writeText(w, v);
      return;
    case 'boolean':
      forbid('a bool');
      break;
    case 'undefined':
      forbid('undefined');
      break;
    case 'object':
      break;
    default:
      forbid(`a ${typeof v}`);
  }
  if (v === null) forbid('null');
  if (v instanceof Uint8Array) {
    w.head(2, v.length);
    w.bytes(v);
    return;
  }
  if (Array.isArray(v)) {
    w.head(4, v.length);
    for (const item of v) writeValue(w, item, depth + 1);
    return;
  }
  if (v instanceof Tagged) {
    w.head(6, v.tag);
    writeValue(w, v.value, depth + 1);
    return;
  }
  if (v instanceof Map) {
    writeMap(w, v, depth);
    return;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) forbid(`an object of class ${proto?.constructor?.name ?? '?'}`);
  const obj = v as Record<string, unknown>;
  const own = Object.keys(obj);
  const shape = shapeOf(own);
  w.head(5, own.length);
  for (let i = 0; i < shape.keys.length; i++) {
    w.bytes(shape.encoded[i]!);
    writeValue(w, obj[shape.keys[i]!], depth + 1);
  }
}

function writeMap(w: Writer, m: Map<unknown, unknown>, depth: number): void {
  const entries: { k: Uint8Array; v: unknown }[] = [];
  for (const [k, val] of m) {
    if (typeof k !== 'string' && typeof k !== 'number' && typeof k !== 'bigint') forbid('a map key that is not text or an integer');
    const kw = new Writer();
    writeValue(kw, k, depth + 1);
    entries.push({ k: kw.buf.slice(0, kw.len), v: val });
  }
  entries.sort((a, b) => compareBytes(a.k, b.k));
  w.head(5, entries.length);
  for (let i = 0; i < entries.length; i++) {
    if (i > 0 && compareBytes(entries[i - 1]!.k, entries[i]!.k) === 0) forbid('a repeated map key');
    w.bytes(entries[i]!.k);
    writeValue(w, entries[i]!.v, depth + 1);
  }
}

/**
 * Canonical det-CBOR bytes of `value` (§3), as a fresh plain `Uint8Array` (never a Node Buffer).
 * @throws JcpError `cbor-forbidden-type` for floats, -0, bools, null, undefined, unsafe numbers,
 *   integers beyond 64 bits, strings holding a lone surrogate, nesting deeper than 64, a
 *   repeated `Map` key, and other non-JCP values (module docs).
 */
export function encode(value: unknown): Uint8Array {
  const w = shared;
  w.len = 0;
  try {
    writeValue(w, value, 0);
    return w.buf.slice(0, w.len);
  } finally {
    if (w.buf.length > SHARED_KEEP) w.buf = new Uint8Array(SHARED_START);
  }
}

/** Start size of the writer {@link encode} reuses, and the most it keeps between calls (bytes). */
const SHARED_START = 4096;
const SHARED_KEEP = 1 << 16;
/** Reused by {@link encode}, which never runs inside itself (nothing it calls encodes). */
const shared = new Writer(SHARED_START);

// ---------------------------------------------------------------------------------------------
// Flat maps and the canonical fast-path reader

/** A flat-map value: an unsigned integer (< 2^64), text, or an array of text. */
export type FlatValue = number | bigint | string | readonly string[];

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

function checkUint(v: number | bigint, key: string): void {
  const ok = typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : v >= 0n && v <= MAX_U64;
  if (!ok) throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `${key}: not an unsigned integer below 2^64`);
}

/** Text keys with their det-CBOR encodings, in canonical order (bytewise by encoding: length-first). */
function encodedKeys(keys: readonly string[]): { key: string; bytes: Uint8Array }[] {
  return keys
    .map((key) => {
      const b = utf8Of(key);
      const bytes = new Uint8Array(headLength(b.length) + b.length);
      bytes.set(b, writeHead(bytes, 0, MAJOR.text, b.length));
      return { key, bytes };
    })
    .sort((x, y) => compareBytes(x.bytes, y.bytes));
}

/**
 * A writer for flat maps over a fixed key set: keys are sorted once into canonical order
 * (bytewise by their encoding, i.e. length-first for text), then each call writes the present
 * entries in that order into one buffer sized up front.
 */
export class FlatMapWriter {
  readonly #keys: readonly { key: string; bytes: Uint8Array }[];

  constructor(keys: readonly string[]) {
    this.#keys = encodedKeys(keys);
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

/**
 * A reader of chosen entries of flat maps over a fixed key set (the maps {@link FlatMapWriter}
 * writes): for hot paths that need a few fields of bytes already known to be such a map (a node's
 * own receipts, node/snapshotjob.ts). The map must be canonical over the picker's keys: shortest
 * heads, known keys strictly ascending, nothing after it. The entries read are checked as
 * {@link readFlatMap} checks them (valid UTF-8 text, arrays of text); the others are stepped
 * over by their heads, their content unread.
 */
export class FlatMapPicker<K extends string> {
  /** Every key's encoding, canonical order; `read[i]`: the name to read it as, or undefined to skip. */
  readonly #keys: readonly Uint8Array[];
  readonly #read: readonly (K | undefined)[];

  /**
   * @param keys every key the maps may hold (any order).
   * @param read the keys whose values {@link pick} returns (each one of `keys`).
   * @throws Error when a key to read is not one of `keys`.
   */
  constructor(keys: readonly string[], read: readonly K[]) {
    for (const k of read) if (!keys.includes(k)) throw new Error(`FlatMapPicker: ${k} is not one of the keys`);
    const sorted = encodedKeys(keys);
    this.#keys = sorted.map((x) => x.bytes);
    this.#read = sorted.map((x) => ((read as readonly string[]).includes(x.key) ? (x.key as K) : undefined));
  }

  /**
   * The read entries of `bytes` (absent keys absent): a uint as a number (a bigint above
   * 2^53 − 1), text as a string, an array of text as a string array. Undefined when the bytes are
   * not a canonical flat map over the picker's keys, or an entry read is not valid (the caller
   * then uses the strict decoder for the precise refusal). Never throws.
   */
  pick(bytes: Uint8Array): Partial<Record<K, FlatValue>> | undefined {
    if (!headAt(bytes, 0) || hMajor !== MAJOR.map || typeof hValue !== 'number') return undefined;
    const n = hValue;
    const keys = this.#keys;
    const out: Partial<Record<K, FlatValue>> = {};
    let off = hNext;
    let k = 0;
    for (let i = 0; i < n; i++) {
      // Keys are strictly ascending: the next one is at or after the picker's position.
      while (k < keys.length && !bytesAt(bytes, off, keys[k]!)) k++;
      if (k === keys.length) return undefined;
      off += keys[k]!.length;
      const name = this.#read[k++];
      if (name === undefined) {
        const end = flatValueEnd(bytes, off);
        if (end === undefined) return undefined;
        off = end;
      } else {
        const v = flatValueAt(bytes, off);
        if (v === undefined) return undefined;
        out[name] = v;
        off = hNext;
      }
    }
    return off === bytes.length ? out : undefined;
  }
}

/** Whether `b` holds `item` at `off`. */
function bytesAt(b: Uint8Array, off: number, item: Uint8Array): boolean {
  if (off + item.length > b.length) return false;
  for (let i = 0; i < item.length; i++) if (b[off + i] !== item[i]) return false;
  return true;
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
    const v = flatValueAt(bytes, off);
    if (v === undefined) return undefined;
    out[key] = v;
    off = hNext;
  }
  return off === bytes.length ? out : undefined;
}

/**
 * The flat-map value at `off` (an unsigned integer, a bigint above 2^53 − 1; text; an array of
 * text), its end in `hNext`; undefined when it is none, or its text is not valid UTF-8.
 */
function flatValueAt(b: Uint8Array, off: number): FlatValue | undefined {
  if (!headAt(b, off)) return undefined;
  const major = hMajor as number; // (set by headAt)
  if (major === MAJOR.uint) return hValue;
  if (major === MAJOR.text) return textAt(b, off);
  if (major !== MAJOR.array || typeof hValue !== 'number') return undefined;
  const len = hValue;
  const arr: string[] = [];
  let at = hNext;
  for (let j = 0; j < len; j++) {
    const t = textAt(b, at);
    if (t === undefined) return undefined;
    arr.push(t);
    at = hNext;
  }
  return arr; // (hNext: the end of its last item, or of its head when it has none)
}

/** Whether the head just read (by headAt) is a text item's (a length past the input leaves the end past it: the caller's end check refuses it). */
function isTextHead(): boolean {
  return (hMajor as number) === MAJOR.text && typeof hValue === 'number';
}

/** The end of the flat-map value at `off`, its text not read; undefined when it is none. */
function flatValueEnd(b: Uint8Array, off: number): number | undefined {
  if (!headAt(b, off)) return undefined;
  const major = hMajor as number; // (set by headAt)
  if (major === MAJOR.uint) return hNext;
  if (major === MAJOR.text) return isTextHead() ? hNext + (hValue as number) : undefined;
  if (major !== MAJOR.array || typeof hValue !== 'number') return undefined;
  const len = hValue;
  let at = hNext;
  for (let j = 0; j < len; j++) {
    if (!headAt(b, at) || !isTextHead()) return undefined;
    at = hNext + (hValue as number);
  }
  return at;
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

// ---------------------------------------------------------------------------------------------
// The strict decoder (cborg under a guard tokenizer, then the re-encoding check)

/** Options for {@link decode}. */
export interface DecodeOpts {
  /** Tag decoders by tag number; any other tag is refused (`cbor-forbidden-type`). */
  readonly tags?: Readonly<Record<number, TagDecoder>>;
  /** Decode maps as `Map` (needed for integer keys such as COSE headers). Default false. */
  readonly useMaps?: boolean;
}

/** Smallest argument value allowed for additional info 24, 25, 26, 27 (RFC 8949 §4.2.1). */
const MIN_ARG = [24, 256, 65536, 2 ** 32] as const;
const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;

/** One open container while tokens stream by: how many items it still expects. */
interface Frame {
  readonly isMap: boolean;
  readonly total: number;
  remaining: number;
}

/**
 * A tokenizer that checks each item head itself (RFC 8949 §3, §4.2.1) before cborg decodes it,
 * and validates text strings as UTF-8. See the module docs for what it refuses with which code.
 */
class GuardTokenizer extends Tokenizer {
  readonly allowedTags: ReadonlySet<number>;
  readonly textKeysOnly: boolean;
  readonly stack: Frame[] = [];

  constructor(data: Uint8Array, options: DecodeOptions, allowedTags: ReadonlySet<number>, textKeysOnly: boolean) {
    super(data, options);
    this.allowedTags = allowedTags;
    this.textKeysOnly = textKeysOnly;
  }

  override next() {
    const data = this.data;
    const pos = this.pos();
    const ib = data[pos]!;
    const major = ib >> 5;
    const ai = ib & 31;
    const headLen = ai < 24 ? 1 : ai < 28 ? 1 + (1 << (ai - 24)) : 1;
    if (pos + headLen > data.length) refuse(ErrorCodes.CBOR_MALFORMED, 'truncated item head', pos);
    const arg = ai < 24 ? ai : ai < 28 ? readArg(data, pos + 1, headLen - 1) : -1;

    if (ai >= 28 && ai <= 30) refuse(ErrorCodes.CBOR_MALFORMED, `reserved additional info ${ai}`, pos);
    if (major === 7) {
      if (ai === 31) refuse(ErrorCodes.CBOR_MALFORMED, 'break outside an indefinite-length item', pos);
      if (ai === 24 && arg < 32) refuse(ErrorCodes.CBOR_MALFORMED, `two-byte simple value ${arg} (RFC 8949 §3.3)`, pos);
      if (ai >= 25) forbid(`a float (${['half', 'single', 'double'][ai - 25]} precision)`);
      forbid(ai === 20 || ai === 21 ? 'a bool' : ai === 22 ? 'null' : ai === 23 ? 'undefined' : `simple(${arg})`);
    }
    if (ai === 31) {
      if (major < 2 || major === 6) refuse(ErrorCodes.CBOR_MALFORMED, `additional info 31 on major type ${major}`, pos);
      refuse(ErrorCodes.CBOR_NON_CANONICAL, 'indefinite-length item', pos);
    }
    if (ai >= 24 && arg < MIN_ARG[ai - 24]!) {
      refuse(ErrorCodes.CBOR_NON_CANONICAL, `argument ${arg} not in its shortest form`, pos);
    }
    const top = this.stack[this.stack.length - 1];
    if (top?.isMap && (top.total - top.remaining) % 2 === 0 && this.textKeysOnly && major !== 3) {
      forbid('a map key that is not text');
    }
    if (major === 6 && !this.allowedTags.has(arg)) forbid(`tag ${arg}`);

    const token = super.next();

    if (major === 3) {
      const text = data.subarray(pos + headLen, this.pos());
      if (!(text.length <= 64 && isAscii(text)) && !isUtf8(text)) refuse(ErrorCodes.CBOR_MALFORMED, 'text string is not valid UTF-8', pos);
      // cborg's TextDecoder drops a leading U+FEFF; keep it so the value re-encodes to these bytes.
      if (text[0] === UTF8_BOM[0] && text[1] === UTF8_BOM[1] && text[2] === UTF8_BOM[2]) {
        token.value = utf8Dec.decode(text);
      }
    }
    if (top) top.remaining--;
    if ((major === 4 || major === 5) && arg > 0) {
      const total = major === 5 ? arg * 2 : arg;
      this.stack.push({ isMap: major === 5, total, remaining: total });
    } else if (major === 6) {
      this.stack.push({ isMap: false, total: 1, remaining: 1 });
    } else {
      while (this.stack.length > 0 && this.stack[this.stack.length - 1]!.remaining === 0) this.stack.pop();
    }
    return token;
  }
}

const OBJECT_OPTIONS: DecodeOptions = {
  strict: true,
  rejectDuplicateMapKeys: true,
  allowIndefinite: false,
  allowUndefined: false,
  allowInfinity: false,
  allowNaN: false,
  allowBigInt: true,
  useMaps: false,
};
const MAP_OPTIONS: DecodeOptions = { ...OBJECT_OPTIONS, useMaps: true };
const NO_TAGS: ReadonlySet<number> = new Set();

/**
 * Strictly decodes one canonical det-CBOR item that spans all of `bytes` (§3).
 * @throws JcpError `cbor-malformed` (not well-formed CBOR: truncated, trailing bytes, reserved
 *   or stray heads, invalid UTF-8), `cbor-forbidden-type` (float, bool, null, undefined, other
 *   simple values, a tag not in `opts.tags`, a non-text map key unless `opts.useMaps`),
 *   `cbor-non-canonical` (long-form arguments, indefinite lengths, repeated or unsorted keys,
 *   anything whose canonical re-encoding differs from `bytes`).
 */
export function decode(bytes: Uint8Array, opts: DecodeOpts = {}): unknown {
  if (bytes instanceof Uint8Array && opts.tags === undefined) {
    // A plain view of a Buffer, so byte strings come back as plain Uint8Array copies.
    const plain = Buffer.isBuffer(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes;
    const v = readCanonical(plain, opts.useMaps ?? false);
    if (v !== undefined) return v;
  }
  return decodeByCborg(bytes, opts);
}

/**
 * {@link decode} without the fast path: cborg under the guard tokenizer, then the re-encoding
 * check. Same contract and errors as {@link decode}; exported so tests can hold the two paths
 * against each other.
 */
export function decodeByCborg(bytes: Uint8Array, opts: DecodeOpts = {}): unknown {
  if (!(bytes instanceof Uint8Array)) throw new JcpError(ErrorCodes.CBOR_MALFORMED, 'det-CBOR: input is not bytes');
  if (bytes.length === 0) throw new JcpError(ErrorCodes.CBOR_MALFORMED, 'det-CBOR: empty input');
  // Decode from a plain view so byte strings come back as Uint8Array even when given a Buffer.
  if (Buffer.isBuffer(bytes)) bytes = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const useMaps = opts.useMaps ?? false;
  let options: DecodeOptions = useMaps ? MAP_OPTIONS : OBJECT_OPTIONS;
  let allowed: ReadonlySet<number> = NO_TAGS;
  if (opts.tags) {
    const tags: TagDecoder[] = [];
    for (const [k, v] of Object.entries(opts.tags)) tags[Number(k)] = v;
    options = { ...options, tags };
    allowed = new Set(Object.keys(opts.tags).map(Number));
  }
  let value: unknown;
  try {
    value = cborgDecode(bytes, { ...options, tokenizer: new GuardTokenizer(bytes, options, allowed, !useMaps) });
  } catch (e) {
    if (e instanceof JcpError) throw e;
    const msg = (e as Error).message ?? String(e);
    // Everything canonical-related was refused by the guard above; cborg's own checks that are
    // left are well-formedness (truncation, trailing bytes) and repeated keys.
    const code = /repeat map key/i.test(msg) ? ErrorCodes.CBOR_NON_CANONICAL : ErrorCodes.CBOR_MALFORMED;
    throw new JcpError(code, `det-CBOR: ${msg}`, undefined, { cause: e });
  }
  let again: Uint8Array;
  try {
    again = encode(value);
  } catch (e) {
    if (e instanceof JcpError) throw e;
    throw new JcpError(ErrorCodes.CBOR_MALFORMED, `det-CBOR: ${(e as Error).message}`);
  }
  if (!bytesEqual(again, bytes)) {
    throw new JcpError(ErrorCodes.CBOR_NON_CANONICAL, 'det-CBOR: bytes are not the canonical encoding of their value');
  }
  return value;
}
