/**
 * The demo's coded failures. `jcp demo` prints every failure as one line
 * `jcp demo: error [code]: message` (cli/main.ts): a failure that already has a code keeps it
 * (`nats-unavailable`, `io`, a node fault…); these name the rest.
 */
/** Stable codes of {@link DemoError}. */
export const DemoErrorCodes = {
  /** The demo could not run to its report: a process it started failed, a step timed out, … */
  FAILED: 'demo-failed',
  /** `--dir` names a folder that is not empty (the demo never writes into a used folder). */
  DIR_NOT_EMPTY: 'dir-not-empty',
} as const;

/** One {@link DemoErrorCodes} value. */
export type DemoErrorCode = (typeof DemoErrorCodes)[keyof typeof DemoErrorCodes];

/**
 * A demo failure with a stable `code` (one of {@link DemoErrorCodes}). cli/main.ts prints any error
 * with a string `code` as `jcp demo: error [code]: message`, exit 1.
 */
export class DemoError extends Error {
  override readonly name = 'DemoError';
  readonly code: DemoErrorCode;

  constructor(code: DemoErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** The stable code of `e` if it has one (a string `code`), else undefined. */
export function codeOf(e: unknown): string | undefined {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.length > 0 ? code : undefined;
}

/** `e` as a coded error: itself when it has a code, else a {@link DemoError} `demo-failed` with its message. */
export function asCoded(e: unknown): Error & { code: string } {
  if (e instanceof Error && codeOf(e) !== undefined) return e as Error & { code: string };
  return new DemoError(DemoErrorCodes.FAILED, (e as Error)?.message ?? String(e), { cause: e });
}
