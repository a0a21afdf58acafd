/**
 * The shape of one `jcp` subcommand. Each command lives in its own file under cli/ and is listed
 * in cli/commands.ts. Commands print results to stdout, errors to stderr, and return an exit code.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** One `jcp` subcommand (possibly with sub-verbs handled inside `run`). */
export interface Command {
  /** The word after `jcp`, e.g. `conformance`. */
  readonly name: string;
  /** One line for `jcp --help`. */
  readonly summary: string;
  /** Full help text printed by `jcp <name> --help`. */
  readonly help: string;
  /** Runs the command with the arguments after its name; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** A usage error: printed to stderr with the command's help hint, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * Parses `argv` with node:util parseArgs (strict), turning its errors into {@link UsageError}.
 */
export function parse<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = true,
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true }>> {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** True when argv asks for help. */
export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}
