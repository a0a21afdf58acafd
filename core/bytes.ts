import { ErrorCodes, JcpError } from './errors.ts';

const HEX = /^(?:[0-9a-f]{2})*$/;

/** Lowercase hex of `b`. */
export function toHex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/**
 * Parses lowercase (or uppercase) hex into bytes.
 * @throws JcpError `bad-length` if `s` is not an even-length hex string (or not `len` bytes when given).
 */
export function fromHex(s: string, len?: number, field = 'hex'): Uint8Array {
  if (typeof s !== 'string' || !HEX.test(s.toLowerCase())) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, `${field}: not a hex string`, { field });
  }
  const out = new Uint8Array(Buffer.from(s, 'hex'));
  if (len !== undefined && out.length !== len) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, `${field}: expected ${len} bytes, got ${out.length}`, { field });
  }
  return out;
}

/** Constant-content equality of two byte arrays. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Concatenates byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** UTF-8 bytes of `s`. */
export function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
