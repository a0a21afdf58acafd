/** `jcp cluster up|down|status`: a local enforcement cluster on loopback (testkit/cluster.ts). */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ClusterState, clusterStatus, LocalCluster, loopbackNatsUrlProblem, stopClusterFromState } from '../testkit/index.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage:
  jcp cluster up --nodes N [--nats url | --nats-cluster 3] [--dir d] [--channel grant=window_uj]...
                 [--resource name]... [--subject-root jcp]
  jcp cluster down [--dir d] [--purge]
  jcp cluster status [--dir d]

up      starts N enforcement nodes ('jcp node start') as background processes on loopback, each
        with its own data folder, steward key, jcp/1 port and metrics port, sharing NATS: the
        url given, or a nats-server started here (a 3-server JetStream cluster with
        --nats-cluster 3). Prints how to reach each node and writes <dir>/cluster.json.
        --channel makes every node a point of that grant's budget channel with that window.
down    stops everything 'up' started in <dir> (nodes, then the NATS it started).
        --purge also removes the folder (receipt logs included).
status  prints the nodes and what each one's /healthz says (healthy, unhealthy (status), down:
        no answer), whatever became of the process 'up' started: a node restarted by hand
        ('jcp node start --config <dir>/nK/node.json') is healthy all the same. The pid 'up'
        recorded is shown apart (running or gone).

Options:
  --dir d   cluster folder (default .data/cluster)
Only loopback addresses are used.`;

const DEFAULT_DIR = '.data/cluster';

function readState(dir: string): ClusterState {
  const file = join(dir, 'cluster.json');
  if (!existsSync(file)) throw new UsageError(`no cluster in ${dir} (no cluster.json)`);
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The `jcp cluster` command. */
export const command: Command = {
  name: 'cluster',
  summary: 'start or stop a local cluster of nodes on NATS (jcp cluster up --nodes 3)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    if (verb === 'up') return await up(rest);
    if (verb === 'down') {
      const { values } = parse(rest, { dir: { type: 'string' }, purge: { type: 'boolean' } }, false);
      const dir = resolve(values.dir ?? DEFAULT_DIR);
      const state = readState(dir);
      const pids = await stopClusterFromState(state);
      process.stdout.write(`stopped ${pids.length} process(es) of the cluster in ${dir}\n`);
      if (values.purge) rmSync(dir, { recursive: true, force: true });
      else rmSync(join(dir, 'cluster.json'), { force: true });
      return 0;
    }
    if (verb === 'status') {
      const { values } = parse(rest, { dir: { type: 'string' } }, false);
      const dir = resolve(values.dir ?? DEFAULT_DIR);
      const state = readState(dir);
      process.stdout.write(`NATS ${state.nats.urls}${state.nats.owned ? ' (started by up)' : ''}\n`);
      const notes: string[] = [];
      for (const n of await clusterStatus(state)) {
        const health = n.health === 'unhealthy' ? `unhealthy (${n.httpStatus})` : n.health === 'other' ? 'other node' : n.health;
        const pid = n.pid === undefined ? 'pid unknown' : `pid ${n.pid} ${n.pidRunning ? 'running' : 'gone'}`;
        process.stdout.write(`${n.name.padEnd(4)} ${n.address.padEnd(22)} ${health.padEnd(16)} ${pid.padEnd(18)} ${n.did}\n`);
        if (n.health === 'down') notes.push(`${n.name}: /healthz on ${n.metrics}: ${n.why}`);
        if (n.health === 'other') notes.push(`${n.name}: /healthz on ${n.metrics} is answered by a node with steward ${n.answeredBy}, not ${n.did}`);
        if (n.health !== 'down' && n.pid !== undefined && !n.pidRunning) {
          notes.push(`${n.name}: answers /healthz, but not as pid ${n.pid} that 'up' started (restarted by hand?): 'jcp cluster down' stops only the recorded pids`);
        }
      }
      for (const line of notes) process.stdout.write(`${line}\n`);
      return 0;
    }
    throw new UsageError(verb === undefined ? 'expected a verb: up | down | status' : `unknown verb '${verb}'`);
  },
};

async function up(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      nodes: { type: 'string' },
      nats: { type: 'string' },
      'nats-cluster': { type: 'string' },
      dir: { type: 'string' },
      channel: { type: 'string', multiple: true },
      resource: { type: 'string', multiple: true },
      'subject-root': { type: 'string' },
    },
    false,
  );
  const nodes = Number(values.nodes ?? '3');
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 32) throw new UsageError('--nodes: expected an integer in [1, 32]');
  if (values.nats && values['nats-cluster']) throw new UsageError('--nats and --nats-cluster exclude each other');
  const natsCluster = values['nats-cluster'] === undefined ? undefined : Number(values['nats-cluster']);
  if (natsCluster !== undefined && natsCluster !== 3) throw new UsageError('--nats-cluster: only 3 is supported');
  if (values.nats !== undefined) {
    const bad = loopbackNatsUrlProblem(values.nats);
    if (bad !== undefined) throw new UsageError(`--nats: ${bad}`);
  }
  const dir = resolve(values.dir ?? DEFAULT_DIR);
  if (existsSync(join(dir, 'cluster.json'))) {
    const old = readState(dir);
    if (old.nodes.some((n) => alive(n.pid))) throw new UsageError(`a cluster is already running in ${dir}; run 'jcp cluster down --dir ${dir}'`);
  }
  const channels = (values.channel ?? []).map((c) => {
    const m = /^([0-9a-f]{64})=(\d+)$/.exec(c);
    if (!m) throw new UsageError(`--channel: expected <grant id>=<window µJ>, got ${c}`);
    return { grant_id: m[1]!, window_uj: m[2]! };
  });
  const cluster = await LocalCluster.start({
    nodes,
    dir,
    detached: true,
    ...(values.nats ? { nats: values.nats } : {}),
    ...(natsCluster ? { natsCluster } : {}),
    channels,
    ...(values.resource ? { resources: values.resource.map((name) => ({ name })) } : {}),
    ...(values['subject-root'] ? { subjectRoot: values['subject-root'] } : {}),
    logLevel: 'info',
  });
  const state = cluster.state();
  writeFileSync(join(dir, 'cluster.json'), `${JSON.stringify(state, null, 2)}\n`);
  process.stdout.write(`NATS ${state.nats.urls}${state.nats.owned ? ' (started here)' : ''}\n`);
  for (const n of state.nodes) {
    process.stdout.write(`${n.name.padEnd(4)} jcp/1 ${n.address.padEnd(22)} metrics ${n.metrics.padEnd(22)} ${n.did}\n`);
  }
  process.stdout.write(`state in ${join(dir, 'cluster.json')}; logs in ${dir}/<node>/node.log; stop with 'jcp cluster down --dir ${dir}'\n`);
  return 0;
}
