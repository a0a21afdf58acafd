/**
 * The check recorder used by every conformance class: counts real checks and keeps the first
 * failure. A class passes only if it ran at least one check and none failed.
 */
import { isDeepStrictEqual } from 'node:util';

/** Records checks for one conformance class. */
export class Checker {
  checks = 0;
  readonly failures: string[] = [];

  /** Records one check: passes when `cond` is truthy. */
  ok(cond: unknown, label: string): void {
    this.checks++;
    if (!cond) this.failures.push(label);
  }

  /** Records one check: passes when `actual` deep-equals `expected`. */
  eq(actual: unknown, expected: unknown, label: string): void {
    this.checks++;
    if (!isDeepStrictEqual(actual, expected)) {
      this.failures.push(`${label}: expected ${show(expected)}, got ${show(actual)}`);
    }
  }

  /** Records one check: passes when `fn` throws (optionally an error with `code`). */
  throws(fn: () => unknown, label: string, code?: string): void {
    this.checks++;
    try {
      fn();
      this.failures.push(`${label}: did not throw`);
    } catch (e) {
      const got = (e as { code?: string }).code;
      if (code !== undefined && got !== code) this.failures.push(`${label}: threw ${String(got)}, expected ${code}`);
    }
  }
}

function show(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? `${x}n` : x));
  } catch {
    return String(v);
  }
}
