/** The registry of `jcp` subcommands, in the order `jcp --help` lists them. */
import type { Command } from './command.ts';

/** Loads every command lazily so `jcp --help` stays fast and a broken module names itself. */
export const COMMANDS: ReadonlyArray<{ name: string; load: () => Promise<Command> }> = [
  { name: 'conformance', load: async () => (await import('./conformance.ts')).command },
];
