/** Small helpers shared by the test files. */
import { JcpError } from '../core/errors.ts';

/** The JcpError code `f` throws, `untyped: …` for any other throw, or undefined when it returns. */
export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof JcpError ? e.code : `untyped: ${String(e)}`;
  }
  return undefined;
}
