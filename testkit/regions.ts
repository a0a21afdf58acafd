/**
 * A multi-region enforcement cluster on loopback (docs/regions.md): NATS's own multi-region shape,
 * a supercluster. Each region (`a`, `b`, `c`, `d`) is one NATS cluster (JetStream on; 1 server,
 * or 3 joined by routes) with its own enforcement nodes, which connect only to their region's
 * servers. The regions are joined by NATS gateways, and every gateway connection runs through a
 * {@link TcpProxy} that delays each direction by `rttMs / 2` (plus jitter) and can cut the link:
 * a wide-area network between regions, without privileges.
 *
 * Every server advertises a gateway address nobody listens on, so the gateway urls the servers
 * gossip never lead around a proxy: a server reconnects only through the proxy it was given.
 *
 * The channel statement, revocation and shard assignment streams are created before the nodes
 * start, placed in the home region (`a`) with the home region's replica count; the nodes find
 * them there, and are configured (`cluster.stream_cluster`) to create any missing one there too
 * (docs/regions.md "Where the streams live").
 *
 * Only loopback addresses are used. Used by `jcp cluster up --regions`, the chaos runner, the bench
 * and the tests.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Actor, actorFromSeed } from '../core/index.ts';
import { channelNames, streamConfigs } from '../channel/index.ts';
import { type ClusterNode, type ClusterOpts, LocalCluster } from './cluster.ts';
import { NatsServer } from './nats.ts';
import { freePort } from './procs.ts';
import { TcpProxy } from './proxy.ts';
import { shardStreamConfig } from '../shards/index.ts';

/** The region names, in order. */
export const REGION_NAMES = ['a', 'b', 'c', 'd'] as const;

/**
 * TLS material for the NATS links (client, route and gateway connections), PEM file paths: a CA
 * every server and client trusts, and one certificate (with its key) valid for 127.0.0.1 that
 * every server presents. Servers verify the peer certificate on routes and gateways.
 */
export interface TlsMaterial {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/** Options of {@link startRegions}. Times in milliseconds. */
export interface RegionOpts {
  /** Number of regions, 1..4 (named `a`..`d`). */
  readonly regions: number;
  /** Enforcement nodes per region (0 allowed: NATS only). */
  readonly nodesPerRegion: number;
  /** NATS servers per region: 1, or 3 joined by routes (streams then R3). */
  readonly serversPerRegion: 1 | 3;
  /** Injected round-trip time between two regions: each direction of a link is delayed `rttMs / 2`. */
  readonly rttMs: number;
  /** Extra one-way delay, uniform in `[0, jitterMs)`, per chunk (order kept). Default 0. */
  readonly jitterMs?: number;
  /** Root folder (`nats-<region>/s<k>`, `<region>/n<k>`); a temp folder by default (removed on stop). */
  readonly dir?: string;
  /** TLS on every NATS link (client, route, gateway). The nodes' NATS TLS is set with `nodeConfig`. */
  readonly tls?: TlsMaterial;
  /** Node config keys set over the launcher's for node `i` of `region` (a `cluster` object is merged key by key). */
  readonly nodeConfig?: (region: string, i: number) => Record<string, unknown>;
  /** Channel grants every node of every region serves (every node is a point), window per node in µJ. */
  readonly channels?: ClusterOpts['channels'];
  /** Node config `resources`. */
  readonly resources?: ClusterOpts['resources'];
  /** Subject root of the streams (default `jcp`). */
  readonly subjectRoot?: string;
  readonly settleIntervalMs?: number;
  readonly meter?: ClusterOpts['meter'];
  readonly logLevel?: string;
  /** Put each node behind its own proxy to its region's NATS (node partitions), as {@link ClusterOpts.proxies}. */
  readonly nodeProxies?: boolean;
  /** Steward seeds, region by region then node by node; random by default. */
  readonly seeds?: readonly Uint8Array[];
}

/** One enforcement node of a region. `proc` is the launcher's node (child process, pid, ports, proxies). */
export interface RegionNode {
  /** `<region><k>`, e.g. `b2`. */
  readonly id: string;
  readonly region: string;
  /** Index of the node in its region's {@link LocalCluster} (0-based). */
  readonly index: number;
  /** jcp/1 port on 127.0.0.1. */
  readonly port: number;
  /** The jcp/1 address as `tcp://127.0.0.1:<port>`. */
  readonly url: string;
  readonly metricsPort: number;
  readonly steward: Actor;
  readonly proc: ClusterNode;
}

/** One region: a NATS cluster and its nodes. */
export interface Region {
  readonly name: string;
  /** The region's client urls (what its nodes use). */
  readonly natsUrls: string[];
  readonly servers: NatsServer[];
  readonly nodes: RegionNode[];
  /** The region's nodes as a {@link LocalCluster} (kill, pause, partition, restart one node). */
  readonly cluster: LocalCluster;
}

/** One direction of a link between regions. `proxy` is the first of `proxies` (one per target server). */
export interface RegionLink {
  readonly from: string;
  readonly to: string;
  /** `gateway`: the NATS gateway connections from `from`'s servers to `to`'s; `client`: a client connection from `from` into `to` ({@link RegionCluster.clientLink}). */
  readonly kind: 'gateway' | 'client';
  readonly proxy: TcpProxy;
  readonly proxies: readonly TcpProxy[];
}

/** A link's state in {@link RegionCluster.status}: `rttMs` is the injected round trip (2 × one-way delay). */
export interface LinkStatus {
  readonly from: string;
  readonly to: string;
  readonly kind: 'gateway' | 'client';
  /**
   * `up` or `cut` as the launcher reports it. `jcp cluster status` without an answering launcher
   * says `down` when the launcher is gone (its proxies carried the link, so nothing does now) and
   * `unknown` when it runs but does not answer; the state recorded at start is then in `recorded_state`.
   */
  readonly state: 'up' | 'cut' | 'down' | 'unknown';
  /** Only in `jcp cluster status` when the launcher did not answer: the state recorded at start. */
  readonly recorded_state?: 'up' | 'cut' | 'down' | 'unknown';
  readonly rttMs: number;
  readonly jitterMs: number;
  /** The link's name for `jcp cluster cut|heal` (`<from>-<to>`; a cut acts on both directions). Absent in a state file of an older launcher. */
  readonly name?: string;
  /** The launcher's proxies of this link: `cut` as they are set, `open` their forwarded connections now. */
  readonly proxy?: { readonly cut: boolean; readonly open: number };
  /**
   * Live health, only in `jcp cluster status` ({@link liveLinks}): for a gateway link, whether every
   * server of `from` has its outbound gateway connection to `to` (its NATS monitoring `/gatewayz`):
   * `connected` (all), `partial` (some), `disconnected` (none), `unknown` (no server answered);
   * for a client link, `connected` while the proxy holds a connection, `idle` when it holds none
   * and is not cut, `disconnected` when cut.
   */
  readonly live?: 'connected' | 'partial' | 'disconnected' | 'idle' | 'unknown';
  /** With `live` on a gateway link: servers of `from` with a gateway connection to `to`, of those that answered `/gatewayz`, and of all. */
  readonly gateway_connections?: { readonly connected: number; readonly answered: number; readonly servers: number };
}

/** {@link RegionCluster.status}: every region (servers running, nodes) and every link. JSON-safe. */
export interface RegionStatus {
  readonly type: 'jcp-regions';
  readonly home: string;
  readonly regions: {
    readonly name: string;
    readonly nats_urls: string[];
    readonly servers: {
      readonly name: string;
      readonly url: string;
      readonly pid: number | undefined;
      readonly running: boolean;
      /** The server's NATS monitoring address `127.0.0.1:<port>` (`/healthz`, `/gatewayz`). Absent in an older launcher's state file. */
      readonly monitor?: string;
    }[];
    readonly nodes: {
      readonly id: string;
      readonly address: string;
      readonly metrics: string;
      readonly did: string;
      readonly pid: number | undefined;
    }[];
  }[];
  readonly links: LinkStatus[];
}

/** A running multi-region cluster. See the module docs. */
export interface RegionCluster {
  readonly dir: string;
  /** The region the streams live in (`a`). */
  readonly home: string;
  readonly regions: Region[];
  readonly links: RegionLink[];
  /** The region named `name`. @throws RangeError */
  region(name: string): Region;
  /** Cuts both directions of every link between regions `a` and `b`. @throws RangeError for an unknown or equal pair. */
  cut(a: string, b: string): void;
  /** Heals both directions of every link between `a` and `b`. */
  heal(a: string, b: string): void;
  /** Cuts every link of `region` (to and from every other region). */
  isolate(region: string): void;
  /** Heals every link of `region`. */
  rejoin(region: string): void;
  /** Restarts every NATS server of `region` on the same ports and store (SIGKILL first when `kill`), waiting until each is healthy. */
  restartNats(region: string, opts?: { kill?: boolean }): Promise<void>;
  /**
   * A client link from region `from` to a TCP service in region `to` (a Redis in the home
   * region, a NATS server of another region): a delayed, cuttable proxy to `127.0.0.1:targetPort`,
   * listed in {@link links} and cut with its regions.
   */
  clientLink(from: string, to: string, targetPort: number): Promise<RegionLink>;
  status(): RegionStatus;
  /**
   * Serves {@link status} and the link controls over HTTP on 127.0.0.1 (for `jcp cluster status`):
   * `GET /status`; `POST /cut?a=&b=`, `/heal?a=&b=`, `/isolate?region=`, `/rejoin?region=`, `/stop`.
   * @returns its base url and a close function.
   */
  serveControl(onStop?: () => void): Promise<{ url: string; close: () => Promise<void> }>;
  /**
   * Writes `<dir>/cluster.json` for `jcp cluster status|down`: {@link status} plus the control url
   * ({@link serveControl}) and the pid of the process holding the proxies.
   * @returns the file's path.
   */
  writeState(controlUrl: string): string;
  /** Stops every node, proxy and NATS server; removes a temp folder. */
  stop(): Promise<void>;
}

/** `<dir>/cluster.json` of a multi-region cluster ({@link RegionCluster.writeState}). */
export interface RegionState extends RegionStatus {
  readonly dir: string;
  /** Base url of the launcher's control endpoint. */
  readonly control: string;
  /** Pid of the launcher (it holds the proxies: the links die with it). */
  readonly pid: number;
}

const DEAD_PORT = 1;

/** The ports of one NATS server of a region. */
interface ServerPorts {
  readonly client: number;
  readonly http: number;
  readonly route: number;
  readonly gateway: number;
}

/** What the start steps share: the folder, the region names, the link delay and what was made so far (to stop on failure). */
interface Launch {
  readonly opts: RegionOpts;
  readonly dir: string;
  readonly names: readonly string[];
  readonly delay: { delayMs: number; jitterMs: number };
  readonly root: string;
  readonly links: RegionLink[];
  readonly servers: Map<string, NatsServer[]>;
  readonly regions: Region[];
}

/** @throws RangeError for options of {@link startRegions} out of range. */
function checkRegionOpts(opts: RegionOpts): void {
  if (!Number.isInteger(opts.regions) || opts.regions < 1 || opts.regions > REGION_NAMES.length)
    throw new RangeError(`regions: expected 1..${REGION_NAMES.length}, got ${opts.regions}`);
  if (!Number.isInteger(opts.nodesPerRegion) || opts.nodesPerRegion < 0 || opts.nodesPerRegion > 16)
    throw new RangeError(`nodesPerRegion: expected 0..16, got ${opts.nodesPerRegion}`);
  if (opts.serversPerRegion !== 1 && opts.serversPerRegion !== 3)
    throw new RangeError(`serversPerRegion: expected 1 or 3, got ${opts.serversPerRegion}`);
  for (const [k, v] of [
    ['rttMs', opts.rttMs],
    ['jitterMs', opts.jitterMs ?? 0],
  ] as const) {
    if (!Number.isFinite(v) || v < 0 || v > 10_000) throw new RangeError(`${k}: expected 0..10000 ms, got ${v}`);
  }
}

/**
 * Starts a multi-region cluster: every region's NATS servers (all at once, then waits until each
 * is healthy: the supercluster's JetStream meta group has a leader), the streams in the home
 * region, then every region's nodes.
 * @throws RangeError for options out of range; Error if a server or node does not become ready
 * (everything started is stopped first).
 */
export async function startRegions(opts: RegionOpts): Promise<RegionCluster> {
  checkRegionOpts(opts);
  const ownsDir = opts.dir === undefined;
  const dir = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), 'jcp-regions-')));
  mkdirSync(dir, { recursive: true });
  const l: Launch = {
    opts,
    dir,
    names: REGION_NAMES.slice(0, opts.regions),
    delay: { delayMs: opts.rttMs / 2, jitterMs: opts.jitterMs ?? 0 },
    root: opts.subjectRoot ?? 'jcp',
    links: [],
    servers: new Map(),
    regions: [],
  };
  const stopAll = async () => {
    await Promise.all(l.regions.map((r) => r.cluster.stop()));
    for (const link of l.links) for (const p of link.proxies) await p.close();
    await Promise.all([...l.servers.values()].flat().map((s) => s.dispose()));
    if (ownsDir) rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Ports first: every server's gateway port must be known to build the proxies.
    const ports = new Map<string, ServerPorts[]>();
    for (const r of l.names) {
      const list: ServerPorts[] = [];
      for (let k = 0; k < opts.serversPerRegion; k++)
        list.push({ client: await freePort(), http: await freePort(), route: await freePort(), gateway: await freePort() });
      ports.set(r, list);
    }
    await startGatewayProxies(l, ports);
    for (const r of l.names) l.servers.set(r, await startRegionServers(l, r, ports.get(r)!));
    await Promise.all([...l.servers.values()].flat().map((s) => s.ready(60_000)));
    await createHomeStreams(l.servers.get(l.names[0]!)!, l.root, opts.serversPerRegion, l.names[0]!, opts.tls);
    // Every node of every region is a point of every channel: the stewards are known up front.
    const total = l.names.length * opts.nodesPerRegion;
    const stewards = Array.from({ length: total }, (_, i) => actorFromSeed(opts.seeds?.[i] ?? crypto.getRandomValues(new Uint8Array(32))));
    for (const [ri, r] of l.names.entries()) l.regions.push(await startRegionNodes(l, r, ri, stewards));
  } catch (e) {
    await stopAll();
    throw e;
  }
  return makeCluster(dir, l.names[0]!, l.regions, l.links, l.delay, stopAll);
}

/** One proxy per (source region, target server): the source's servers dial the target through it. Pushed to `l.links`. */
async function startGatewayProxies(l: Launch, ports: ReadonlyMap<string, ServerPorts[]>): Promise<void> {
  for (const from of l.names) {
    for (const to of l.names) {
      if (from === to) continue;
      const proxies: TcpProxy[] = [];
      for (const p of ports.get(to)!) proxies.push(await TcpProxy.start(p.gateway, '127.0.0.1', 0, l.delay));
      l.links.push({ from, to, kind: 'gateway', proxy: proxies[0]!, proxies });
    }
  }
}

/** Starts (without waiting for readiness) the servers of region `r`: routes to each other, gateways through the proxies. */
async function startRegionServers(l: Launch, r: string, rp: readonly ServerPorts[]): Promise<NatsServer[]> {
  const list: NatsServer[] = [];
  for (const [k, p] of rp.entries()) {
    list.push(
      await NatsServer.start(
        {
          name: `${r}-s${k + 1}`,
          dir: join(l.dir, `nats-${r}`, `s${k + 1}`),
          port: p.client,
          httpPort: p.http,
          cluster: { name: r, port: p.route, routes: rp.map((x) => x.route) },
          gateway: {
            name: r,
            port: p.gateway,
            advertise: `127.0.0.1:${DEAD_PORT}`,
            remotes: l.names
              .filter((o) => o !== r)
              .map((o) => ({
                name: o,
                urls: l.links.find((x) => x.from === r && x.to === o)!.proxies.map((x) => `nats://127.0.0.1:${x.port}`),
              })),
          },
          ...(l.opts.tls ? { tls: l.opts.tls } : {}),
        },
        false,
      ),
    );
  }
  return list;
}

/** Starts the nodes of region `r` (the `ri`-th), on its servers, as points of every channel (`stewards`: every node of every region). */
async function startRegionNodes(l: Launch, r: string, ri: number, stewards: readonly Actor[]): Promise<Region> {
  const { opts } = l;
  const replicas = opts.serversPerRegion;
  const list = l.servers.get(r)!;
  const urls = list.map((s) => s.url);
  const seeds = stewards.slice(ri * opts.nodesPerRegion, (ri + 1) * opts.nodesPerRegion).map((a) => a.key.seed);
  const cluster = await LocalCluster.start({
    nodes: opts.nodesPerRegion,
    dir: join(l.dir, r),
    nats: urls.join(','),
    points: stewards.map((a) => a.did),
    seeds,
    ...(opts.nodeProxies ? { proxies: true } : {}),
    ...(opts.channels ? { channels: opts.channels } : {}),
    ...(opts.resources ? { resources: opts.resources } : {}),
    subjectRoot: l.root,
    ...(opts.settleIntervalMs !== undefined ? { settleIntervalMs: opts.settleIntervalMs } : {}),
    ...(opts.meter ? { meter: opts.meter } : {}),
    ...(opts.logLevel ? { logLevel: opts.logLevel } : {}),
    nodeConfig: (i) => {
      const patch = opts.nodeConfig?.(r, i) ?? {};
      const c = (patch['cluster'] ?? {}) as Record<string, unknown>;
      return { ...patch, cluster: { replicas, stream_cluster: l.names[0]!, ...c } };
    },
  });
  return {
    name: r,
    natsUrls: urls,
    servers: list,
    cluster,
    nodes: cluster.nodes.map((n) => ({
      id: `${r}${n.index + 1}`,
      region: r,
      index: n.index,
      port: n.port,
      url: `tcp://127.0.0.1:${n.port}`,
      metricsPort: n.metricsPort,
      steward: n.steward,
      proc: n,
    })),
  };
}

/** Creates (or finds) the statement, revocation and shard streams, placed in cluster `home`. */
async function createHomeStreams(
  home: NatsServer[],
  root: string,
  replicas: number,
  cluster: string,
  tls: TlsMaterial | undefined,
): Promise<void> {
  const nc = await connect({ servers: home.map((s) => s.url), ...(tls ? { tls: { caFile: tls.caFile } } : {}) });
  try {
    const jsm = await jetstreamManager(nc);
    const cfgs = streamConfigs(channelNames(root), replicas, { cluster });
    for (const cfg of [cfgs.statements, cfgs.revocations, shardStreamConfig(root, replicas, { cluster })]) {
      try {
        await jsm.streams.info(cfg.name);
      } catch {
        await jsm.streams.add(cfg);
      }
    }
  } finally {
    await nc.close();
  }
}

function pairCheck(names: readonly string[], a: string, b: string): void {
  if (!names.includes(a) || !names.includes(b))
    throw new RangeError(`no region ${names.includes(a) ? b : a} (regions: ${names.join(', ')})`);
  if (a === b) throw new RangeError(`a link joins two regions, got ${a} twice`);
}

/** {@link RegionCluster.status} of these regions and links. */
function regionStatus(home: string, regions: readonly Region[], links: readonly RegionLink[]): RegionStatus {
  return {
    type: 'jcp-regions',
    home,
    regions: regions.map((r) => ({
      name: r.name,
      nats_urls: r.natsUrls,
      servers: r.servers.map((s) => ({ name: s.name, url: s.url, pid: s.pid, running: s.running, monitor: `127.0.0.1:${s.httpPort}` })),
      nodes: r.nodes.map((n) => ({
        id: n.id,
        address: `127.0.0.1:${n.port}`,
        metrics: `127.0.0.1:${n.metricsPort}`,
        did: n.steward.did,
        pid: n.proc.pid,
      })),
    })),
    links: links.map((l) => {
      const d = l.proxy.delay;
      return {
        from: l.from,
        to: l.to,
        kind: l.kind,
        state: l.proxies.some((p) => p.isCut) ? 'cut' : 'up',
        rttMs: d.delayMs * 2,
        jitterMs: d.jitterMs,
        name: `${l.from}-${l.to}`,
        proxy: { cut: l.proxies.some((p) => p.isCut), open: l.proxies.reduce((n, p) => n + p.open, 0) },
      };
    }),
  };
}

/** {@link RegionCluster.serveControl} for `rc`. */
async function serveControl(rc: RegionCluster, onStop?: () => void): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    const reply = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify(body)}\n`);
    };
    try {
      if (req.method === 'GET' && u.pathname === '/status') return reply(200, rc.status());
      if (req.method !== 'POST') return reply(405, { error: 'method-not-allowed' });
      const q = (k: string) => u.searchParams.get(k) ?? '';
      if (u.pathname === '/cut') rc.cut(q('a'), q('b'));
      else if (u.pathname === '/heal') rc.heal(q('a'), q('b'));
      else if (u.pathname === '/isolate') rc.isolate(q('region'));
      else if (u.pathname === '/rejoin') rc.rejoin(q('region'));
      else if (u.pathname === '/stop') {
        reply(200, { stopping: true });
        onStop?.();
        return;
      } else return reply(404, { error: 'not-found' });
      return reply(200, rc.status());
    } catch (e) {
      return reply(400, { error: 'bad-request', why: (e as Error).message });
    }
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}

function makeCluster(
  dir: string,
  home: string,
  regions: Region[],
  links: RegionLink[],
  delay: { delayMs: number; jitterMs: number },
  stopAll: () => Promise<void>,
): RegionCluster {
  const names = regions.map((r) => r.name);
  const between = (a: string, b: string) => links.filter((l) => (l.from === a && l.to === b) || (l.from === b && l.to === a));
  const touching = (r: string) => links.filter((l) => l.from === r || l.to === r);
  const cut = new Set<RegionLink>();
  let stopped = false;
  const rc: RegionCluster = {
    dir,
    home,
    regions,
    links,
    region(name) {
      const r = regions.find((x) => x.name === name);
      if (!r) throw new RangeError(`no region ${name} (regions: ${names.join(', ')})`);
      return r;
    },
    cut(a, b) {
      pairCheck(names, a, b);
      for (const l of between(a, b)) {
        cut.add(l);
        for (const p of l.proxies) p.cut();
      }
    },
    heal(a, b) {
      pairCheck(names, a, b);
      for (const l of between(a, b)) {
        cut.delete(l);
        for (const p of l.proxies) p.heal();
      }
    },
    isolate(region) {
      rc.region(region);
      for (const o of names) if (o !== region) rc.cut(region, o);
    },
    rejoin(region) {
      rc.region(region);
      for (const o of names) if (o !== region) rc.heal(region, o);
    },
    async restartNats(region, o = {}) {
      const r = rc.region(region);
      await Promise.all(r.servers.map((s) => (o.kill ? s.kill() : s.stop())));
      await Promise.all(r.servers.map((s) => s.start(false)));
      await Promise.all(r.servers.map((s) => s.ready(60_000)));
    },
    async clientLink(from, to, targetPort) {
      pairCheck(names, from, to);
      const proxy = await TcpProxy.start(targetPort, '127.0.0.1', 0, delay);
      if (touching(from).some((l) => cut.has(l) && (l.to === to || l.from === to))) proxy.cut();
      const link: RegionLink = { from, to, kind: 'client', proxy, proxies: [proxy] };
      links.push(link);
      if (proxy.isCut) cut.add(link);
      return link;
    },
    status: () => regionStatus(home, regions, links),
    serveControl: (onStop) => serveControl(rc, onStop),
    writeState(controlUrl) {
      const state: RegionState = { ...rc.status(), dir, control: controlUrl, pid: process.pid };
      const file = join(dir, 'cluster.json');
      writeFileSync(file, `${JSON.stringify(state, null, 2)}\n`);
      return file;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopAll();
    },
  };
  return rc;
}

/** The gateway names each server's `/gatewayz` lists with an outbound connection, or undefined when it does not answer (1 s). */
async function outboundGateways(monitor: string): Promise<Set<string> | undefined> {
  try {
    const r = await fetch(`http://${monitor}/gatewayz`, { signal: AbortSignal.timeout(1_000) });
    if (!r.ok) return undefined;
    const g = (await r.json()) as { outbound_gateways?: Record<string, { connection?: unknown }> };
    return new Set(Object.entries(g.outbound_gateways ?? {}).flatMap(([name, o]) => (o.connection ? [name] : [])));
  } catch {
    return undefined;
  }
}

/**
 * The links of `s` with their live health (`live`, and `gateway_connections` for a gateway link):
 * asks every server's NATS monitoring endpoint (`/gatewayz`, 1 s each, all at once) which
 * gateways it holds a connection to. Works without the launcher (the NATS servers outlive it);
 * a server without a recorded `monitor` counts as not answering.
 */
export async function liveLinks(s: RegionStatus): Promise<LinkStatus[]> {
  const byRegion = new Map(
    await Promise.all(
      s.regions.map(
        async (r) => [r.name, await Promise.all(r.servers.map((x) => (x.monitor ? outboundGateways(x.monitor) : undefined)))] as const,
      ),
    ),
  );
  return s.links.map((l): LinkStatus => {
    if (l.kind === 'client') {
      if (l.state === 'unknown' || l.proxy === undefined) return { ...l, live: l.state === 'down' ? 'disconnected' : 'unknown' };
      return { ...l, live: l.state !== 'up' || l.proxy.cut ? 'disconnected' : l.proxy.open > 0 ? 'connected' : 'idle' };
    }
    const seen = byRegion.get(l.from) ?? [];
    const answered = seen.filter((x) => x !== undefined);
    const connected = answered.filter((x) => x.has(l.to)).length;
    const live = answered.length === 0 ? 'unknown' : connected === seen.length ? 'connected' : connected === 0 ? 'disconnected' : 'partial';
    return { ...l, live, gateway_connections: { connected, answered: answered.length, servers: seen.length } };
  });
}
