/**
 * Deterministic CBOR (spec §3; RFC 8949 §4.2.1) with strict, canonical-checked decoding.
 *
 * Encoding: definite lengths, shortest integer forms, map keys sorted bytewise by their encoding
 * (length-first for text keys). A JCP object holds only unsigned/negative integers, text, byte
 * strings, arrays and maps: floats, bools, null and undefined are refused with
 * `cbor-forbidden-type`. Integers outside ±(2^53−1) must be `bigint` (they decode as bigint).
 *
 * Decoding never trusts the library's strict mode alone: after a strict decode the value is
 * re-encoded and must equal the input bytes, so unsorted or duplicate keys, long-form integers,
 * indefinite lengths and trailing bytes are all refused (`cbor-non-canonical` / `cbor-malformed`).
 */
import { decode as cborgDecode, encode as cborgEncode, Tagged, Tokenizer, Type, rfc8949EncodeOptions } from 'cborg';
import type { DecodeOptions, EncodeOptions, TagDecoder } from 'cborg';
import { bytesEqual } from './bytes.ts';
import { ErrorCodes, JcpError } from './errors.ts';

export { Tagged };

const MAX_U64 = (1n << 64n) - 1n;

function forbid(what: string): never {
  throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `det-CBOR: ${what} is not allowed in a JCP object (§3)`);
}

const encodeOptions: EncodeOptions = {
  ...rfc8949EncodeOptions,
  typeEncoders: {
    number: (n: unknown) => {
      const v = n as number;
      if (!Number.isInteger(v) || Object.is(v, -0)) forbid(`the float ${String(v)}`);
      if (!Number.isSafeInteger(v)) forbid(`the unsafe integer ${v} (use bigint)`);
      return null;
    },
    bigint: (n: unknown) => {
      const v = n as bigint;
      if (v > MAX_U64 || v < -MAX_U64 - 1n) forbid(`the integer ${v} (beyond 64 bits)`);
      return null;
    },
    boolean: () => forbid('a bool'),
    null: () => forbid('null'),
    undefined: () => forbid('undefined'),
  },
};

/**
 * Canonical det-CBOR bytes of `value` (§3).
 * @throws JcpError `cbor-forbidden-type` for floats, bools, null, undefined, unsafe numbers.
 */
export function encode(value: unknown): Uint8Array {
  try {
    return cborgEncode(value, encodeOptions);
  } catch (e) {
    if (e instanceof JcpError) throw e;
    throw new JcpError(ErrorCodes.CBOR_FORBIDDEN_TYPE, `det-CBOR: cannot encode: ${(e as Error).message}`, undefined, {
      cause: e,
    });
  }
}

/** Options for {@link decode}. */
export interface DecodeOpts {
  /** Tag decoders by tag number; any other tag is refused (`cbor-forbidden-type`). */
  readonly tags?: Readonly<Record<number, TagDecoder>>;
  /** Decode maps as `Map` (needed for integer keys such as COSE headers). Default false. */
  readonly useMaps?: boolean;
}

const FORBIDDEN_TOKENS = new Set<string>([
  Type.float.name,
  Type.true.name,
  Type.false.name,
  Type.null.name,
  Type.undefined.name,
  Type.break.name,
]);

/** A tokenizer that refuses forbidden simple values and unexpected tags before any value is built. */
class GuardTokenizer extends Tokenizer {
  readonly allowedTags: ReadonlySet<number>;
  constructor(data: Uint8Array, options: DecodeOptions, allowedTags: ReadonlySet<number>) {
    super(data, options);
    this.allowedTags = allowedTags;
  }
  override next() {
    const t = super.next();
    if (FORBIDDEN_TOKENS.has(t.type.name)) forbid(`a ${t.type.name}`);
    if (t.type === Type.tag && !this.allowedTags.has(Number(t.value))) forbid(`tag ${String(t.value)}`);
    return t;
  }
}

/**
 * Strictly decodes one canonical det-CBOR item that spans all of `bytes` (§3).
 * @throws JcpError `cbor-malformed` (not CBOR, truncated, trailing bytes, non-text map key),
 *   `cbor-forbidden-type` (float/bool/null/undefined/unexpected tag), `cbor-non-canonical`
 *   (anything whose canonical re-encoding differs from `bytes`).
 */
export function decode(bytes: Uint8Array, opts: DecodeOpts = {}): unknown {
  if (!(bytes instanceof Uint8Array)) throw new JcpError(ErrorCodes.CBOR_MALFORMED, 'det-CBOR: input is not bytes');
  if (bytes.length === 0) throw new JcpError(ErrorCodes.CBOR_MALFORMED, 'det-CBOR: empty input');
  const tags: TagDecoder[] = [];
  for (const [k, v] of Object.entries(opts.tags ?? {})) tags[Number(k)] = v;
  const options: DecodeOptions = {
    strict: true,
    rejectDuplicateMapKeys: true,
    allowIndefinite: false,
    allowUndefined: false,
    allowInfinity: false,
    allowNaN: false,
    allowBigInt: true,
    useMaps: opts.useMaps ?? false,
    tags,
  };
  let value: unknown;
  try {
    value = cborgDecode(bytes, {
      ...options,
      tokenizer: new GuardTokenizer(bytes, options, new Set(Object.keys(opts.tags ?? {}).map(Number))),
    });
  } catch (e) {
    if (e instanceof JcpError) throw e;
    const msg = (e as Error).message ?? String(e);
    const code = /strict|sorted|duplicate|repeat map key|indefinite|more bytes than necessary/i.test(msg)
      ? ErrorCodes.CBOR_NON_CANONICAL
      : ErrorCodes.CBOR_MALFORMED;
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
