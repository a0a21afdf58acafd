/**
 * A local enforcement cluster on loopback: N `jcp node start` child processes sharing NATS
 * (an external url, one `nats-server`, or a 3-server JetStream cluster started here), each with
 * its own data folder, steward key, config, jcp/1 port and metrics port. Used by `jcp cluster up`,
 * the chaos runner, the bench and the tests.
 *
 * For the chaos runner each node can reach NATS through its own {@link TcpProxy} (one per NATS
 * server), so cutting a node off from NATS needs no privileges. The steward keys are written
 * before the nodes start, so every node's did:key is known up front (channel membership).
 *
 * Only loopback addresses are used.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Actor, actorFromSeed } from '../core/index.ts';
import { readKeyFile, writeKeyFile } from '../node/index.ts';
import { loopbackNatsUrlProblem, NatsCluster, NatsServer } from './nats.ts';
import { freePort, JCP_BIN, killChild, pidAlive, stopChild, track, waitUntil } from './procs.ts';
import { TcpProxy } from './proxy.ts';

/** The `jcp` entry point the nodes run. */

/** Options of {@link LocalCluster.start}. */
export interface ClusterOpts {
  readonly nodes: number;
  /** Root folder (one sub-folder per node, plus NATS); a temp folder by default (removed on stop). */
  readonly dir?: string;
  /** Use this NATS (comma-separated loopback urls) instead of starting one. */
  readonly nats?: string;
  /** Start a JetStream cluster of this many servers (3) instead of a single server. */
  readonly natsCluster?: number;
  /** Put every node behind its own TCP proxy to NATS (needed for partitions). Not with `detached`. */
  readonly proxies?: boolean;
  /** Node config `resources` (JSON as in docs/node.md). */
  readonly resources?: readonly unknown[];
  /** Channel grants every node serves: `{grant_id, window_uj}` (window per node, µJ). */
  readonly channels?: readonly { readonly grant_id: string; readonly window_uj: number | string }[];
  readonly subjectRoot?: string;
  readonly settleIntervalMs?: number;
  /** Node config `meter` section. Default: a 1 µJ estimate per action. */
  readonly meter?: Record<string, unknown>;
  readonly logLevel?: string;
  /** Signature worker threads per node. */
  readonly workers?: number;
  /** Outlive this process (`jcp cluster up`): children are not killed on exit. */
  readonly detached?: boolean;
  /** Steward seeds (32 bytes each), for reproducible dids; random by default. */
  readonly seeds?: readonly Uint8Array[];
  /**
   * The points of every channel (steward did:keys), when they are not just this cluster's nodes
   * (a multi-region cluster: every region's nodes). Default: the stewards of this cluster.
   */
  readonly points?: readonly string[];
  /**
   * Node config keys set over the ones this launcher writes, for node `i` (0-based); a `cluster`
   * object is merged key by key into the `cluster` section.
   */
  readonly nodeConfig?: (i: number) => Record<string, unknown>;
}

/** One node of the cluster. */
export interface ClusterNode {
  readonly name: string;
  readonly index: number;
  readonly steward: Actor;
  readonly host: string;
  readonly port: number;
  readonly metricsPort: number;
  readonly dir: string;
  readonly dataDir: string;
  readonly configFile: string;
  readonly logFile: string;
  /** One proxy per NATS server when `proxies` is on. */
  readonly proxies: TcpProxy[];
  child: ChildProcess | undefined;
  pid: number | undefined;
}

/** The state file `jcp cluster down` reads: `<dir>/cluster.json`. */
export interface ClusterState {
  readonly type: 'jcp-cluster';
  readonly dir: string;
  readonly nats: { readonly urls: string; readonly owned: boolean; readonly pids: number[] };
  readonly nodes: { name: string; did: string; address: string; metrics: string; pid: number | undefined; data_dir: string; log: string }[];
}

/** A running local cluster. See the module docs. */
export class LocalCluster {
  readonly dir: string;
  readonly nodes: ClusterNode[];
  readonly nats: NatsServer | NatsCluster | undefined;
  /** The NATS urls the nodes use when no proxies are in between. */
  readonly natsUrls: string[];
  readonly #opts: ClusterOpts;
  readonly #ownsDir: boolean;

  private constructor(
    dir: string,
    ownsDir: boolean,
    nodes: ClusterNode[],
    nats: NatsServer | NatsCluster | undefined,
    urls: string[],
    opts: ClusterOpts,
  ) {
    this.dir = dir;
    this.#ownsDir = ownsDir;
    this.nodes = nodes;
    this.nats = nats;
    this.natsUrls = urls;
    this.#opts = opts;
  }

  /**
   * Starts NATS (unless `nats` is given), writes each node's key and config, starts every node
   * and waits until each answers `/healthz`.
   */
  static async start(opts: ClusterOpts): Promise<LocalCluster> {
    if (opts.proxies && opts.detached) throw new Error('proxies live in this process: they cannot be used with detached');
    // Checked before anything is made on disk.
    const badUrl = opts.nats ? loopbackNatsUrlProblem(opts.nats) : undefined;
    if (badUrl !== undefined) throw new Error(`nats: ${badUrl}`);
    const ownsDir = opts.dir === undefined;
    const dir = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), 'jcp-cluster-')));
    mkdirSync(dir, { recursive: true });
    let nats: NatsServer | NatsCluster | undefined;
    let urls: string[];
    if (opts.nats) {
      urls = opts.nats.split(',').map((u) => u.trim());
    } else if ((opts.natsCluster ?? 1) > 1) {
      nats = await NatsCluster.start(opts.natsCluster, join(dir, 'nats'), 30_000, opts.detached ?? false);
      urls = nats.urls;
    } else {
      nats = await NatsServer.start({ name: 'jcp-nats', dir: join(dir, 'nats'), ...(opts.detached ? { detached: true } : {}) });
      urls = [nats.url];
    }
    const nodes: ClusterNode[] = [];
    const cluster = new LocalCluster(dir, ownsDir, nodes, nats, urls, opts);
    try {
      // A folder used before keeps its nodes' keys (their logs are signed by them).
      const stewards = Array.from({ length: opts.nodes }, (_, i) => {
        const keyFile = join(dir, `n${i + 1}`, 'data', 'steward.key');
        return existsSync(keyFile) ? readKeyFile(keyFile) : actorFromSeed(opts.seeds?.[i] ?? crypto.getRandomValues(new Uint8Array(32)));
      });
      for (let i = 0; i < opts.nodes; i++) nodes.push(await cluster.#prepare(i, stewards));
      await Promise.all(nodes.map((n) => cluster.#spawn(n)));
      await Promise.all(nodes.map((n) => cluster.waitReady(n.index)));
    } catch (e) {
      await cluster.stop();
      throw e;
    }
    return cluster;
  }

  async #prepare(i: number, stewards: readonly Actor[]): Promise<ClusterNode> {
    const o = this.#opts;
    const name = `n${i + 1}`;
    const ndir = join(this.dir, name);
    const dataDir = join(ndir, 'data');
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const steward = stewards[i]!;
    const keyFile = join(dataDir, 'steward.key');
    if (!existsSync(keyFile)) writeKeyFile(keyFile, steward);
    const proxies: TcpProxy[] = [];
    if (o.proxies) {
      for (const u of this.natsUrls) proxies.push(await TcpProxy.start(Number(new URL(u).port)));
    }
    const natsUrl = (proxies.length > 0 ? proxies.map((p) => p.natsUrl) : this.natsUrls).join(',');
    const port = await freePort();
    const metricsPort = await freePort();
    const base: Record<string, unknown> = {
      listen: `127.0.0.1:${port}`,
      data_dir: dataDir,
      metrics: `127.0.0.1:${metricsPort}`,
      nats: natsUrl,
      log_level: o.logLevel ?? 'warn',
      ...(o.workers !== undefined ? { workers: o.workers } : {}),
      resources: o.resources ?? [{ name: 'cluster' }],
      meter: o.meter ?? { default_estimate_uj: 1 },
      cluster: {
        subject_root: o.subjectRoot ?? 'jcp',
        replicas: this.natsUrls.length >= 3 ? 3 : 1,
        ...(o.settleIntervalMs !== undefined ? { settle_interval_ms: o.settleIntervalMs } : {}),
        // Every node's steward is a point of every channel; statements from anyone else are refused.
        channels: (o.channels ?? []).map((c) => ({
          grant_id: c.grant_id,
          window_uj: String(c.window_uj),
          points: o.points ?? stewards.map((a) => a.did),
        })),
      },
    };
    const patch = o.nodeConfig?.(i) ?? {};
    const config: Record<string, unknown> = { ...base, ...patch };
    if (typeof patch['cluster'] === 'object' && patch['cluster'] !== null) {
      config['cluster'] = { ...(base['cluster'] as Record<string, unknown>), ...(patch['cluster'] as Record<string, unknown>) };
    }
    const configFile = join(ndir, 'node.json');
    writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
    return {
      name,
      index: i,
      steward,
      host: '127.0.0.1',
      port,
      metricsPort,
      dir: ndir,
      dataDir,
      configFile,
      logFile: join(ndir, 'node.log'),
      proxies,
      child: undefined,
      pid: undefined,
    };
  }

  async #spawn(n: ClusterNode): Promise<void> {
    const fd = openSync(n.logFile, 'a');
    const detached = this.#opts.detached ?? false;
    const child = spawn(process.execPath, [JCP_BIN, 'node', 'start', '--config', n.configFile], {
      stdio: ['ignore', fd, fd],
      detached,
      env: { ...process.env, NODE_ENV: 'production' },
    });
    closeSync(fd);
    if (detached) child.unref();
    else track(child);
    n.child = child;
    n.pid = child.pid;
  }

  /** The node at `i`. @throws RangeError */
  node(i: number): ClusterNode {
    const n = this.nodes[i];
    if (!n) throw new RangeError(`no node ${i} in a cluster of ${this.nodes.length}`);
    return n;
  }

  /** True while node `i`'s process runs. */
  running(i: number): boolean {
    const c = this.node(i).child;
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** True when node `i` answers `/healthz` with 200. */
  async healthy(i: number): Promise<boolean> {
    const n = this.node(i);
    try {
      const r = await fetch(`http://127.0.0.1:${n.metricsPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
      await r.arrayBuffer();
      return r.ok;
    } catch {
      return false;
    }
  }

  /** Waits until node `i` is healthy. @throws Error (with the log's tail) if it exits or times out. */
  async waitReady(i: number, timeoutMs = 30_000): Promise<void> {
    const n = this.node(i);
    try {
      await waitUntil(
        async () => {
          if (!this.running(i)) throw new Error(`node ${n.name} exited`);
          return await this.healthy(i);
        },
        `node ${n.name}`,
        timeoutMs,
        100,
      );
    } catch (e) {
      let tail = '';
      try {
        tail = readFileSync(n.logFile, 'utf8').split('\n').slice(-15).join('\n');
      } catch {
        // no log yet
      }
      throw new Error(`${(e as Error).message}\n--- ${n.logFile} ---\n${tail}`);
    }
  }

  /** Starts node `i` again (same config, data, key and ports) and waits until it is healthy. */
  async startNode(i: number, wait = true): Promise<void> {
    if (this.running(i)) return;
    await this.#spawn(this.node(i));
    if (wait) await this.waitReady(i);
  }

  /** Crashes node `i` (SIGKILL). */
  async killNode(i: number): Promise<void> {
    const c = this.node(i).child;
    if (c) await killChild(c);
  }

  /** Stops node `i` gracefully (SIGCONT, SIGTERM; SIGKILL after a grace period). */
  async stopNode(i: number): Promise<void> {
    const c = this.node(i).child;
    if (c) await stopChild(c, 5_000);
  }

  /** Freezes node `i` (SIGSTOP). */
  pauseNode(i: number): void {
    this.node(i).child?.kill('SIGSTOP');
  }

  /** Thaws node `i` (SIGCONT). */
  resumeNode(i: number): void {
    this.node(i).child?.kill('SIGCONT');
  }

  /** Cuts node `i` off from NATS (every proxy of the node). @throws Error without proxies. */
  partition(i: number): void {
    const n = this.node(i);
    if (n.proxies.length === 0) throw new Error('this cluster runs without proxies');
    for (const p of n.proxies) p.cut();
  }

  /** Heals node `i`'s link to NATS. */
  heal(i: number): void {
    for (const p of this.node(i).proxies) p.heal();
  }

  /** Restarts NATS server `k` (a cluster member, or the single server) on the same ports and store. */
  async restartNats(k = 0, kill = false): Promise<void> {
    if (this.nats instanceof NatsCluster) await this.nats.restart(k % this.nats.servers.length, { kill });
    else if (this.nats) await this.nats.restart({ kill });
    else throw new Error('this cluster uses an external NATS');
  }

  /** The `cluster.json` state for `jcp cluster down`. */
  state(): ClusterState {
    const servers = this.nats instanceof NatsCluster ? this.nats.servers : this.nats ? [this.nats] : [];
    return {
      type: 'jcp-cluster',
      dir: this.dir,
      nats: { urls: this.natsUrls.join(','), owned: this.nats !== undefined, pids: servers.map((s) => s.pid ?? 0).filter((p) => p > 0) },
      nodes: this.nodes.map((n) => ({
        name: n.name,
        did: n.steward.did,
        address: `${n.host}:${n.port}`,
        metrics: `127.0.0.1:${n.metricsPort}`,
        pid: n.pid,
        data_dir: n.dataDir,
        log: n.logFile,
      })),
    };
  }

  /** Stops every node (gracefully), every proxy and the NATS this cluster started; removes a temp folder. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => (n.child ? stopChild(n.child, 5_000) : Promise.resolve())));
    for (const n of this.nodes) for (const p of n.proxies) await p.close();
    if (this.nats instanceof NatsCluster) await this.nats.dispose();
    else await this.nats?.dispose();
    if (this.#ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** What `jcp cluster status` reports for one node of a {@link ClusterState}. */
export interface NodeStatus {
  readonly name: string;
  readonly address: string;
  readonly metrics: string;
  readonly did: string;
  /**
   * What `/healthz` on the node's metrics address says: `healthy` (200), `unhealthy` (another
   * status), `down` (no answer within the timeout), or `other` (a healthy node with another
   * steward answers there).
   */
  readonly health: 'healthy' | 'unhealthy' | 'down' | 'other';
  /** The HTTP status when `/healthz` answered. */
  readonly httpStatus?: number;
  /** The steward did:key `/healthz` reported, when it reported one. */
  readonly answeredBy?: string;
  /** Why `/healthz` gave no answer. */
  readonly why?: string;
  /** The pid `cluster up` recorded, and whether a process with that pid runs now (a node restarted by hand has another pid). */
  readonly pid: number | undefined;
  readonly pidRunning: boolean;
}

/**
 * Asks every node of `state` for `/healthz` (in parallel, `timeoutMs` each), whatever its
 * recorded pid says: a node restarted by hand (`jcp node start --config <dir>/nK/node.json`) runs
 * under another pid and is healthy all the same. The recorded pid's state is reported apart.
 */
export async function clusterStatus(state: ClusterState, timeoutMs = 1_000): Promise<NodeStatus[]> {
  return await Promise.all(
    state.nodes.map(async (n): Promise<NodeStatus> => {
      const base = { name: n.name, address: n.address, metrics: n.metrics, did: n.did, pid: n.pid, pidRunning: pidAlive(n.pid) };
      try {
        const r = await fetch(`http://${n.metrics}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
        const text = await r.text();
        let steward: string | undefined;
        try {
          const body = JSON.parse(text) as { steward?: unknown };
          if (typeof body.steward === 'string') steward = body.steward;
        } catch {
          // not JSON: judged by the status alone
        }
        const health = !r.ok ? 'unhealthy' : steward !== undefined && steward !== n.did ? 'other' : 'healthy';
        return { ...base, health, httpStatus: r.status, ...(steward !== undefined ? { answeredBy: steward } : {}) };
      } catch (e) {
        const cause = (e as { cause?: { code?: string } }).cause?.code;
        const why =
          cause === 'ECONNREFUSED'
            ? 'connection refused'
            : (e as Error).name === 'TimeoutError'
              ? `no answer within ${timeoutMs} ms`
              : (e as Error).message;
        return { ...base, health: 'down', why };
      }
    }),
  );
}

/**
 * Stops what a detached cluster started, from its state file: every node pid, then the NATS
 * servers it owns (SIGTERM, then SIGKILL after `graceMs`). Returns the pids signalled.
 */
export async function stopClusterFromState(state: ClusterState, graceMs = 5_000): Promise<number[]> {
  const pids = [...state.nodes.map((n) => n.pid ?? 0), ...(state.nats.owned ? state.nats.pids : [])].filter((p) => p > 0);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const signalled: number[] = [];
  for (const pid of pids) {
    if (!alive(pid)) continue;
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGTERM');
      signalled.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && signalled.some(alive)) await new Promise((r) => setTimeout(r, 50));
  for (const pid of signalled) {
    if (alive(pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
  return signalled;
}
