/** Small helpers shared by the test files. */
import { vi } from 'vitest';
import { main } from '../cli/internal.ts';
import { JcpError } from '../core/index.ts';

/** The JcpError code `f` throws, `untyped: …` for any other throw, or undefined when it returns. */
export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof JcpError ? e.code : `untyped: ${String(e)}`;
  }
  return undefined;
}

/**
 * Runs the `jcp` command in this process (`main` of cli/main.ts) with `argv`, capturing what it
 * writes to stdout and stderr; byte chunks are decoded as `encoding` (default UTF-8; `latin1`
 * keeps binary output byte for byte). @returns the exit code and the two texts.
 */
export async function runJcpInProcess(
  argv: string[],
  encoding: BufferEncoding = 'utf8',
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const text = (s: string | Uint8Array) => (typeof s === 'string' ? s : Buffer.from(s).toString(encoding));
  const w = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += text(s);
    return true;
  });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += text(s);
    return true;
  });
  try {
    return { code: await main(argv), out, err };
  } finally {
    w.mockRestore();
    e.mockRestore();
  }
}
