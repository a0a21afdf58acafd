/**
 * The input side of `jcp inspect`: hex text or raw bytes, jcp/1 length-prefixed frames (spec
 * §11) and CBOR sequences (RFC 8742), split into items with their byte offsets so that every
 * fault can say where it is. Faults are values with a stable code, never untyped throws.
 */
import { DEFAULT_FRAME_CAP, itemEndOrFault } from '../core/index.ts';

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

/**
 * Splits a CBOR sequence (RFC 8742) into items. A single item is the usual case.
 * @throws FaultError `cbor-malformed` (truncation, reserved heads) / `cbor-non-canonical`
 *   (indefinite lengths), with the byte offset.
 */
export function splitSequence(bytes: Uint8Array, base = 0): Item[] {
  const items: Item[] = [];
  let off = 0;
  while (off < bytes.length) {
    const r = itemEndOrFault(bytes, off);
    if ('fault' in r) fail({ ...r.fault, offset: base + r.fault.offset, ...(items.length > 0 ? { item: items.length } : {}) });
    const end = r.end;
    items.push({ bytes: bytes.subarray(off, end), offset: base + off });
    off = end;
  }
  return items;
}
