/**
 * JSON conventions of the published vectors (`conformance/v1/README.md`): bytes as lowercase
 * hex, µJ amounts and other integers that may pass 2^53 as decimal strings, seconds and small
 * counters as JSON numbers, absent optional fields left out. This module writes those values and
 * reads them back with titled accessors that name the JSON path of a bad field.
 */
import { toHex } from '../core/index.ts';

/** A JSON value as written to a vector file. */
export type Json = string | number | boolean | null | Json[] | { [k: string]: Json };
/** A JSON object. */
export type JsonObj = { [k: string]: Json };

/** A vector file whose shape does not match the README (a missing field, a bad hex string…). */
export class VectorFormatError extends Error {
  override readonly name = 'VectorFormatError';
  readonly path: string;

  constructor(path: string, what: string) {
    super(`${path}: ${what}`);
    this.path = path;
  }
}

/** Lowercase hex of `b`. */
export const hex = toHex;

/** A µJ amount (or any unsigned integer that may pass 2^53) as a decimal string. */
export function dec(v: bigint): string {
  return v.toString(10);
}

/** Copies `o` without its undefined members (an absent optional field is left out). */
export function compact(o: Record<string, Json | undefined>): JsonObj {
  const out: JsonObj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

const DECIMAL = /^(?:0|[1-9][0-9]*)$/;
const HEX = /^(?:[0-9a-f]{2})*$/;

/** Reads a parsed JSON value with accessors that throw {@link VectorFormatError} naming the path. */
export class J {
  readonly v: unknown;
  readonly path: string;

  constructor(v: unknown, path: string) {
    this.v = v;
    this.path = path;
  }

  #fail(what: string): never {
    throw new VectorFormatError(this.path, what);
  }

  /** True when this is an object that has member `k`. */
  has(k: string): boolean {
    return typeof this.v === 'object' && this.v !== null && !Array.isArray(this.v) && Object.hasOwn(this.v, k);
  }

  /** Member `k` of an object (required). */
  get(k: string): J {
    if (typeof this.v !== 'object' || this.v === null || Array.isArray(this.v)) this.#fail('expected an object');
    if (!Object.hasOwn(this.v, k)) throw new VectorFormatError(`${this.path}.${k}`, 'missing');
    return new J((this.v as Record<string, unknown>)[k], `${this.path}.${k}`);
  }

  /** Member `k` of an object, or undefined when absent. */
  opt(k: string): J | undefined {
    return this.has(k) ? this.get(k) : undefined;
  }

  /** The members of an object, in file order. */
  entries(): [string, J][] {
    if (typeof this.v !== 'object' || this.v === null || Array.isArray(this.v)) this.#fail('expected an object');
    return Object.entries(this.v as Record<string, unknown>).map(([k, v]) => [k, new J(v, `${this.path}.${k}`)]);
  }

  /** The items of an array. */
  items(): J[] {
    if (!Array.isArray(this.v)) this.#fail('expected an array');
    return this.v.map((x, i) => new J(x, `${this.path}[${i}]`));
  }

  /** A string. */
  str(): string {
    if (typeof this.v !== 'string') this.#fail('expected a string');
    return this.v;
  }

  /** A safe non-negative integer (seconds, counters, indexes). */
  num(): number {
    if (typeof this.v !== 'number' || !Number.isSafeInteger(this.v) || this.v < 0) this.#fail('expected a non-negative integer');
    return this.v;
  }

  /** Any JSON number (split percentages). */
  float(): number {
    if (typeof this.v !== 'number' || !Number.isFinite(this.v)) this.#fail('expected a number');
    return this.v;
  }

  /** true or false. */
  bool(): boolean {
    if (typeof this.v !== 'boolean') this.#fail('expected true or false');
    return this.v;
  }

  /** An unsigned integer written as a decimal string (µJ). */
  uint(): bigint {
    const s = this.str();
    if (!DECIMAL.test(s)) this.#fail('expected an unsigned decimal string');
    return BigInt(s);
  }

  /** Bytes written as lowercase hex (optionally of exact length). */
  bytes(len?: number): Uint8Array {
    const s = this.str();
    if (!HEX.test(s)) this.#fail('expected lowercase hex');
    const b = new Uint8Array(Buffer.from(s, 'hex'));
    if (len !== undefined && b.length !== len) this.#fail(`expected ${len} bytes, got ${b.length}`);
    return b;
  }

  /** An array of strings. */
  strs(): string[] {
    return this.items().map((x) => x.str());
  }

  /** The value as parsed (for deep comparisons). */
  raw(): unknown {
    return this.v;
  }
}
