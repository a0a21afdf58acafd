/** The registry of `jcp` subcommands, in the order `jcp --help` lists them. */
import type { Command } from './command.ts';

/**
 * Every command with its one-line summary (what `jcp --help` lists, equal to the command's own
 * `summary`: a test compares them), loaded lazily so `jcp --help` loads no command module and a
 * broken module names itself.
 */
export const COMMANDS: ReadonlyArray<{ name: string; summary: string; load: () => Promise<Command> }> = [
  {
    name: 'conformance',
    summary: 'run the spec §9 conformance classes (table or --json)',
    load: async () => (await import('./conformance.ts')).command,
  },
  {
    name: 'meter',
    summary: 'probe the energy ladder (§5): the rung in use here and why better ones were skipped',
    load: async () => (await import('./meter.ts')).command,
  },
  {
    name: 'init',
    summary: 'write keys, grants and a node config for one agent, print how to run them',
    load: async () => (await import('./init.ts')).command,
  },
  { name: 'node', summary: 'run an enforcement node (jcp node start ...)', load: async () => (await import('./node.ts')).command },
  {
    name: 'call',
    summary: 'send one signed call to a node and print decision + receipt',
    load: async () => (await import('./call.ts')).command,
  },
  {
    name: 'bridge',
    summary: 'serve MCP (stdio or Streamable HTTP) for an agent, every call decided by a node',
    load: async () => (await import('./bridge.ts')).command,
  },
  {
    name: 'receipts',
    summary: 'verify, replay, attribute, export, repair or snapshot a node receipt log; checkpoint and prove it as a transparency log',
    load: async () => (await import('./receipts.ts')).command,
  },
  {
    name: 'key',
    summary: 'create or show an actor key file (jcp key new --out file)',
    load: async () => (await import('./key.ts')).command,
  },
  {
    name: 'grant',
    summary: 'mint, delegate, revoke, show or steer (checkpoint, amend, continue) grant chains',
    load: async () => (await import('./grant.ts')).command,
  },
  {
    name: 'standing',
    summary: 'author a mint policy for a standing grant, or serve webhooks that fire it (§4.6)',
    load: async () => (await import('./standing.ts')).command,
  },
  {
    name: 'frost',
    summary: 'threshold actors: deal shares, run participants, DKG, threshold signing (§2.2)',
    load: async () => (await import('./frost.ts')).command,
  },
  {
    name: 'cluster',
    summary: 'start or stop a local cluster of nodes on NATS (jcp cluster up --nodes 3)',
    load: async () => (await import('./cluster.ts')).command,
  },
  {
    name: 'channel',
    summary: 'audit a budget channel from its signed statements (jcp channel audit --grant ID)',
    load: async () => (await import('./channel.ts')).command,
  },
  {
    name: 'shards',
    summary: 'mint, rebalance or show sharded budgets (jcp shards mint --split a=40%,...)',
    load: async () => (await import('./shards.ts')).command,
  },
  {
    name: 'chaos',
    summary: 'run the chaos runner: faults vs the overdraft bound (jcp chaos --seed 7)',
    load: async () => (await import('./chaos.ts')).command,
  },
  {
    name: 'vectors',
    summary: 'generate or verify the published conformance vectors',
    load: async () => (await import('./vectors.ts')).command,
  },
  {
    name: 'inspect',
    summary: 'decode any JCP object (hex, file or stdin) and check its signature',
    load: async () => (await import('./inspect.ts')).command,
  },
  {
    name: 'console',
    summary: 'serve the read-only audit console in the browser (decisions, attribution, budgets, checkpoints, receipt inspector)',
    load: async () => (await import('./console.ts')).command,
  },
  {
    name: 'demo',
    summary: 'the main job: a local cluster on real MCP servers, with a report from verified receipts',
    load: async () => (await import('./demo.ts')).command,
  },
];
