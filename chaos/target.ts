/**
 * What the chaos runner drives: one interface over the one-region {@link LocalCluster} and the
 * multi-region launcher, so the runner's steps (agents, faults, heal, check) do not care which.
 * Node indices run over every node of every region; regions are named `a`, `b`, ….
 */
import type { Actor } from '../core/index.ts';
import { LocalCluster } from '../testkit/index.ts';
import { startRegionTarget } from './regions.ts';
import type { ChaosOpts, FaultEvent } from './chaos.ts';

/** One node as the runner sees it. */
export interface ChaosNode {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly steward: Actor;
  /** jcp/1 over TLS (a `tls` run): the CA (PEM) the node's certificate is verified against. */
  readonly tls?: { readonly ca: string };
}

/** A running cluster the chaos runner can hurt and heal. */
export interface ChaosCluster {
  /** NATS urls an auditor reads the statement stream from (the region holding its leader). */
  readonly natsUrls: string[];
  /** NATS over TLS (a `tls` run): the CA file the auditor's NATS client verifies the servers against. */
  readonly natsTls?: { readonly caFile: string };
  /** Restart targets: NATS servers (one region) or regions. */
  readonly natsServers: number;
  readonly regionNames: readonly string[];
  /** Region r's node indices. */
  readonly regionNodes: readonly (readonly number[])[];
  node(i: number): ChaosNode;
  regionOf(i: number): string;
  running(i: number): boolean;
  /** Applies `f`, waits `hold()` (its length), then undoes it. @throws Error when the fault cannot be applied. */
  fault(f: FaultEvent, hold: () => Promise<void>): Promise<void>;
  /** Every node resumed, reconnected, running and ready; every link healed; every NATS server up. */
  healAll(): Promise<void>;
  stopNode(i: number): Promise<void>;
  /** Stops everything (idempotent). */
  stop(): Promise<void>;
}

/** Whether this build can run multi-region chaos (the launcher testkit/regions.ts is in it). */
export const MULTI_REGION_BUILD = true;

/** What the runner needs of its plan to start a cluster. */
export interface ChaosPlanLike {
  readonly seeds: readonly Uint8Array[];
  readonly subjectRoot: string;
  readonly issuer: Actor;
  readonly rootId: string;
  readonly window: bigint;
}

/**
 * Starts the cluster of a run: a {@link LocalCluster} for one region, the supercluster (chaos/regions.ts) for more.
 * @throws RangeError for `tls` on a one-region run.
 */
export async function startChaosCluster(o: ChaosOpts, plan: ChaosPlanLike, dir: string, say: (l: string) => void): Promise<ChaosCluster> {
  if ((o.regions ?? 1) > 1) return await startRegionTarget(o, plan, dir, say);
  if (o.tls) throw new RangeError('tls: only multi-region runs (regions ≥ 2) put every link on TLS');
  const natsServers = o.natsServers ?? 1;
  say(`starting ${o.nodes} nodes (${o.mode} mode, ${natsServers} NATS server${natsServers > 1 ? 's' : ''}) in ${dir}`);
  const cluster = await LocalCluster.start({
    nodes: o.nodes,
    dir,
    proxies: true,
    natsCluster: natsServers,
    seeds: plan.seeds,
    subjectRoot: plan.subjectRoot,
    settleIntervalMs: o.settleIntervalMs ?? 200,
    resources: [{ name: 'chaos', trust_roots: [plan.issuer.did] }],
    channels: o.mode === 'channel' ? [{ grant_id: plan.rootId, window_uj: plan.window.toString() }] : [],
    logLevel: 'warn',
  });
  return localTarget(cluster, natsServers);
}

function localTarget(cluster: LocalCluster, natsServers: number): ChaosCluster {
  const servers = () => {
    const nats = cluster.nats;
    return nats && 'servers' in nats ? nats.servers : nats ? [nats] : [];
  };
  return {
    natsUrls: cluster.natsUrls,
    natsServers,
    regionNames: ['a'],
    regionNodes: [cluster.nodes.map((_, i) => i)],
    node: (i) => cluster.node(i),
    regionOf: () => 'a',
    running: (i) => cluster.running(i),
    async fault(f, hold) {
      if (f.kind === 'kill') {
        await cluster.killNode(f.target);
        await hold();
        await cluster.startNode(f.target);
      } else if (f.kind === 'pause') {
        cluster.pauseNode(f.target);
        await hold();
        cluster.resumeNode(f.target);
      } else if (f.kind === 'partition') {
        cluster.partition(f.target);
        await hold();
        cluster.heal(f.target);
      } else if (f.kind === 'nats-restart') {
        const all = servers();
        const server = all[f.target % all.length];
        if (!server) return;
        if (natsServers > 1) await server.kill();
        else await server.stop();
        await hold();
        await server.start();
      } else throw new Error(`${f.kind} needs more than one region`);
    },
    async healAll() {
      for (let i = 0; i < cluster.nodes.length; i++) {
        cluster.resumeNode(i);
        cluster.heal(i);
      }
      for (const s of servers()) await s.start();
      for (let i = 0; i < cluster.nodes.length; i++) if (!cluster.running(i)) await cluster.startNode(i);
      await Promise.all(cluster.nodes.map((_, i) => cluster.waitReady(i)));
    },
    stopNode: (i) => cluster.stopNode(i),
    stop: () => cluster.stop(),
  };
}
