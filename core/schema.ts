/**
 * Titled field readers for decoded CBOR maps. Each throws JcpError `schema` (or `did-invalid`,
 * `bad-length`) naming the field, so every decoder refuses bad input with a stable code.
 */
import { check, ErrorCodes, JcpError } from './errors.ts';
import { type ContentId, isContentId } from './hash.ts';
import { type Did, parseDid } from './didkey.ts';

/** A plain decoded CBOR map. */
export type Obj = Record<string, unknown>;

/**
 * Asserts `v` is a plain map whose keys are all in `required ∪ optional`, and all `required` present.
 * @throws JcpError `schema`
 */
export function asObj(v: unknown, field: string, required: readonly string[], optional: readonly string[] = []): Obj {
  check(
    typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Map),
    field,
    'expected a map',
  );
  const o = v as Obj;
  for (const k of required) check(Object.hasOwn(o, k), `${field}.${k}`, 'missing');
  for (const k of Object.keys(o)) {
    check(required.includes(k) || optional.includes(k), `${field}.${k}`, 'unknown field');
  }
  return o;
}

/** Reads an unsigned integer (number or bigint) as bigint. @throws JcpError `schema` */
export function asUint(v: unknown, field: string): bigint {
  if (typeof v === 'bigint') {
    check(v >= 0n, field, 'expected an unsigned integer');
    return v;
  }
  check(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0, field, 'expected an unsigned integer');
  return BigInt(v);
}

/** Reads an unsigned integer that must fit a JS number (seq counters, seconds). @throws JcpError `schema` */
export function asSafeUint(v: unknown, field: string): number {
  check(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0, field, 'expected an unsigned integer below 2^53');
  return v;
}

/** Reads a text string (at most `max` UTF-16 units). @throws JcpError `schema` */
export function asText(v: unknown, field: string, max = 4096): string {
  check(typeof v === 'string', field, 'expected text');
  check(v.length <= max, field, `longer than ${max}`);
  return v;
}

/** Reads a byte string, optionally of exact length. @throws JcpError `schema` / `bad-length` */
export function asBytes(v: unknown, field: string, len?: number): Uint8Array {
  check(v instanceof Uint8Array, field, 'expected a byte string');
  if (len !== undefined && v.length !== len) {
    throw new JcpError(ErrorCodes.BAD_LENGTH, `${field}: expected ${len} bytes, got ${v.length}`, { field });
  }
  return v;
}

/** Reads a content id (64 lowercase hex). @throws JcpError `schema` */
export function asCid(v: unknown, field: string): ContentId {
  check(isContentId(v), field, 'expected a content id (64 lowercase hex chars)');
  return v;
}

/** Reads and validates a did:key. @throws JcpError `did-invalid` naming the field */
export function asDid(v: unknown, field: string): Did {
  try {
    parseDid(v);
  } catch (e) {
    throw new JcpError(ErrorCodes.DID_INVALID, `${field}: ${(e as Error).message}`, { field }, { cause: e });
  }
  return v as Did;
}

/** Reads an array. @throws JcpError `schema` */
export function asArray(v: unknown, field: string, max = 1024): unknown[] {
  check(Array.isArray(v), field, 'expected an array');
  check(v.length <= max, field, `more than ${max} items`);
  return v;
}

/** Reads one of the given string literals. @throws JcpError `schema` */
export function asEnum<T extends string>(v: unknown, field: string, values: readonly T[]): T {
  check(typeof v === 'string' && (values as readonly string[]).includes(v), field, `expected one of ${values.join('|')}`);
  return v as T;
}

/** Encodes a bigint µJ/uint for CBOR as a number when safe (identical bytes either way). */
export function uintOut(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}
