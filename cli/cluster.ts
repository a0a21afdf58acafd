/** `jcp cluster up|down|status`: a local enforcement cluster on loopback (testkit/cluster.ts). */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ClusterState, clusterStatus, LocalCluster, loopbackNatsUrlProblem, stopClusterFromState } from '../testkit/index.ts';
import { type Command, UsageError, parse } from './command.ts';
import { regionsDown, regionsLink, regionsStatus, regionsUp } from './regions.ts';

const help = `Usage:
  jcp cluster up --nodes N [--nats url | --nats-cluster 3] [--dir d] [--channel grant=window_uj]...
                 [--resource name]... [--subject-root jcp]
  jcp cluster up --regions N [--nodes-per-region 2] [--servers-per-region 1|3] [--rtt-ms 40]
                 [--jitter-ms 0] [--dir d] [--channel grant=window_uj]... [--resource name]...
  jcp cluster down [--dir d] [--purge]
  jcp cluster status [--dir d] [--json]
  jcp cluster cut <link> [--dir d]
  jcp cluster heal <link> [--dir d]

up      starts N enforcement nodes ('jcp node start') as background processes on loopback, each
        with its own data folder, steward key, jcp/1 port and metrics port, sharing NATS: the
        url given, or a nats-server started here (a 3-server JetStream cluster with
        --nats-cluster 3). Prints how to reach each node and writes <dir>/cluster.json.
        --channel makes every node a point of that grant's budget channel with that window.
        --regions N (1..4) starts a multi-region cluster instead (docs/regions.md): one NATS
        cluster per region (a, b, ...; 1 or 3 servers, JetStream on) joined by NATS gateways,
        every link between regions through a proxy that delays each direction by rtt/2 (plus
        up to --jitter-ms) and can be cut, and --nodes-per-region nodes in each region. The
        streams live in region a. A launcher process holds the links; it runs in the
        background until 'down' (--foreground: in this process, until Ctrl-C).
down    stops everything 'up' started in <dir> (nodes, then the NATS it started).
        --purge also removes the folder (receipt logs included).
status  prints the nodes and what each one's /healthz says (healthy, unhealthy (status), down:
        no answer), whatever became of the process 'up' started: a node restarted by hand
        ('jcp node start --config <dir>/nK/node.json') is healthy all the same. The pid 'up'
        recorded is shown apart (running or gone). For a multi-region cluster it also shows
        every link between regions, its state (up or cut) and injected round trip, and its
        live health: the gateway connections each server of the source region holds to the
        target (its NATS monitoring /gatewayz: connected, partial, disconnected, unknown) and
        the proxy's own state (cut or open, connections). --json prints the same as JSON.
cut     (multi-region only) cuts a link of a running 'up --regions', named as status prints
        it (a-b, a->b): both directions between the two regions, every gateway (and client)
        connection dropped and new ones refused, until 'heal'.
heal    heals that link: the gateways reconnect through their proxies (within a few seconds).

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
      const regional = await regionsDown(dir);
      if (regional !== undefined) {
        if (values.purge) rmSync(dir, { recursive: true, force: true });
        return regional;
      }
      const state = readState(dir);
      const pids = await stopClusterFromState(state);
      process.stdout.write(`stopped ${pids.length} process(es) of the cluster in ${dir}\n`);
      if (values.purge) rmSync(dir, { recursive: true, force: true });
      else rmSync(join(dir, 'cluster.json'), { force: true });
      return 0;
    }
    if (verb === 'status') {
      const { values } = parse(rest, { dir: { type: 'string' }, json: { type: 'boolean' } }, false);
      const dir = resolve(values.dir ?? DEFAULT_DIR);
      const regional = await regionsStatus(dir, values.json ?? false);
      if (regional !== undefined) return regional;
      const state = readState(dir);
      if (values.json) {
        process.stdout.write(`${JSON.stringify({ type: 'jcp-cluster', nats: state.nats, nodes: await clusterStatus(state) }, null, 2)}\n`);
        return 0;
      }
      process.stdout.write(`NATS ${state.nats.urls}${state.nats.owned ? ' (started by up)' : ''}\n`);
      const notes: string[] = [];
      for (const n of await clusterStatus(state)) {
        const health = n.health === 'unhealthy' ? `unhealthy (${n.httpStatus})` : n.health === 'other' ? 'other node' : n.health;
        const pid = n.pid === undefined ? 'pid unknown' : `pid ${n.pid} ${n.pidRunning ? 'running' : 'gone'}`;
        process.stdout.write(`${n.name.padEnd(4)} ${n.address.padEnd(22)} ${health.padEnd(16)} ${pid.padEnd(18)} ${n.did}\n`);
        if (n.health === 'down') notes.push(`${n.name}: /healthz on ${n.metrics}: ${n.why}`);
        if (n.health === 'other')
          notes.push(`${n.name}: /healthz on ${n.metrics} is answered by a node with steward ${n.answeredBy}, not ${n.did}`);
        if (n.health !== 'down' && n.pid !== undefined && !n.pidRunning) {
          notes.push(
            `${n.name}: answers /healthz, but not as pid ${n.pid} that 'up' started (restarted by hand?): 'jcp cluster down' stops only the recorded pids`,
          );
        }
      }
      for (const line of notes) process.stdout.write(`${line}\n`);
      return 0;
    }
    if (verb === 'cut' || verb === 'heal') {
      const { values, positionals } = parse(rest, { dir: { type: 'string' } }, true);
      if (positionals.length > 1) throw new UsageError(`jcp cluster ${verb}: one link, got ${positionals.join(' ')}`);
      return await regionsLink(verb, positionals[0], resolve(values.dir ?? DEFAULT_DIR));
    }
    throw new UsageError(verb === undefined ? 'expected a verb: up | down | status | cut | heal' : `unknown verb '${verb}'`);
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
      regions: { type: 'string' },
      'nodes-per-region': { type: 'string' },
      'servers-per-region': { type: 'string' },
      'rtt-ms': { type: 'string' },
      'jitter-ms': { type: 'string' },
      foreground: { type: 'boolean' },
    },
    false,
  );
  const regional = ['nodes-per-region', 'servers-per-region', 'rtt-ms', 'jitter-ms', 'foreground'].filter(
    (k) => values[k as keyof typeof values] !== undefined,
  );
  if (values.regions === undefined && regional.length > 0) throw new UsageError(`--${regional[0]} needs --regions`);
  if (values.regions !== undefined) {
    for (const k of ['nodes', 'nats', 'nats-cluster'] as const)
      if (values[k] !== undefined)
        throw new UsageError(`--${k} does not go with --regions (use --nodes-per-region / --servers-per-region)`);
  }
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
    const old = readState(dir) as unknown as { type: string; pid?: number; nodes: ClusterState['nodes'] };
    if (old.type === 'jcp-regions' ? alive(old.pid) : old.nodes.some((n) => alive(n.pid)))
      throw new UsageError(`a cluster is already running in ${dir}; run 'jcp cluster down --dir ${dir}'`);
  }
  const channels = (values.channel ?? []).map((c) => {
    const m = /^([0-9a-f]{64})=(\d+)$/.exec(c);
    if (!m) throw new UsageError(`--channel: expected <grant id>=<window µJ>, got ${c}`);
    return { grant_id: m[1]!, window_uj: m[2]! };
  });
  if (values.regions !== undefined) {
    mkdirSync(dir, { recursive: true });
    const passOn = argv.filter(
      (_, i) => argv[i] !== '--dir' && argv[i - 1] !== '--dir' && !argv[i]!.startsWith('--dir=') && argv[i] !== '--foreground',
    );
    return await regionsUp(passOn, { ...values, regions: values.regions, channel: channels }, dir);
  }
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
  process.stdout.write(
    `state in ${join(dir, 'cluster.json')}; logs in ${dir}/<node>/node.log; stop with 'jcp cluster down --dir ${dir}'\n`,
  );
  return 0;
}
