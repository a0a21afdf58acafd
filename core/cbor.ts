/**
 * Deterministic CBOR (spec §3; RFC 8949 §4.2.1) with strict, canonical-checked decoding.
 *
 * Encoding: definite lengths, shortest integer forms, map keys sorted bytewise by their encoding
 * (length-first for text keys). A JCP object holds only unsigned/negative integers, text, byte
 * strings, arrays and maps: floats, bools, null and undefined are refused with
 * `cbor-forbidden-type`. Integers outside ±(2^53−1) must be `bigint` (they decode as bigint).
 *
 * Decoding never trusts the library's strict mode alone. Our own tokenizer guard reads every
 * item head before cborg does (RFC 8949 §3) and refuses, with a code chosen here rather than
 * from cborg's message text:
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
 * message) are read by `cbor-flat.ts` `readCanonical` in one pass, with no library and no
 * re-encoding; anything it does not accept takes the path above ({@link decodeByCborg}), which
 * gives the same value or the precise refusal.
 */
import { isUtf8 } from 'node:buffer';
import { decode as cborgDecode, Tagged, Tokenizer } from 'cborg';
import type { DecodeOptions, TagDecoder } from 'cborg';
import { readCanonical } from './cbor-flat.ts';
import { encodeCanonical } from './detcbor.ts';
import { bytesEqual } from './bytes.ts';
import { type ErrorCode, ErrorCodes, JcpError } from './errors.ts';

export { Tagged };


function forbid(what: string): never {
  throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `det-CBOR: ${what} is not allowed in a JCP object (§3)`);
}

function refuse(code: ErrorCode, what: string, offset: number): never {
  throw new JcpError(code, `det-CBOR: ${what} at byte ${offset}`, { offset });
}

/**
 * Canonical det-CBOR bytes of `value` (§3), as a plain `Uint8Array` (never a Node Buffer).
 * Written by the hot-path encoder in `detcbor.ts` (checked byte for byte against cborg's RFC 8949
 * deterministic encoder in test/core/cbor-fuzz.test.ts).
 * @throws JcpError `cbor-forbidden-type` for floats, bools, null, undefined, unsafe numbers,
 *   integers beyond 64 bits, strings holding a lone surrogate, and other non-JCP values.
 */
export function encode(value: unknown): Uint8Array {
  return encodeCanonical(value);
}

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
const bomKeepingDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** True when every byte is below 0x80 (short strings: cheaper than a native call). */
function isAscii(b: Uint8Array): boolean {
  if (b.length > 64) return false;
  for (let i = 0; i < b.length; i++) if (b[i]! >= 0x80) return false;
  return true;
}

/** One open container while tokens stream by: how many items it still expects. */
interface Frame {
  readonly isMap: boolean;
  readonly total: number;
  remaining: number;
}

/** The big-endian argument of `n` bytes at `at` (n ≤ 8; approximate above 2^53, enough for the shortest-form check). */
function readArg(data: Uint8Array, at: number, n: number): number {
  let v = 0;
  for (let i = 0; i < n; i++) v = v * 256 + data[at + i]!;
  return v;
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
      if (!isAscii(text) && !isUtf8(text)) refuse(ErrorCodes.CBOR_MALFORMED, 'text string is not valid UTF-8', pos);
      // cborg's TextDecoder drops a leading U+FEFF; keep it so the value re-encodes to these bytes.
      if (text[0] === UTF8_BOM[0] && text[1] === UTF8_BOM[1] && text[2] === UTF8_BOM[2]) {
        token.value = bomKeepingDecoder.decode(text);
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
