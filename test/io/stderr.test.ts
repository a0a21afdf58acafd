/**
 * io/stderr.ts: `console.error` bounded to a number of one-line messages per window (the A2A SDK
 * logs every refused request with its stack trace; a stranger could grow the bridge's stderr).
 */
import { afterEach, describe, expect, test } from 'vitest';
import { boundConsoleError } from '../../io/index.ts';

let restore: (() => void) | undefined;
afterEach(() => restore?.());

describe('boundConsoleError', () => {
  test('one line per message, no stack; past the bound dropped, and the count told when the window opens', () => {
    const lines: string[] = [];
    let now = 0;
    restore = boundConsoleError(
      { lines: 3, windowMs: 1000 },
      (l) => lines.push(l),
      () => now,
    );
    for (let i = 0; i < 10; i++) console.error('Unhandled error in JSON-RPC POST handler:', new Error(`refused ${i}\nsecond line`));
    expect(lines).toEqual([
      'Unhandled error in JSON-RPC POST handler: Error: refused 0 second line\n',
      'Unhandled error in JSON-RPC POST handler: Error: refused 1 second line\n',
      'Unhandled error in JSON-RPC POST handler: Error: refused 2 second line\n',
    ]);
    now = 1000;
    console.error('x'.repeat(2000));
    expect(lines.slice(3)).toEqual(['(7 more error lines dropped in 1 s)\n', `${'x'.repeat(512)}\n`]);
  });

  test('the original is put back', () => {
    const before = console.error;
    restore = boundConsoleError({ lines: 1, windowMs: 1000 }, () => {});
    expect(console.error).not.toBe(before);
    restore();
    expect(console.error).toBe(before);
  });
});
