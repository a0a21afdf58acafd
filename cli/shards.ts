/** `jcp shards mint|rebalance|show`: sharded budgets (§4.5 baseline, C11) from the command line. */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Did, ErrorCodes, grantId, JcpError } from '../core/index.ts';
import { channelNames, JetStreamBus } from '../channel/index.ts';
import type { ClusterState } from '../testkit/index.ts';
import { readKeyFile } from '../node/index.ts';
import {
  assignShards,
  mintShardSet,
  parseSplit,
  readManifest,
  rebalance,
  ShardAssignmentStream,
  type ShardManifest,
  writeManifest,
} from '../shards/index.ts';
import { readChainFile, writeChainFile } from '../client/index.ts';
import { didArg } from './args.ts';
import { type Command, UsageError, parse } from './command.ts';
import { makeDirs } from '../io/index.ts';

const help = `Usage:
  jcp shards mint --parent chain.json --key holder.key --split a=40%,b=30%,c=30%
                  [--subject did|keyfile] [--cluster dir [--subject-root jcp] [--timeout ms]] [--out dir]
  jcp shards rebalance --shards dir --key holder.key [--split a=50%,b=50%] [--nats url]
                  [--cluster dir | --points did,did,...] [--subject-root jcp] [--timeout ms]
  jcp shards show --shards dir

mint       mints one sibling child of the parent chain's leaf per slice (§4.5), as the leaf's
           holder, refusing slices that sum past the parent (C11). Writes <out>/shards.json and
           one chain file per shard, <out>/shard-<name>.json, for the agent that uses it; refuses
           an <out> that already holds a manifest or one of these chain files. With --cluster,
           slices go to the cluster's nodes in order: the holder signs the assignment, stores it
           on the shard assignment stream, and writes the files only once every node has
           acknowledged it; from then on each node refuses every shard but its own.
rebalance  revokes every live shard and broadcasts the revocations on the revocation stream;
           waits until every node has closed every shard (a signed close record of its final
           spend); then re-issues from what is left (budget − spent), so no µJ is created, and
           assigns the new shards to their nodes as mint does. If the shards spent more than the
           parent (unbound shards spent at several nodes), nothing is re-issued: the manifest
           records the spend and the command fails [overspent].
show       prints the manifest: live shards, closed shards and µJ consumed.

--subject  who holds the shards (default: the holder itself).
--out/--shards default: .data/shards`;

const DEFAULT_DIR = '.data/shards';
const rng = (n: number) => new Uint8Array(randomBytes(n));

function clusterState(dir: string | undefined): ClusterState | undefined {
  if (dir === undefined) return undefined;
  const file = join(resolve(dir), 'cluster.json');
  if (!existsSync(file)) throw new UsageError(`--cluster: no cluster.json in ${dir}`);
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
}

function writeShardFiles(dir: string, m: ShardManifest): void {
  makeDirs(dir, 0o777);
  writeManifest(join(dir, 'shards.json'), m);
  for (const s of m.shards) writeChainFile(join(dir, `shard-${s.name}.json`), [...m.parentChain, s.grant], { overwrite: true });
}

/** `mint` never overwrites: a manifest holds the consumed record and the history of closed shards. */
function refuseExisting(dir: string, names: readonly string[]): void {
  for (const f of ['shards.json', ...names.map((n) => `shard-${n}.json`)]) {
    const file = join(dir, f);
    if (existsSync(file)) {
      const what = f === 'shards.json' ? 'a shard manifest (use rebalance to re-issue a set)' : 'a chain file';
      throw new JcpError(ErrorCodes.REFUSED, `${file} exists: refusing to overwrite ${what}`, { file });
    }
  }
}

/** One error line in the documented format, `jcp shards: error [code]: message`; exit code 1. */
function fail(code: string, message: string, details: readonly string[] = []): number {
  process.stderr.write(`jcp shards: error [${code}]: ${message}\n`);
  for (const d of details) process.stderr.write(`  ${d}\n`);
  return 1;
}

/** Stream replicas the cluster's nodes use: 3 on a NATS cluster of 3 or more servers. */
const replicasOf = (nats: string) => (nats.split(',').filter((u) => u.trim()).length >= 3 ? 3 : 1);

/**
 * Assigns `m`'s live shards to their nodes over NATS and waits for every point to acknowledge
 * (shards/assign.ts). Returns undefined when done, or an exit code after printing the error.
 */
async function assignOrFail(
  m: ShardManifest,
  holder: ReturnType<typeof readKeyFile>,
  bus: JetStreamBus,
  root: string,
  replicas: number,
  points: readonly Did[],
  timeoutMs: number,
): Promise<number | undefined> {
  const transport = new ShardAssignmentStream(bus.connection!, { root, replicas });
  const r = await assignShards({ manifest: m, holder, transport, points, timeoutMs });
  if (r.ok) return undefined;
  return fail(
    r.error.code,
    r.error.why,
    'missing' in r.error ? r.error.missing.map((p) => `waiting for ${p} to acknowledge the assignment`) : [],
  );
}

function timeoutOf(v: string | undefined): number {
  const ms = Number(v ?? '15000');
  if (!Number.isSafeInteger(ms) || ms < 0) throw new UsageError('--timeout: expected milliseconds');
  return ms;
}

function printManifest(m: ShardManifest): void {
  const parent = m.parentChain[m.parentChain.length - 1]!;
  process.stdout.write(
    `parent ${grantId(parent.grant)} budget ${parent.grant.budget_uj} µJ, generation ${m.generation}, consumed ${m.consumedUj} µJ\n`,
  );
  for (const s of m.shards) {
    const where = s.point ? ` → ${s.point.address ?? ''} ${s.point.did}` : '';
    process.stdout.write(
      `  live   ${s.name.padEnd(8)} ${String(s.grant.grant.budget_uj).padStart(12)} µJ  ${grantId(s.grant.grant)}${where}\n`,
    );
  }
  for (const c of m.closed) {
    process.stdout.write(
      `  closed ${c.name.padEnd(8)} ${String(c.budgetUj).padStart(12)} µJ  spent ${c.spentUj} µJ  (generation ${c.generation}) ${c.id}\n`,
    );
  }
}

/** The `jcp shards` command. */
export const command: Command = {
  name: 'shards',
  summary: 'mint, rebalance or show sharded budgets (jcp shards mint --split a=40%,...)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    if (verb === 'mint') return await mint(rest);
    if (verb === 'rebalance') return await rebalanceCmd(rest);
    if (verb === 'show') {
      const { values } = parse(rest, { shards: { type: 'string' } }, false);
      printManifest(readManifest(join(resolve(values.shards ?? DEFAULT_DIR), 'shards.json')));
      return 0;
    }
    throw new UsageError(verb === undefined ? 'expected a verb: mint | rebalance | show' : `unknown verb '${verb}'`);
  },
};

async function mint(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      parent: { type: 'string' },
      key: { type: 'string' },
      split: { type: 'string' },
      subject: { type: 'string' },
      cluster: { type: 'string' },
      out: { type: 'string' },
      'subject-root': { type: 'string' },
      timeout: { type: 'string' },
    },
    false,
  );
  if (!values.parent || !values.key || !values.split) throw new UsageError('--parent, --key and --split are required');
  const timeoutMs = timeoutOf(values.timeout);
  const chain = readChainFile(values.parent);
  const holder = readKeyFile(values.key);
  const split = parseSplit(values.split);
  const state = clusterState(values.cluster);
  const points: Record<string, { did: Did; address?: string }> = {};
  if (state) {
    if (split.length > state.nodes.length) throw new UsageError(`--split has ${split.length} slices for ${state.nodes.length} nodes`);
    split.forEach((s, i) => {
      const n = state.nodes[i]!;
      points[s.name] = { did: n.did as Did, address: n.address };
    });
  }
  const subject = (values.subject ? didArg(values.subject) : holder.did) as Did;
  const dir = resolve(values.out ?? DEFAULT_DIR);
  refuseExisting(
    dir,
    split.map((s) => s.name),
  );
  const r = mintShardSet(chain, holder, split, { subject, points, rng });
  if (!r.ok) return fail(r.error.code, r.error.why);
  const m: ShardManifest = { parentChain: chain, generation: 1, consumedUj: 0n, shards: r.value, closed: [] };
  if (state) {
    // Bind each shard to its node before any agent can hold it (§4.5 "one per enforcement point").
    const bus = JetStreamBus.start(state.nats.urls, { names: channelNames(values['subject-root'] ?? 'jcp'), name: 'jcp-shards' });
    try {
      await bus.ready(10_000);
      const points = state.nodes.map((n) => n.did as Did);
      const code = await assignOrFail(m, holder, bus, values['subject-root'] ?? 'jcp', replicasOf(state.nats.urls), points, timeoutMs);
      if (code !== undefined) return code;
    } finally {
      await bus.close();
    }
  }
  makeDirs(dir, 0o777);
  writeManifest(join(dir, 'shards.json'), m);
  for (const s of m.shards) writeChainFile(join(dir, `shard-${s.name}.json`), [...m.parentChain, s.grant]);
  printManifest(m);
  process.stdout.write(`wrote ${join(dir, 'shards.json')} and ${m.shards.length} chain file(s)\n`);
  if (state) process.stdout.write(`assigned: each of the ${state.nodes.length} node(s) refuses every shard but its own\n`);
  return 0;
}

async function rebalanceCmd(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      shards: { type: 'string' },
      key: { type: 'string' },
      split: { type: 'string' },
      nats: { type: 'string' },
      cluster: { type: 'string' },
      points: { type: 'string' },
      'subject-root': { type: 'string' },
      timeout: { type: 'string' },
    },
    false,
  );
  if (!values.key) throw new UsageError('--key is required');
  const dir = resolve(values.shards ?? DEFAULT_DIR);
  const manifest = readManifest(join(dir, 'shards.json'));
  const holder = readKeyFile(values.key);
  const state = clusterState(values.cluster);
  let points: Did[];
  if (state) points = state.nodes.map((n) => n.did as Did);
  else if (values.points) points = values.points.split(',').map((p) => didArg(p.trim()) as Did);
  else points = [...new Set(manifest.shards.filter((s) => s.point).map((s) => s.point!.did))];
  if (points.length === 0) throw new UsageError('no points to wait for: pass --cluster dir or --points');
  const timeoutMs = timeoutOf(values.timeout);
  const nats = values.nats ?? state?.nats.urls ?? 'nats://127.0.0.1:4222';
  const root = values['subject-root'] ?? 'jcp';
  const bus = JetStreamBus.start(nats, { names: channelNames(root), name: 'jcp-shards' });
  try {
    await bus.ready(10_000);
    const r = await rebalance({
      manifest,
      holder,
      transport: bus,
      points,
      ...(values.split ? { split: parseSplit(values.split) } : {}),
      rng,
      timeoutMs,
    });
    if (!r.ok) {
      const missing = 'missing' in r.error ? r.error.missing.map((m) => `waiting for ${m.point} to close ${m.shard}`) : [];
      return fail(r.error.code, `rebalance stopped: ${r.error.why}`, missing);
    }
    const next = r.value.manifest;
    if (r.value.overspentUj > 0n) {
      // The spend is evidence: record it, re-issue nothing.
      writeShardFiles(dir, next);
      printManifest(next);
      const budget = next.parentChain[next.parentChain.length - 1]!.grant.budget_uj;
      return fail(
        'overspent',
        `the closed shards spent ${next.consumedUj} µJ on a ${budget} µJ parent (${r.value.overspentUj} µJ over): they were not bound to one node each; nothing re-issued`,
      );
    }
    if (next.shards.length > 0 && next.shards.every((s) => s.point !== undefined)) {
      const code = await assignOrFail(next, holder, bus, root, replicasOf(nats), points, timeoutMs);
      if (code !== undefined) return code;
    }
    writeShardFiles(dir, next);
    printManifest(next);
    process.stdout.write(`revoked ${r.value.revocations.length} shard(s); ${r.value.leftUj} µJ left to re-issue\n`);
    return 0;
  } finally {
    await bus.close();
  }
}
