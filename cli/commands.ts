/** The registry of `jcp` subcommands, in the order `jcp --help` lists them. */
import type { Command } from './command.ts';

/** Loads every command lazily so `jcp --help` stays fast and a broken module names itself. */
export const COMMANDS: ReadonlyArray<{ name: string; load: () => Promise<Command> }> = [
  { name: 'conformance', load: async () => (await import('./conformance.ts')).command },
  { name: 'meter', load: async () => (await import('./meter.ts')).command },
  { name: 'init', load: async () => (await import('./init.ts')).command },
  { name: 'node', load: async () => (await import('./node.ts')).command },
  { name: 'call', load: async () => (await import('./call.ts')).command },
  { name: 'bridge', load: async () => (await import('./bridge.ts')).command },
  { name: 'receipts', load: async () => (await import('./receipts.ts')).command },
  { name: 'key', load: async () => (await import('./key.ts')).command },
  { name: 'grant', load: async () => (await import('./grant.ts')).command },
  { name: 'standing', load: async () => (await import('./standing.ts')).command },
  { name: 'frost', load: async () => (await import('./frost.ts')).command },
  { name: 'cluster', load: async () => (await import('./cluster.ts')).command },
  { name: 'channel', load: async () => (await import('./channel.ts')).command },
  { name: 'shards', load: async () => (await import('./shards.ts')).command },
  { name: 'chaos', load: async () => (await import('./chaos.ts')).command },
  { name: 'vectors', load: async () => (await import('./vectors.ts')).command },
  { name: 'inspect', load: async () => (await import('./inspect.ts')).command },
  { name: 'console', load: async () => (await import('./console.ts')).command },
  { name: 'demo', load: async () => (await import('./demo.ts')).command },
];
