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
 * A coded failure of a CLI command (exit 1), printed by cli/main.ts as one line
 * `jcp <command>: error [code]: message`. `code` is one of the product's stable lowercase codes.
 */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** The stable code of a node (or other server) that could not be reached or dropped the connection. */
export const CONNECTION_FAILED = 'connection-failed';

const NET_WHY: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the peer',
  ECONNABORTED: 'connection aborted',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  EHOSTDOWN: 'host is down',
  ENETUNREACH: 'network unreachable',
  ENETDOWN: 'network is down',
  EADDRNOTAVAIL: 'address not available',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed for now',
  EPIPE: 'connection closed by the peer',
};

/** True when `e` is a network failure: a socket error (`ECONNREFUSED`…) or a lost jcp/1 connection. */
export function isNetworkError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (e.name === 'ConnectionLost') return true; // client/client.ts: the connection is gone for good
  const { code, syscall } = e as NodeJS.ErrnoException;
  return (typeof code === 'string' && code in NET_WHY) || syscall === 'connect' || syscall === 'getaddrinfo';
}

/**
 * A network failure as a {@link CliError} `connection-failed`: "cannot reach `what`: connection
 * refused (ECONNREFUSED)", the system code kept in the message. Anything else passes through.
 */
export function connectionError(e: unknown, what: string): unknown {
  if (!isNetworkError(e)) return e;
  const { code, message } = e as NodeJS.ErrnoException;
  const why = typeof code === 'string' ? `${NET_WHY[code] ?? message} (${code})` : message;
  return new CliError(CONNECTION_FAILED, `cannot reach ${what}: ${why}`, { cause: e });
}

/** parseArgs' (sometimes multi-line) complaint as one line naming the option. */
function parseArgsMessage(e: unknown): string {
  const m = (e as Error).message;
  let r = /^Option '(-[\w-]+)'(?: <value>)? argument is ambiguous/.exec(m);
  if (r) return `${r[1]} needs a value; write a value starting with '-' as ${r[1]}=-VALUE`;
  r = /^Option '(-[\w-]+) <value>' argument missing/.exec(m);
  if (r) return `${r[1]} needs a value`;
  r = /^Option '(-[\w-]+)' does not take an argument/.exec(m);
  if (r) return `${r[1]} takes no value`;
  r = /^Unknown option '([^']*)'/.exec(m);
  if (r) return `unknown option ${r[1]}`;
  r = /^Unexpected argument '([^']*)'/.exec(m);
  if (r) return `unexpected argument '${r[1]}' (every value follows its --option)`;
  return m.split('\n')[0]!;
}

/**
 * Parses `argv` with node:util parseArgs (strict). Every failure is a one-line
 * {@link UsageError} naming the option; an option given twice is refused unless it is declared
 * `multiple` (parseArgs itself would keep the last value silently).
 */
export function parse<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = true,
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true; tokens: true }>> {
  let r: ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true; tokens: true }>>;
  try {
    r = parseArgs({ args: argv, options, allowPositionals, strict: true, tokens: true });
  } catch (e) {
    throw new UsageError(parseArgsMessage(e));
  }
  const seen = new Set<string>();
  for (const t of r.tokens) {
    if (t.kind !== 'option' || options[t.name]?.multiple) continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} is given more than once; give it once`);
    seen.add(t.name);
  }
  return r;
}

/** True when argv asks for help. */
export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * Resolves at the first SIGINT or SIGTERM. Call it *before* printing the line a supervisor waits
 * for (listening on…): a signal sent the moment that line is read is then a graceful stop, never
 * the signal's default action (death, exit status lost). The handlers stay until the returned
 * promise's `off()` is called, so a second signal while the command closes is not fatal either.
 */
export function untilSignal(): Promise<void> & { off: () => void } {
  let fire!: () => void;
  const p = new Promise<void>((resolve) => {
    fire = () => resolve();
  });
  process.on('SIGINT', fire);
  process.on('SIGTERM', fire);
  return Object.assign(p, {
    off: () => {
      process.off('SIGINT', fire);
      process.off('SIGTERM', fire);
    },
  });
}
