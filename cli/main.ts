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

/** Runs `jcp` with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${await topHelp()}\n`);
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) {
    process.stderr.write(`jcp: unknown command '${name}'. Run 'jcp --help'.\n`);
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
      process.stderr.write(`jcp ${name}: ${e.message}\nRun 'jcp ${name} --help'.\n`);
      return 2;
    }
    if (e instanceof JcpError) {
      process.stderr.write(`jcp ${name}: error [${e.code}]: ${e.message}\n`);
      return 1;
    }
    process.stderr.write(`jcp ${name}: ${(e as Error)?.stack ?? String(e)}\n`);
    return 1;
  }
}
