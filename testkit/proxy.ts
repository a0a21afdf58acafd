/**
 * A loopback TCP proxy the chaos runner controls: it forwards `127.0.0.1:<port>` to a target and
 * can cut the link (drop every open connection and refuse new ones) and heal it. Putting one in
 * front of NATS for each enforcement node partitions that node from NATS without privileges
 * (no iptables, no namespaces).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** A controllable TCP forwarder from a loopback port to `target`. */
export class TcpProxy {
  readonly targetHost: string;
  readonly targetPort: number;
  readonly #server: Server;
  /** Open connections: client socket → upstream socket. */
  readonly #pairs = new Map<Socket, Socket>();
  #port = 0;
  #cut = false;
  /** Connections accepted and forwarded, and connections refused while cut. */
  readonly counts = { forwarded: 0, refused: 0, cuts: 0 };

  private constructor(targetHost: string, targetPort: number) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.#server = createServer((client) => this.#accept(client));
  }

  /**
   * Starts a proxy on `127.0.0.1:<listenPort>` (a free port by default) forwarding to
   * `targetHost:targetPort`. Only loopback targets are accepted.
   * @throws RangeError for a non-loopback target.
   */
  static async start(targetPort: number, targetHost = '127.0.0.1', listenPort = 0): Promise<TcpProxy> {
    if (targetHost !== '127.0.0.1' && targetHost !== 'localhost' && targetHost !== '::1') {
      throw new RangeError(`proxy target must be a loopback address, got ${targetHost}`);
    }
    const p = new TcpProxy(targetHost, targetPort);
    await new Promise<void>((resolve, reject) => {
      p.#server.once('error', reject);
      p.#server.listen(listenPort, '127.0.0.1', () => resolve());
    });
    const addr = p.#server.address();
    p.#port = typeof addr === 'object' && addr ? addr.port : 0;
    return p;
  }

  /** The local port clients connect to. */
  get port(): number {
    return this.#port;
  }

  /** `nats://127.0.0.1:<port>`, for a NATS client behind this proxy. */
  get natsUrl(): string {
    return `nats://127.0.0.1:${this.#port}`;
  }

  /** True while the link is cut. */
  get isCut(): boolean {
    return this.#cut;
  }

  /** Number of open forwarded connections (each counted once, client side). */
  get open(): number {
    return this.#pairs.size;
  }

  #accept(client: Socket): void {
    if (this.#cut) {
      this.counts.refused++;
      client.destroy();
      return;
    }
    this.counts.forwarded++;
    const upstream = connect(this.targetPort, this.targetHost);
    this.#pairs.set(client, upstream);
    const close = () => {
      this.#pairs.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Cuts the link: destroys every open connection and refuses new ones until {@link heal}. */
  cut(): void {
    if (!this.#cut) this.counts.cuts++;
    this.#cut = true;
    for (const [client, upstream] of this.#pairs) {
      upstream.destroy();
      client.destroy();
    }
    this.#pairs.clear();
  }

  /** Heals the link: new connections are forwarded again. */
  heal(): void {
    this.#cut = false;
  }

  /** Closes the listener and every connection. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
