/** `jcp channel audit`: the merged ledger of a budget channel from its signed statements (§4.5 profile, C17). */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Did, isContentId, isDid } from '../core/index.ts';
import { auditChannel, channelAuditJson, channelNames, JetStreamBus, natsHostPort, NatsUnavailable } from '../channel/index.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage: jcp channel audit --grant ID [--nats url] [--subject-root jcp] [--budget uj]
                         [--points did,did… | --cluster dir] [--json]

Reads every point's latest signed statement of the channel grant from the statement stream
(leader reads), verifies each, and prints the merged ledger: each point's cumulative spend, the
total, the budget (from --budget, or from the signed grant the points stored on the stream) and,
if the total is over it, the overdraft with the statements that prove it. Statements that fail
verification are listed and never counted. Given the channel's members (--points, or the nodes
of a cluster started with jcp cluster up), a statement by any other key is refused unknown-point;
without them every verifying point is counted and the audit says the members are unknown.

Options:
  --grant ID          the channel grant's content id
  --nats url          NATS (default nats://127.0.0.1:4222)
  --subject-root r    subject root of the cluster (default jcp)
  --budget uj         the grant's budget, if it is not on the stream
  --points list       the channel's points: comma-separated did:key (cluster.channels[].points)
  --cluster dir       the channel's points are the nodes of this cluster (its cluster.json)
  --json              print JSON (amounts as decimal strings, statements as det-CBOR hex)

Exit status: 0 when the audit ran (over budget or not); 1 when NATS cannot be read:
error [nats-unavailable] when no NATS with JetStream answers at the url within 5 s (nothing
listens, or the listener is not NATS), error [channel-read-failed] when the statements cannot be
read; 2 for a usage mistake.`;

/** The statement stream could be reached but not read (or a statement not decoded). Code `channel-read-failed`. */
class ChannelReadError extends Error {
  override readonly name = 'ChannelReadError';
  readonly code = 'channel-read-failed';
}

/**
 * The channel's members from `--points` (comma-separated did:key) or `--cluster dir` (its
 * cluster.json's nodes); undefined when neither is given.
 * @throws UsageError for both at once, a bad did:key, or a folder without a readable cluster.json.
 */
function membersOf(points: string | undefined, cluster: string | undefined): Did[] | undefined {
  if (points !== undefined && cluster !== undefined) throw new UsageError('--points and --cluster: pass one');
  if (points !== undefined) {
    return points.split(',').map((p) => {
      const d = p.trim();
      if (!isDid(d)) throw new UsageError(`--points: not a did:key: ${d}`);
      return d as Did;
    });
  }
  if (cluster === undefined) return undefined;
  const file = join(resolve(cluster), 'cluster.json');
  if (!existsSync(file)) throw new UsageError(`--cluster: no cluster.json in ${cluster}`);
  let nodes: unknown;
  try {
    nodes = (JSON.parse(readFileSync(file, 'utf8')) as { nodes?: unknown }).nodes;
  } catch (e) {
    throw new UsageError(`--cluster: ${file}: ${(e as Error).message}`);
  }
  if (!Array.isArray(nodes)) throw new UsageError(`--cluster: ${file} lists no nodes`);
  return nodes.map((n: { did?: unknown }, i) => {
    if (!isDid(n?.did)) throw new UsageError(`--cluster: ${file}: nodes[${i}].did is not a did:key`);
    return n.did as Did;
  });
}

/** The `jcp channel` command. */
export const command: Command = {
  name: 'channel',
  summary: 'audit a budget channel from its signed statements (jcp channel audit --grant ID)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    if (verb !== 'audit') throw new UsageError(verb === undefined ? 'expected a verb: audit' : `unknown verb '${verb}'`);
    const { values } = parse(
      rest,
      {
        grant: { type: 'string' },
        nats: { type: 'string' },
        'subject-root': { type: 'string' },
        budget: { type: 'string' },
        points: { type: 'string' },
        cluster: { type: 'string' },
        json: { type: 'boolean' },
      },
      false,
    );
    const grant = values.grant;
    if (!isContentId(grant)) throw new UsageError('--grant: expected a grant id (64 lowercase hex)');
    if (values.budget !== undefined && !/^\d+$/.test(values.budget)) throw new UsageError('--budget: expected µJ');
    const members = membersOf(values.points, values.cluster);
    const url = values.nats ?? 'nats://127.0.0.1:4222';
    const bad = url.split(',').find((u) => natsHostPort(u.trim()) === undefined);
    if (bad !== undefined) throw new UsageError(`--nats: expected nats://host:port, got ${bad}`);
    const bus = JetStreamBus.start(url, { names: channelNames(values['subject-root'] ?? 'jcp'), name: 'jcp-audit' });
    try {
      try {
        await bus.ready(5_000);
      } catch (e) {
        throw new NatsUnavailable(`cannot reach NATS with JetStream at ${url}: ${(e as Error).message.replace(/^NATS connection: /, '')}`, {
          cause: e,
        });
      }
      const a = await auditChannel(bus, grant, {
        ...(values.budget === undefined ? {} : { budgetUj: BigInt(values.budget) }),
        ...(members === undefined ? {} : { members }),
      });
      if (values.json) {
        const out = channelAuditJson(a);
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
        return 0;
      }
      process.stdout.write(`channel ${a.grantId}\n`);
      for (const l of a.lines)
        process.stdout.write(`  ${l.point}  seq ${String(l.seq).padStart(14)}  ${String(l.spentUj).padStart(14)} µJ\n`);
      process.stdout.write(`total     ${a.totalUj} µJ over ${a.lines.length} point(s)\n`);
      process.stdout.write(
        `members  ${a.members === undefined ? ' unknown: every verifying point counted (pass --points or --cluster)' : ` ${a.members.length} given; statements by other keys refused`}\n`,
      );
      process.stdout.write(`budget    ${a.budgetUj === undefined ? 'unknown (pass --budget)' : `${a.budgetUj} µJ (${a.budgetSource})`}\n`);
      if (a.overdraftUj !== undefined) {
        if (a.overdraftUj > 0n) {
          process.stdout.write(
            `overdraft ${a.overdraftUj} µJ, proven by the ${a.proof?.statements.length ?? 0} signed statements above (proof ${a.proofVerifies ? 'verifies' : 'DOES NOT verify'})\n`,
          );
        } else process.stdout.write('overdraft none\n');
      }
      for (const r of a.refused) process.stdout.write(`refused   ${r.code} under ${r.pointHash.slice(0, 16)}…: ${r.why}\n`);
      return 0;
    } catch (e) {
      // Printed by cli/main.ts as `jcp channel: error [code]: …`, exit 1.
      if (e instanceof NatsUnavailable) throw e;
      throw new ChannelReadError(`cannot read the statements: ${(e as Error)?.message ?? String(e)}`, { cause: e });
    } finally {
      await bus.close();
    }
  },
};
