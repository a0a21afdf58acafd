/**
 * NATS server processes for tests, the local cluster and the chaos runner: `/usr/sbin/nats-server`
 * with JetStream on free loopback ports, each in its own temp folder, alone or as a 3-server
 * JetStream cluster (routes on loopback). Servers can be restarted on the same ports and store
 * (JetStream state survives), and every server is SIGKILLed if the parent exits.
 *
 * Readiness is the server's own `/healthz` on its monitoring port, which in a cluster answers
 * 200 only once JetStream has a meta leader and this server is current.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort, killChild, stopChild, track, waitUntil } from './procs.ts';

/** The nats-server binary, looked up at each start: `JCP_NATS_SERVER`, `/usr/sbin/nats-server`, or the first on PATH. */
export function findNatsServerBin(): string | undefined {
  const candidates = [process.env['JCP_NATS_SERVER'], '/usr/sbin/nats-server'];
  for (const d of (process.env['PATH'] ?? '').split(delimiter)) if (d) candidates.push(join(d, 'nats-server'));
  for (const c of candidates) {
    if (!c || !existsSync(c)) continue;
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // not executable: try the next
    }
  }
  return undefined;
}

const LOOPBACK_NATS_URL = /^nats:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}$/;

/**
 * Why `urls` (one url, or comma-separated ones when `list`) is not a loopback NATS url, or
 * undefined when every one is `nats://127.0.0.1|localhost|[::1]:<port>`. The launchers and the
 * demo use only loopback addresses; the CLI reports a problem as a usage error.
 */
export function loopbackNatsUrlProblem(urls: string, list = true): string | undefined {
  const all = list ? urls.split(',').map((u) => u.trim()) : [urls];
  for (const u of all) {
    const port = Number(u.slice(u.lastIndexOf(':') + 1));
    if (!LOOPBACK_NATS_URL.test(u) || port < 1 || port > 65_535) {
      return `expected a loopback nats:// url (nats://127.0.0.1:<port>, localhost or [::1])${list ? ', or several separated by commas' : ''}, got ${u === '' ? "''" : u}`;
    }
  }
  return undefined;
}

/** Options for one server. Ports default to free loopback ports. */
export interface NatsServerOpts {
  /** `server_name` (must be unique in a cluster). */
  readonly name?: string;
  /** Folder for the config, logs and JetStream store; a fresh temp folder by default (removed on stop). */
  readonly dir?: string;
  readonly port?: number;
  readonly httpPort?: number;
  /** Cluster membership: this server's route port, every member's route port, the cluster name. */
  readonly cluster?: { readonly name: string; readonly port: number; readonly routes: readonly number[] };
  /** Outlive this process (`jcp cluster up`): not killed on exit; stop it by pid. Default false. */
  readonly detached?: boolean;
  /**
   * Gateway membership (a supercluster, testkit/regions.ts): this server's gateway port, the
   * gateway name (must equal the cluster name), the gateway url it advertises to other clusters
   * (`host:port`), and the urls of every remote cluster's gateways. Unknown clusters are refused.
   */
  readonly gateway?: {
    readonly name: string;
    readonly port: number;
    readonly advertise?: string;
    readonly remotes: readonly { readonly name: string; readonly urls: readonly string[] }[];
  };
  /** Extra config lines appended as they are. */
  readonly extraConfig?: readonly string[];
  /**
   * TLS on client, route and gateway connections (PEM files): this server's certificate and key,
   * and the CA it trusts; routes and gateways verify the peer's certificate against that CA.
   */
  readonly tls?: { readonly certFile: string; readonly keyFile: string; readonly caFile: string };
}

/** One `nats-server` child process with JetStream enabled, on 127.0.0.1 only. */
export class NatsServer {
  readonly name: string;
  readonly dir: string;
  readonly port: number;
  readonly httpPort: number;
  readonly cluster: NatsServerOpts['cluster'];
  readonly gateway: NatsServerOpts['gateway'];
  readonly extraConfig: readonly string[];
  readonly tls: NatsServerOpts['tls'];
  readonly #ownsDir: boolean;
  readonly #detached: boolean;
  readonly #bin: string;
  #child: ChildProcess | undefined;

  private constructor(
    name: string,
    dir: string,
    ownsDir: boolean,
    port: number,
    httpPort: number,
    cluster: NatsServerOpts['cluster'],
    detached: boolean,
    bin: string,
    gateway?: NatsServerOpts['gateway'],
    extraConfig: readonly string[] = [],
    tls?: NatsServerOpts['tls'],
  ) {
    this.tls = tls;
    this.gateway = gateway;
    this.extraConfig = extraConfig;
    this.#detached = detached;
    this.#bin = bin;
    this.name = name;
    this.dir = dir;
    this.#ownsDir = ownsDir;
    this.port = port;
    this.httpPort = httpPort;
    this.cluster = cluster;
  }

  /** Client url, `nats://127.0.0.1:<port>`. */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** The OS process id while running. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** True while the process runs. */
  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /**
   * Writes the config, starts the server and (unless `wait` is false) waits until it is ready.
   * @throws Error if the binary is missing or the server is not ready within `timeoutMs`.
   */
  static async start(opts: NatsServerOpts = {}, wait = true, timeoutMs = 15_000): Promise<NatsServer> {
    const bin = findNatsServerBin();
    if (bin === undefined)
      throw new Error('nats-server not found (JCP_NATS_SERVER, /usr/sbin, PATH); install it: apt-get install nats-server');
    const ownsDir = opts.dir === undefined;
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'jcp-nats-'));
    mkdirSync(dir, { recursive: true });
    const port = opts.port ?? (await freePort());
    const httpPort = opts.httpPort ?? (await freePort());
    const name = opts.name ?? `jcp-${port}`;
    const s = new NatsServer(
      name,
      dir,
      ownsDir,
      port,
      httpPort,
      opts.cluster,
      opts.detached ?? false,
      bin,
      opts.gateway,
      opts.extraConfig,
      opts.tls,
    );
    s.#writeConfig();
    s.#spawn();
    if (wait) await s.ready(timeoutMs);
    return s;
  }

  #writeConfig(): void {
    const lines = [
      `server_name: ${JSON.stringify(this.name)}`,
      `listen: "127.0.0.1:${this.port}"`,
      `http: "127.0.0.1:${this.httpPort}"`,
      'jetstream {',
      `  store_dir: ${JSON.stringify(join(this.dir, 'js'))}`,
      '  max_memory_store: 256MB',
      '  max_file_store: 2GB',
      '}',
    ];
    const tls = (indent: string, verify: boolean) =>
      this.tls
        ? [
            `${indent}tls {`,
            `${indent}  cert_file: ${JSON.stringify(this.tls.certFile)}`,
            `${indent}  key_file: ${JSON.stringify(this.tls.keyFile)}`,
            `${indent}  ca_file: ${JSON.stringify(this.tls.caFile)}`,
            ...(verify ? [`${indent}  verify: true`] : []),
            `${indent}}`,
          ]
        : [];
    lines.push(...tls('', false));
    if (this.cluster) {
      const routes = this.cluster.routes.map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ');
      lines.push(
        'cluster {',
        `  name: ${JSON.stringify(this.cluster.name)}`,
        `  listen: "127.0.0.1:${this.cluster.port}"`,
        `  routes: [${routes}]`,
        ...tls('  ', true),
        '}',
      );
    }
    if (this.gateway) {
      const g = this.gateway;
      lines.push('gateway {', `  name: ${JSON.stringify(g.name)}`, `  listen: "127.0.0.1:${g.port}"`, '  reject_unknown_cluster: true');
      if (g.advertise) lines.push(`  advertise: ${JSON.stringify(g.advertise)}`);
      lines.push('  gateways: [');
      for (const r of g.remotes)
        lines.push(`    { name: ${JSON.stringify(r.name)}, urls: [${r.urls.map((u) => JSON.stringify(u)).join(', ')}] }`);
      lines.push('  ]', ...tls('  ', true), '}');
    }
    lines.push(...this.extraConfig);
    writeFileSync(join(this.dir, 'nats.conf'), `${lines.join('\n')}\n`);
  }

  #spawn(): void {
    const child = spawn(this.#bin, ['-c', join(this.dir, 'nats.conf'), '-l', join(this.dir, 'nats.log')], {
      stdio: 'ignore',
      detached: this.#detached,
    });
    if (this.#detached) child.unref();
    else track(child);
    this.#child = child;
  }

  /** True when `/healthz` answers 200 (JetStream current, and in a cluster a meta leader elected). */
  async healthy(): Promise<boolean> {
    if (!this.running) return false;
    try {
      const r = await fetch(`http://127.0.0.1:${this.httpPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
      await r.arrayBuffer();
      return r.ok;
    } catch {
      return false;
    }
  }

  /** Waits until {@link healthy}. @throws Error on timeout or if the process died. */
  async ready(timeoutMs = 15_000): Promise<void> {
    await waitUntil(
      async () => {
        if (!this.running) throw new Error(`nats-server ${this.name} exited (see ${join(this.dir, 'nats.log')})`);
        return await this.healthy();
      },
      `nats-server ${this.name} on port ${this.port}`,
      timeoutMs,
    );
  }

  /** Stops the server gracefully (SIGTERM, SIGKILL after a grace period). Keeps the store. */
  async stop(): Promise<void> {
    if (this.#child) await stopChild(this.#child);
  }

  /** SIGKILLs the server (a crash). Keeps the store. */
  async kill(): Promise<void> {
    if (this.#child) await killChild(this.#child);
  }

  /** Starts the server again on the same ports and store; waits until ready unless `wait` is false. */
  async start(wait = true, timeoutMs = 15_000): Promise<void> {
    if (this.running) return;
    this.#spawn();
    if (wait) await this.ready(timeoutMs);
  }

  /** Stops (or kills) and starts again on the same ports and store. */
  async restart(opts: { kill?: boolean; wait?: boolean } = {}): Promise<void> {
    if (opts.kill) await this.kill();
    else await this.stop();
    await this.start(opts.wait ?? true);
  }

  /** Stops the server and removes its temp folder (if this harness created it). */
  async dispose(): Promise<void> {
    await this.stop();
    if (this.#ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A JetStream cluster of `size` servers (default 3) on loopback, routes all to all. */
export class NatsCluster {
  readonly servers: readonly NatsServer[];
  readonly dir: string;
  readonly #ownsDir: boolean;

  private constructor(servers: NatsServer[], dir: string, ownsDir: boolean) {
    this.servers = servers;
    this.dir = dir;
    this.#ownsDir = ownsDir;
  }

  /** Every client url, comma-separated as `nats` clients accept them. */
  get url(): string {
    return this.urls.join(',');
  }

  /** Every client url. */
  get urls(): string[] {
    return this.servers.map((s) => s.url);
  }

  /**
   * Starts `size` servers with JetStream clustering and waits until each is healthy.
   * @param dir parent folder (one sub-folder per server); a temp folder by default (removed on dispose).
   */
  static async start(size = 3, dir?: string, timeoutMs = 30_000, detached = false): Promise<NatsCluster> {
    const ownsDir = dir === undefined;
    const root = dir ?? mkdtempSync(join(tmpdir(), 'jcp-nats-cluster-'));
    const routePorts: number[] = [];
    for (let i = 0; i < size; i++) routePorts.push(await freePort());
    const servers: NatsServer[] = [];
    try {
      for (let i = 0; i < size; i++) {
        servers.push(
          await NatsServer.start(
            {
              name: `jcp-n${i + 1}`,
              dir: join(root, `n${i + 1}`),
              cluster: { name: 'jcp', port: routePorts[i]!, routes: routePorts },
              detached,
            },
            false,
          ),
        );
      }
      await Promise.all(servers.map((s) => s.ready(timeoutMs)));
    } catch (e) {
      await Promise.all(servers.map((s) => s.kill()));
      if (ownsDir) rmSync(root, { recursive: true, force: true });
      throw e;
    }
    return new NatsCluster(servers, root, ownsDir);
  }

  /** Waits until every running server is healthy. */
  async ready(timeoutMs = 30_000): Promise<void> {
    await Promise.all(this.servers.filter((s) => s.running).map((s) => s.ready(timeoutMs)));
  }

  /** Restarts server `i` (0-based) on the same ports and store. */
  async restart(i: number, opts: { kill?: boolean; wait?: boolean } = {}): Promise<void> {
    const s = this.servers[i];
    if (!s) throw new RangeError(`no server ${i} in a cluster of ${this.servers.length}`);
    await s.restart(opts);
  }

  /** Stops every server and removes the temp folder (if this harness created it). */
  async dispose(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.dispose()));
    if (this.#ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }
}
