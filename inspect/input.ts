/**
 * The input side of `jcp inspect`: hex text or raw bytes, jcp/1 length-prefixed frames (spec
 * §11) and CBOR sequences (RFC 8742), split into items with their byte offsets so that every
 * fault can say where it is. Faults are values with a stable code, never untyped throws.
 */
import { decode as looseDecode, Tagged } from 'cborg';
import { DEFAULT_FRAME_CAP, encode } from '../core/index.ts';

/** Why an input could not be decoded: a stable code, a message, and where, when known. */
export interface InspectFault {
  /** An `ErrorCodes` code (`cbor-non-canonical`, `schema`, `frame-truncated`…) or one of {@link InputCodes}. */
  readonly code: string;
  readonly message: string;
  /** The field path that failed (`request.chain[0].grant.nonce`), when the failure is in a field. */
  readonly field?: string;
  /** Byte offset in the whole input (after hex decoding), when known. */
  readonly offset?: number;
  /** Index of the item (in a CBOR sequence or a run of frames) that failed. */
  readonly item?: number;
}

/** Fault codes of the input layer (the rest are the core's `ErrorCodes`). */
export const InputCodes = {
  /** The text is not hex (a bad character, an odd number of digits). */
  BAD_HEX: 'bad-hex',
  /** Nothing to inspect. */
  EMPTY: 'empty-input',
  /** Well-formed, canonical CBOR that is no JCP object we know. */
  UNKNOWN_SHAPE: 'unknown-shape',
} as const;

/** A fault as a throwable, so deep code can bail out with a precise fault. */
export class FaultError extends Error {
  override readonly name = 'FaultError';
  readonly fault: InspectFault;

  constructor(fault: InspectFault) {
    super(fault.message);
    this.fault = fault;
  }
}

/** Throws a fault. */
export function fail(fault: InspectFault): never {
  throw new FaultError(fault);
}

const HEX_CHAR = /[0-9a-fA-F]/;

/**
 * Parses hex text: whitespace anywhere is ignored, an optional `0x` prefix is allowed.
 * @throws FaultError `bad-hex` naming the first bad character and its position, or an odd length.
 */
export function parseHex(text: string): Uint8Array {
  let s = text.trim();
  let base = text.length - text.trimStart().length;
  if (s.startsWith('0x') || s.startsWith('0X')) {
    s = s.slice(2);
    base += 2;
  }
  let digits = '';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (HEX_CHAR.test(ch)) digits += ch;
    else if (!/\s/.test(ch)) {
      fail({ code: InputCodes.BAD_HEX, message: `not hex: character ${JSON.stringify(ch)} at position ${base + i} of the text` });
    }
  }
  if (digits.length === 0) fail({ code: InputCodes.EMPTY, message: 'no hex digits' });
  if (digits.length % 2 !== 0) fail({ code: InputCodes.BAD_HEX, message: `odd number of hex digits (${digits.length})` });
  return new Uint8Array(Buffer.from(digits, 'hex'));
}

/** True when `bytes` read as text are nothing but hex digits, whitespace and an optional `0x`. */
export function looksLikeHexText(bytes: Uint8Array): boolean {
  if (bytes.length === 0) return false;
  const s = Buffer.from(bytes).toString('latin1').trim();
  return s.length > 0 && /^(?:0[xX])?[0-9a-fA-F\s]+$/.test(s);
}

/** The bytes of a file's (or stdin's) contents: hex text is decoded, anything else is taken as raw bytes. */
export function bytesOfContents(contents: Uint8Array): Uint8Array {
  if (contents.length === 0) fail({ code: InputCodes.EMPTY, message: 'the input is empty' });
  return looksLikeHexText(contents) ? parseHex(Buffer.from(contents).toString('latin1')) : contents;
}

/** One item to inspect: its bytes and where it starts in the whole input. */
export interface Item {
  readonly bytes: Uint8Array;
  readonly offset: number;
}

/**
 * Splits jcp/1 frames (4-byte big-endian length ‖ body, §11): every body with its offset.
 * @throws FaultError `frame-truncated` when the input ends inside a length or a body.
 */
export function splitFrames(bytes: Uint8Array): Item[] {
  const items: Item[] = [];
  let off = 0;
  while (off < bytes.length) {
    if (off + 4 > bytes.length) {
      fail({
        code: 'frame-truncated',
        message: `jcp/1: ${bytes.length - off} bytes of a 4-byte length prefix`,
        offset: off,
        ...(items.length > 0 ? { item: items.length } : {}),
      });
    }
    const len = new DataView(bytes.buffer, bytes.byteOffset + off, 4).getUint32(0, false);
    if (off + 4 + len > bytes.length && len > DEFAULT_FRAME_CAP) {
      fail({
        code: 'frame-too-large',
        message: `jcp/1: the frame at byte ${off} declares ${len} bytes, above the default cap of ${DEFAULT_FRAME_CAP} (a node refuses it before reading the body)`,
        offset: off,
        ...(items.length > 0 ? { item: items.length } : {}),
      });
    }
    if (off + 4 + len > bytes.length) {
      fail({
        code: 'frame-truncated',
        message: `jcp/1: the frame at byte ${off} declares ${len} bytes but only ${bytes.length - off - 4} follow`,
        offset: off,
        ...(items.length > 0 ? { item: items.length } : {}),
      });
    }
    items.push({ bytes: bytes.subarray(off + 4, off + 4 + len), offset: off + 4 });
    off += 4 + len;
  }
  return items;
}

const MAX_DEPTH = 512;

/** The offset just past the CBOR item at `off` (definite lengths only). */
function itemEnd(bytes: Uint8Array, off: number, depth: number): number {
  if (depth > MAX_DEPTH) fail({ code: 'cbor-malformed', message: `nesting deeper than ${MAX_DEPTH}`, offset: off });
  if (off >= bytes.length) fail({ code: 'cbor-malformed', message: `truncated: an item expected at byte ${off}`, offset: off });
  const ib = bytes[off]!;
  const major = ib >> 5;
  const ai = ib & 31;
  if (ai >= 28 && ai <= 30) fail({ code: 'cbor-malformed', message: `reserved additional info ${ai} at byte ${off}`, offset: off });
  if (ai === 31) {
    if (major === 7) fail({ code: 'cbor-malformed', message: `a break outside an indefinite-length item at byte ${off}`, offset: off });
    fail({ code: 'cbor-non-canonical', message: `an indefinite-length item at byte ${off}`, offset: off });
  }
  const width = ai < 24 ? 0 : 1 << (ai - 24);
  if (off + 1 + width > bytes.length) fail({ code: 'cbor-malformed', message: `truncated item head at byte ${off}`, offset: off });
  let arg = ai < 24 ? ai : 0;
  for (let i = 1; i <= width; i++) arg = arg * 256 + bytes[off + i]!;
  let next = off + 1 + width;
  switch (major) {
    case 2:
    case 3:
      if (next + arg > bytes.length) {
        fail({
          code: 'cbor-malformed',
          message: `truncated: the string at byte ${off} declares ${arg} bytes, ${bytes.length - next} follow`,
          offset: off,
        });
      }
      return next + arg;
    case 4:
    case 5: {
      const n = major === 5 ? arg * 2 : arg;
      if (n > bytes.length - next) {
        fail({
          code: 'cbor-malformed',
          message: `truncated: the ${major === 5 ? 'map' : 'array'} at byte ${off} declares ${arg} entries`,
          offset: off,
        });
      }
      for (let i = 0; i < n; i++) next = itemEnd(bytes, next, depth + 1);
      return next;
    }
    case 6:
      return itemEnd(bytes, next, depth + 1);
    default:
      return next;
  }
}

/**
 * The offset of the first item head in `bytes` (one well-formed item) that a JCP object may not
 * hold: a float or simple value (major type 7), or a tag other than `allowedTag`. Undefined when
 * there is none or the bytes are not well-formed.
 */
export function firstForbiddenByte(bytes: Uint8Array, allowedTag?: number): number | undefined {
  let found: number | undefined;
  const visit = (off: number, depth: number): number => {
    if (found !== undefined || depth > MAX_DEPTH || off >= bytes.length) throw new Error('stop');
    const ib = bytes[off]!;
    const major = ib >> 5;
    const ai = ib & 31;
    const width = ai < 24 ? 0 : ai < 28 ? 1 << (ai - 24) : 0;
    let arg = ai < 24 ? ai : 0;
    for (let i = 1; i <= width; i++) arg = arg * 256 + (bytes[off + i] ?? 0);
    if (major === 7 || (major === 6 && arg !== allowedTag)) {
      found = off;
      throw new Error('stop');
    }
    let next = off + 1 + width;
    if (ai >= 28) throw new Error('stop');
    if (major === 2 || major === 3) return next + arg;
    if (major === 4 || major === 5) {
      for (let i = 0; i < (major === 5 ? arg * 2 : arg); i++) next = visit(next, depth + 1);
      return next;
    }
    if (major === 6) return visit(next, depth + 1);
    return next;
  };
  try {
    visit(0, 0);
  } catch {
    // stopped: found, or not well-formed
  }
  return found;
}

/**
 * Splits a CBOR sequence (RFC 8742) into items. A single item is the usual case.
 * @throws FaultError `cbor-malformed` (truncation, reserved heads) / `cbor-non-canonical`
 *   (indefinite lengths), with the byte offset.
 */
export function splitSequence(bytes: Uint8Array, base = 0): Item[] {
  const items: Item[] = [];
  let off = 0;
  while (off < bytes.length) {
    let end: number;
    try {
      end = itemEnd(bytes, off, 0);
    } catch (e) {
      if (e instanceof FaultError) {
        const f = e.fault;
        fail({ ...f, offset: base + (f.offset ?? off), ...(items.length > 0 ? { item: items.length } : {}) });
      }
      throw e;
    }
    items.push({ bytes: bytes.subarray(off, end), offset: base + off });
    off = end;
  }
  return items;
}

/**
 * Where canonical re-encoding first differs from `bytes` (for a `cbor-non-canonical` fault that
 * the strict decoder reports without an offset): decode loosely, re-encode canonically, compare.
 * Undefined when the bytes cannot be loosely decoded.
 */
export function firstNonCanonicalByte(bytes: Uint8Array): number | undefined {
  let again: Uint8Array;
  try {
    const loose = looseDecode(bytes, { useMaps: true, tags: tagDecoders() });
    again = encode(loose);
  } catch {
    return undefined;
  }
  const n = Math.min(again.length, bytes.length);
  for (let i = 0; i < n; i++) if (again[i] !== bytes[i]) return i;
  return again.length !== bytes.length ? n : undefined;
}

/** Loose tag decoders that keep any tag (0–255) as a `Tagged` value. */
function tagDecoders(): ((inner: unknown) => unknown)[] {
  const tags: ((inner: unknown) => unknown)[] = [];
  for (let t = 0; t < 256; t++) tags[t] = (inner: unknown) => new Tagged(t, inner);
  return tags;
}
