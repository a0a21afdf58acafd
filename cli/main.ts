/**
 * Entry point of the `jcp` command: dispatches to a subcommand, prints help, maps errors to
 * stderr and a non-zero exit code (2 for usage errors, 1 for failures). Every error is one line
 * `jcp <command>: error [code]: message` with one of the product's stable codes: a raw system
 * code (ENOENT, ECONNREFUSED…) never stands as the code, only inside the message.
 */
import { CONNECTION_FAILED, type Command, UsageError, connectionError, isNetworkError } from './command.ts';
import { COMMANDS } from './commands.ts';
import type { IoError } from '../io/index.ts';

/** The top-level help, from the registry alone: no command module (nor core/) is loaded for it. */
function topHelp(): string {
  const lines = ['Usage: jcp <command> [options]', '', 'Commands:'];
  for (const c of COMMANDS) lines.push(`  ${c.name.padEnd(14)}${c.summary}`);
  lines.push('', 'Run `jcp <command> --help` for the options of one command.');
  return lines.join('\n');
}

/**
 * The stable code and message of a coded error: ours as they are (JcpError, NodeFault, FrostError,
 * IoError, CliError), and a Node system error mapped to ours with its system code kept in the
 * message: a network one (ECONNREFUSED…) to `connection-failed`, any other (ENOENT, ENOTDIR,
 * EEXIST…) to `io`. Undefined for an uncoded error (printed as an internal error).
 */
async function coded(e: unknown): Promise<{ code: string; message: string } | undefined> {
  // Loaded here, on the error path, so that `jcp --help` and the start of every command do not wait for them.
  const [{ JcpError }, { errnoOf, fromSystemError, IO_ERROR_CODE, isSystemError }] = await Promise.all([
    import('../core/index.ts'),
    import('../io/index.ts'),
  ]);
  if (e instanceof JcpError) return { code: e.code, message: e.message };
  if (typeof e !== 'object' || e === null || !(e instanceof Error)) return undefined;
  if (isNetworkError(e)) {
    const { address, port } = e as NodeJS.ErrnoException & { address?: string; port?: number };
    const mapped = connectionError(e, address !== undefined ? `${address}${port !== undefined ? `:${port}` : ''}` : 'the server') as Error;
    return { code: CONNECTION_FAILED, message: mapped.message };
  }
  const errno = errnoOf(e);
  if (errno !== undefined) {
    const mapped = isSystemError(e) ? (fromSystemError(e) as IoError) : undefined;
    return { code: IO_ERROR_CODE, message: mapped?.message ?? (e.message.includes(errno) ? e.message : `${e.message} (${errno})`) };
  }
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && code.length > 0 ? { code, message: e.message } : undefined;
}

/** Runs `jcp` with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${topHelp()}\n`);
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) {
    process.stderr.write(`jcp: error [usage]: unknown command '${name}'\nRun 'jcp --help'.\n`);
    return 2;
  }
  let cmd: Command | undefined;
  try {
    cmd = await entry.load();
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(`${cmd.help}\n`);
      return 0;
    }
    return await cmd.run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`jcp ${name}: error [usage]: ${e.message}\nRun 'jcp ${name} --help'.\n`);
      return 2;
    }
    const c = await coded(e);
    if (c !== undefined) {
      // A coded failure (JcpError, NodeFault, FrostError, IoError, a system error such as ENOENT
      // or ECONNREFUSED mapped to io / connection-failed) is the user's to fix: one line, no
      // stack. JCP_DEBUG=1 shows the stack.
      process.stderr.write(`jcp ${name}: error [${c.code}]: ${c.message}\n`);
      if (process.env['JCP_DEBUG']) process.stderr.write(`${(e as Error).stack}\n`);
      return 1;
    }
    process.stderr.write(`jcp ${name}: internal error: ${(e as Error)?.stack ?? String(e)}\n`);
    return 1;
  }
}
