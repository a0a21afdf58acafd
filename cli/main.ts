/**
 * Entry point of the `jcp` command: dispatches to a subcommand, prints help, maps errors to
 * stderr and a non-zero exit code (2 for usage errors, 1 for failures).
 */
import { JcpError } from '../core/errors.ts';
import { type Command, UsageError } from './command.ts';
import { COMMANDS } from './commands.ts';

async function topHelp(): Promise<string> {
  const lines = ['Usage: jcp <command> [options]', '', 'Commands:'];
  for (const c of COMMANDS) {
    const cmd = await c.load();
    lines.push(`  ${cmd.name.padEnd(14)}${cmd.summary}`);
  }
  lines.push('', 'Run `jcp <command> --help` for the options of one command.');
  return lines.join('\n');
}

/** The stable code of a coded error (ours, or Node's system errors), else undefined. */
function errorCode(e: unknown): string | undefined {
  if (e instanceof JcpError) return e.code;
  if (typeof e !== 'object' || e === null || !(e instanceof Error)) return undefined;
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && code.length > 0 ? code : undefined;
}

/** Runs `jcp` with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${await topHelp()}\n`);
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
    const code = errorCode(e);
    if (code !== undefined) {
      // A coded failure (JcpError, NodeFault, FrostError, a system error such as ENOENT or
      // ECONNREFUSED) is the user's to fix: one line, no stack. JCP_DEBUG=1 shows the stack.
      process.stderr.write(`jcp ${name}: error [${code}]: ${(e as Error).message}\n`);
      if (process.env['JCP_DEBUG']) process.stderr.write(`${(e as Error).stack}\n`);
      return 1;
    }
    process.stderr.write(`jcp ${name}: internal error: ${(e as Error)?.stack ?? String(e)}\n`);
    return 1;
  }
}
