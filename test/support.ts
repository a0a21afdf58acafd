/** Small helpers shared by the test files. */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
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

/**
 * The node_modules files the CommonJS loader holds after `specifier` (a path from the repository
 * root) is imported in a fresh Node process, the sources through tsx: what a command loads, which
 * is what its start-up time follows (test/node/startup-modules.test.ts, test/demo/startup-modules.test.ts).
 */
export function cjsLoadedBy(specifier: string): string[] {
  const script = `await import(${JSON.stringify(specifier)});
const { createRequire } = await import('node:module');
process.stdout.write(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`;
  const root = fileURLToPath(new URL('..', import.meta.url));
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
  return (JSON.parse(out) as string[]).filter((f) => f.includes('/node_modules/'));
}
