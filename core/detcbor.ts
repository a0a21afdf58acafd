/**
 * The det-CBOR encoder (spec §3; RFC 8949 §4.2.1) for the JCP value subset, written for the hot
 * path: receipts, grant ids and wire messages are encoded on every decision.
 *
 * Why our own encoder, when `cborg` is used for decoding: cborg's deterministic mode sorts map
 * keys by re-encoding them on every comparison, and its type hooks run per value; measured here a
 * 20-field receipt core cost about half an Ed25519 signature to encode. This encoder handles only
 * what a JCP object may hold (unsigned/negative integers, bigints up to 64 bits, text, byte
 * strings, arrays, maps with text keys or integer keys, and tags for COSE), caches the canonical
 * key order of each object shape, and writes into one growing buffer. `test/core/cbor-fuzz.test.ts`
 * checks it byte for byte against cborg's RFC 8949 deterministic encoder on generated values.
 *
 * Refusals: `cbor-forbidden-type` for floats, -0, unsafe integers (use bigint), integers beyond
 * 64 bits, bools, null, undefined, strings with lone surrogates, and any other JS value.
 */
import { Tagged } from 'cborg';
import { ErrorCodes, JcpError } from './errors.ts';

const MAX_U64 = (1n << 64n) - 1n;
const TEXT = new TextEncoder();

function forbid(what: string): never {
  throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `det-CBOR: ${what} is not allowed in a JCP object (§3)`);
}

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

  /** Writes a head: major type (0–7) and argument, in its shortest form. */
  head(major: number, arg: number): void {
    const m = major << 5;
    if (arg < 24) {
      this.ensure(1);
      this.buf[this.len++] = m | arg;
    } else if (arg < 0x100) {
      this.ensure(2);
      this.buf[this.len++] = m | 24;
      this.buf[this.len++] = arg;
    } else if (arg < 0x10000) {
      this.ensure(3);
      this.buf[this.len++] = m | 25;
      this.buf[this.len++] = arg >>> 8;
      this.buf[this.len++] = arg & 0xff;
    } else if (arg < 0x100000000) {
      this.ensure(5);
      this.buf[this.len++] = m | 26;
      this.buf[this.len++] = arg >>> 24;
      this.buf[this.len++] = (arg >>> 16) & 0xff;
      this.buf[this.len++] = (arg >>> 8) & 0xff;
      this.buf[this.len++] = arg & 0xff;
    } else {
      this.headBig(major, BigInt(arg));
    }
  }

  /** Writes a head whose argument may need 64 bits. */
  headBig(major: number, arg: bigint): void {
    if (arg < 0x100000000n) {
      this.head(major, Number(arg));
      return;
    }
    this.ensure(9);
    this.buf[this.len++] = (major << 5) | 27;
    for (let shift = 56n; shift >= 0n; shift -= 8n) this.buf[this.len++] = Number((arg >> shift) & 0xffn);
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

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

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
  const b = TEXT.encode(s);
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
      if (v >= 0n) w.headBig(0, v);
      else w.headBig(1, -1n - v);
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
 * Canonical det-CBOR bytes of `value` (§3) as a fresh `Uint8Array`.
 * @throws JcpError `cbor-forbidden-type` for anything a JCP object may not hold (module docs).
 */
export function encodeCanonical(value: unknown): Uint8Array {
  const w = shared;
  w.len = 0;
  try {
    writeValue(w, value, 0);
    return w.buf.slice(0, w.len);
  } finally {
    if (w.buf.length > SHARED_KEEP) w.buf = new Uint8Array(SHARED_START);
  }
}

/** Start size of the writer {@link encodeCanonical} reuses, and the most it keeps between calls (bytes). */
const SHARED_START = 4096;
const SHARED_KEEP = 1 << 16;
/** Reused by {@link encodeCanonical}, which never runs inside itself (nothing it calls encodes). */
const shared = new Writer(SHARED_START);
