/**
 * A bound on what a library writes to stderr on its own: `@a2a-js/sdk`'s server calls
 * `console.error` with the whole error, stack trace included, for every request its handler
 * refuses (about 1.9 KB each), so a stranger could grow a bridge's stderr (and the file or journal
 * behind it) at will: 3.1 MB from one flood (2026-12-07).
 */
import { format } from 'node:util';

/** Lines a {@link boundConsoleError} lets through per window, and the window, milliseconds. */
export interface ConsoleErrorBound {
  readonly lines: number;
  readonly windowMs: number;
}

/** The default: 20 lines every 10 s. */
export const CONSOLE_ERROR_BOUND: ConsoleErrorBound = { lines: 20, windowMs: 10_000 };

/**
 * Replaces `console.error` (for the rest of the process; for a CLI command's process, not a
 * library) with one that writes each message as one line (an Error as `name: message`, no stack)
 * of at most 512 characters, at most `bound.lines` per `bound.windowMs`; the lines dropped are
 * counted and told in one line when the next window opens. `write` is where lines go (default
 * stderr), `nowMs` the clock. Returns a function that puts the original back.
 */
export function boundConsoleError(
  bound: ConsoleErrorBound = CONSOLE_ERROR_BOUND,
  write: (line: string) => void = (line) => process.stderr.write(line),
  nowMs: () => number = () => performance.now(),
): () => void {
  const original = console.error;
  let windowStart = Number.NEGATIVE_INFINITY;
  let written = 0;
  let dropped = 0;
  console.error = (...args: unknown[]) => {
    const now = nowMs();
    if (now - windowStart >= bound.windowMs) {
      if (dropped > 0) write(`(${dropped} more error lines dropped in ${bound.windowMs / 1000} s)\n`);
      windowStart = now;
      written = 0;
      dropped = 0;
    }
    if (written >= bound.lines) {
      dropped++;
      return;
    }
    written++;
    const text = format(...args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}` : a)));
    write(`${text.replace(/\s*\n\s*/g, ' ').slice(0, 512)}\n`);
  };
  return () => {
    console.error = original;
  };
}
