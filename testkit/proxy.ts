/**
 * A loopback TCP proxy the chaos runner controls: it forwards `127.0.0.1:<port>` to a target and
 * can cut the link (drop every open connection and refuse new ones) and heal it. Putting one in
 * front of NATS for each enforcement node partitions that node from NATS without privileges
 * (no iptables, no namespaces).
 *
 * It can also delay the bytes it forwards, to stand in for a wide-area link between regions
 * (testkit/regions.ts): every chunk read on one side is written to the other side `delayMs`
 * (plus a uniform random `0..jitterMs`) after it arrived, one way, in each direction, so a link
 * with `delayMs = rtt / 2` has that round-trip time. Chunks keep their order (a TCP stream cannot
 * reorder), so jitter only ever lengthens a chunk's delay up to the one queued before it.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** One-way delay of a {@link TcpProxy}, milliseconds: `delayMs` plus uniform `[0, jitterMs)`. */
export interface LinkDelay {
  readonly delayMs: number;
  readonly jitterMs?: number;
}

/** A controllable TCP forwarder from a loopback port to `target`. */
export class TcpProxy {
  readonly targetHost: string;
  readonly targetPort: number;
  readonly #server: Server;
  /** Open connections: client socket → upstream socket. */
  readonly #pairs = new Map<Socket, Socket>();
  #port = 0;
  #cut = false;
  #delayMs = 0;
  #jitterMs = 0;
  /** With {@link admitOnlyGateway}: the one NATS gateway (cluster name) this proxy forwards. */
  #gateway: string | undefined;
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
  static async start(targetPort: number, targetHost = '127.0.0.1', listenPort = 0, delay?: LinkDelay): Promise<TcpProxy> {
    if (targetHost !== '127.0.0.1' && targetHost !== 'localhost' && targetHost !== '::1') {
      throw new RangeError(`proxy target must be a loopback address, got ${targetHost}`);
    }
    const p = new TcpProxy(targetHost, targetPort);
    if (delay) p.setDelay(delay);
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

  /** The one-way delay now applied to each direction (both 0: bytes pass at once). */
  get delay(): { delayMs: number; jitterMs: number } {
    return { delayMs: this.#delayMs, jitterMs: this.#jitterMs };
  }

  /**
   * Sets the one-way delay of each direction, for open and new connections (chunks already queued
   * keep the time they were given).
   * @throws RangeError for a negative or non-finite value.
   */
  setDelay(d: LinkDelay): void {
    const jitter = d.jitterMs ?? 0;
    for (const [k, v] of [
      ['delayMs', d.delayMs],
      ['jitterMs', jitter],
    ] as const) {
      if (!Number.isFinite(v) || v < 0) throw new RangeError(`${k}: expected a finite number ≥ 0, got ${v}`);
    }
    this.#delayMs = d.delayMs;
    this.#jitterMs = jitter;
  }

  /**
   * Makes this proxy carry one direction of a NATS gateway link only: a connection whose first
   * line from the dialling side is a gateway `CONNECT` naming another cluster than `name` is
   * dropped (counted in `refused`). NATS gateways gossip the urls they dial, so without this a
   * server whose own proxy to a region is cut reconnects through a third region's proxy to it.
   * A TLS connection is encrypted before its `CONNECT`, so it is not checked.
   */
  admitOnlyGateway(name: string): void {
    this.#gateway = name;
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
    const closeNow = () => {
      this.#pairs.delete(client);
      client.destroy();
      upstream.destroy();
    };
    // With a delay, bytes still queued for the other side are delivered before it is closed.
    const close = () => {
      const lag = this.#delayMs + this.#jitterMs;
      if (lag === 0) closeNow();
      else setTimeout(closeNow, lag + 5).unref();
    };
    if (this.#gateway !== undefined) this.#checkGateway(client, this.#gateway, closeNow);
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    this.#forward(client, upstream);
    this.#forward(upstream, client);
  }

  /**
   * Watches the first line `client` sends (before it is forwarded: this listener runs first) and
   * calls `drop` when it is a gateway `CONNECT` of another cluster than `name`.
   */
  #checkGateway(client: Socket, name: string, drop: () => void): void {
    let head = Buffer.alloc(0);
    const watch = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      if (head[0] === 0x16) return void client.off('data', watch); // TLS: the CONNECT is encrypted
      const end = head.indexOf('\r\n');
      if (end < 0 && head.length < 65_536) return;
      client.off('data', watch);
      const line = head.subarray(0, end < 0 ? head.length : end).toString('latin1');
      if (!line.startsWith('CONNECT ')) return;
      let gateway: unknown;
      try {
        gateway = (JSON.parse(line.slice(8)) as { gateway?: unknown }).gateway;
      } catch {
        gateway = undefined;
      }
      if (gateway !== undefined && gateway !== name) {
        this.counts.refused++;
        drop();
      }
    };
    client.on('data', watch);
  }

  /**
   * Copies `from` to `to`: at once (with back-pressure) when there is no delay, otherwise each
   * chunk after its delay, in order. A queued chunk whose sockets were destroyed (a cut) is dropped.
   */
  #forward(from: Socket, to: Socket): void {
    if (this.#delayMs === 0 && this.#jitterMs === 0) {
      from.pipe(to);
      return;
    }
    const queue: { at: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let lastAt = 0;
    let ended = false;
    const flush = () => {
      timer = undefined;
      const now = performance.now();
      while (queue.length > 0 && queue[0]!.at <= now) {
        const { chunk } = queue.shift()!;
        if (!to.destroyed) to.write(chunk);
      }
      if (queue.length > 0) timer = setTimeout(flush, Math.max(0, Math.ceil(queue[0]!.at - performance.now())));
      else if (ended && !to.destroyed) to.end();
    };
    from.on('data', (chunk: Buffer) => {
      const at = Math.max(lastAt, performance.now() + this.#delayMs + Math.random() * this.#jitterMs);
      lastAt = at;
      queue.push({ at, chunk });
      timer ??= setTimeout(flush, Math.max(0, Math.ceil(at - performance.now())));
    });
    from.on('end', () => {
      ended = true;
      timer ??= setTimeout(flush, 0);
    });
    from.on('close', () => {
      if (to.destroyed) {
        if (timer) clearTimeout(timer);
        queue.length = 0;
      }
    });
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
