/**
 * The jcp/1 TCP server (spec §11): framing, per-connection ordering and the protections that keep
 * one slow or hostile connection from stalling the others.
 *
 * - Each connection has its own `FrameReader`: a declared length above the cap is refused before
 *   any buffer is allocated (`frame-too-large`), answered, and the connection closed (a stream
 *   cannot be resynchronised after a bad length).
 * - A partial frame must complete within `readTimeoutMs` of its first byte (`read-timeout`, then
 *   close): a client that trickles bytes holds one bounded buffer for a bounded time. The clock
 *   restarts with each new frame and stops while the node is not reading the connection. A
 *   connection with no traffic for `idleTimeoutMs` is closed.
 * - Requests that a chunk completes before a bad length are answered before the error reply.
 * - A client that half-closes (FIN) after its last request still gets every reply owed; the node
 *   then ends the connection.
 * - Replies go out in request order on each connection (clients match them FIFO), but requests
 *   are handled concurrently; at most `maxPending` unanswered requests per connection, and the
 *   node stops reading from a connection that does not read its replies.
 * - At most `maxConnections` connections; more get `busy` and are closed. When the node is full,
 *   a newcomer from an address holding fewer connections than the address holding the most (by
 *   more than one) takes the place of one of that address's connections that owes no reply (an
 *   idle one first, else one holding only a partial frame; it gets `busy` and is closed): one
 *   address cannot keep every other out, not even by holding half-sent frames on every slot.
 * - A `notice` (an upstream notification of a call that asked for them) is written as soon as it
 *   arrives, ahead of the replies still queued; its own request's reply is among those, so a
 *   request's notices always precede its response. Clients route notices by `request_id`.
 */
import { type Server, type Socket, createServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { frameMessage, FrameReader, MAX_DECLARABLE_LENGTH } from '../core/index.ts';
import { NodeErrorCodes } from './codes.ts';
import { errorBody } from './enforcer.ts';
import type { NodeMetrics } from './metrics.ts';

/**
 * Sends one message body on the connection at once, ahead of the replies still owed (a `notice`
 * of a request in flight, docs/wire.md); dropped when the connection is gone.
 */
export type NoticeSink = ((body: Uint8Array) => void) & {
  /** Aborted when the connection closes: a call that holds an upstream stream for it lets go (node/a2a.ts). */
  readonly closed?: AbortSignal;
};

/**
 * Handles one message body; resolves to the response body; never rejects. `notice` sends the
 * notices of this message's call before its response; `peer` is the connection's remote IP
 * address (abuse limits, node/ratelimit.ts).
 */
export type MessageHandler = (body: Uint8Array, notice: NoticeSink, peer: string) => Promise<Uint8Array>;

/** Limits of {@link JcpServer}. */
export interface ServerLimits {
  /** Largest accepted message body, bytes. */
  readonly frameCap: number;
  /** A partial frame must complete within this many ms. */
  readonly readTimeoutMs: number;
  /** A connection without traffic for this many ms is closed. */
  readonly idleTimeoutMs: number;
  readonly maxConnections: number;
  /** Unanswered requests per connection before reading pauses. */
  readonly maxPending: number;
  /**
   * jcp/1 over TLS (docs/tls.md): PEM certificate chain and key of the node, and the CA bundle
   * client certificates must chain to. With it the listener speaks TLS only: a plaintext client
   * fails the handshake and is disconnected before any frame is read. Undefined = plain TCP.
   */
  readonly tls?: JcpTlsOptions | undefined;
}

/** The TLS material of a jcp/1 listener (PEM bytes). */
export interface JcpTlsOptions {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer | undefined;
  /**
   * `off`: no client certificate asked; `request`: asked, verified when sent (a bad one fails the
   * handshake); `require`: none or a bad one fails the handshake. Never a substitute for the
   * caller's signature, which every request carries and the node always checks (§11).
   */
  readonly clientCerts: 'off' | 'request' | 'require';
}

/** Stop reading from a connection whose unread replies exceed this many bytes. */
const WRITE_HIGH_WATER = 4 << 20;
/**
 * Most bytes of notices queued on a connection whose peer does not read them (an A2A stream to a
 * stalled caller): past it the connection is dropped, so its calls end as `caller-gone` and the
 * upstream stream is closed, instead of the node buffering without bound.
 */
export const NOTICE_BACKLOG_MAX_BYTES = 2 * WRITE_HIGH_WATER;

interface Slot {
  body: Uint8Array | undefined;
}

class Connection {
  readonly #sock: Socket;
  readonly #reader: FrameReader;
  readonly #server: JcpServer;
  readonly #peer: string;
  readonly #queue: Slot[] = [];
  #readTimer: NodeJS.Timeout | undefined;
  #closing = false;
  #paused = false;
  #flushScheduled = false;

  constructor(sock: Socket, server: JcpServer) {
    this.#sock = sock;
    this.#server = server;
    this.#peer = sock.remoteAddress ?? '';
    this.#reader = new FrameReader(server.limits.frameCap);
    sock.setNoDelay(true);
    sock.setTimeout(server.limits.idleTimeoutMs, () => sock.destroy());
    sock.on('data', (chunk: Buffer) => this.#onData(chunk));
    sock.on('drain', () => this.#maybeResume());
    sock.on('error', () => undefined);
    // A client that half-closes (FIN after its last request) still gets every reply it is owed;
    // the connection ends once they are written.
    sock.on('end', () => this.drain());
    sock.on('close', () => {
      this.#gone.abort();
      if (this.#readTimer) clearTimeout(this.#readTimer);
      this.#server.forget(this);
    });
  }

  destroy(): void {
    this.#sock.destroy();
  }

  /** The remote IP address. */
  get peer(): string {
    return this.#peer;
  }

  /** Nothing buffered, nothing owed, not closing: closing it loses no request. */
  get idle(): boolean {
    return this.evictable && this.#reader.buffered === 0;
  }

  /**
   * No reply owed and not closing (a partial frame may be buffered: it was never decided, so
   * closing the connection loses no request). A connection that holds only a half-sent frame is
   * as evictable as an idle one: else one address sending headers could keep every slot.
   */
  get evictable(): boolean {
    return !this.#closing && !this.#sock.destroyed && this.#queue.length === 0;
  }

  /** Closed to make room for a connection from another address: told `busy`, then ended. */
  evict(): void {
    this.#closeWith(
      errorBody(
        NodeErrorCodes.BUSY,
        'the node is at its connection limit: this connection (idle, or holding only a partial frame) was closed for a caller from another address',
      ),
    );
  }

  /** Stops reading; sends the replies still owed, then ends the connection. */
  drain(): void {
    if (this.#closing) return;
    this.#closing = true;
    if (this.#readTimer) clearTimeout(this.#readTimer);
    this.#sock.pause();
    this.#flush();
  }

  get closed(): boolean {
    return this.#sock.destroyed;
  }

  #onData(chunk: Buffer): void {
    if (this.#closing) return;
    const { bodies, error } = this.#reader.read(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    // Requests completed before a bad length in the same chunk are still answered, in order.
    for (const body of bodies) this.#enqueue(this.#server.handler(body, this.#notice, this.#peer));
    if (error) {
      this.#server.metrics.errors.inc({ code: error.code });
      this.#closeWith(errorBody(error.code, error.message));
      return;
    }
    if (!this.#paused && (this.#queue.length >= this.#server.limits.maxPending || this.#sock.writableLength > WRITE_HIGH_WATER)) {
      this.#paused = true;
      this.#sock.pause();
    }
    this.#armReadTimer(bodies.length > 0);
  }

  /**
   * The read timeout measures how long the frame being received has been incomplete: it starts
   * when a partial frame begins (restarting when a chunk completes one frame and begins the
   * next), and does not run while the node itself has stopped reading this connection.
   */
  #armReadTimer(frameCompleted: boolean): void {
    if (this.#reader.buffered === 0 || this.#paused || this.#closing) {
      if (this.#readTimer) clearTimeout(this.#readTimer);
      this.#readTimer = undefined;
      return;
    }
    if (this.#readTimer && !frameCompleted) return;
    if (this.#readTimer) clearTimeout(this.#readTimer);
    this.#readTimer = setTimeout(() => this.#onReadTimeout(), this.#server.limits.readTimeoutMs);
  }

  #onReadTimeout(): void {
    this.#readTimer = undefined;
    if (this.#closing || this.#reader.buffered === 0) return;
    this.#server.metrics.errors.inc({ code: NodeErrorCodes.READ_TIMEOUT });
    this.#closeWith(
      errorBody(
        NodeErrorCodes.READ_TIMEOUT,
        `a partial frame (${this.#reader.buffered} bytes) was not completed within ${this.#server.limits.readTimeoutMs} ms`,
      ),
    );
  }

  /** Queues a final error reply after the pending ones, then closes the connection. */
  #closeWith(body: Uint8Array): void {
    this.#closing = true;
    if (this.#readTimer) clearTimeout(this.#readTimer);
    this.#sock.pause();
    this.#queue.push({ body });
    this.#flush();
  }

  /** Aborted when the socket closes (the {@link NoticeSink}'s `closed`). */
  readonly #gone = new AbortController();

  /** Writes a notice now: its request's reply is still queued, so the notice goes out before it. */
  readonly #notice: NoticeSink = Object.assign(
    (body: Uint8Array) => {
      if (this.#sock.destroyed || this.#sock.writableEnded) return;
      if (this.#sock.writableLength > NOTICE_BACKLOG_MAX_BYTES) {
        this.#sock.destroy(new Error(`the peer read none of ${this.#sock.writableLength} bytes of notices (caller-slow)`));
        return;
      }
      this.#sock.write(frameMessage(body, MAX_DECLARABLE_LENGTH));
    },
    { closed: this.#gone.signal },
  );

  #enqueue(p: Promise<Uint8Array>): void {
    const slot: Slot = { body: undefined };
    this.#queue.push(slot);
    p.then(
      (body) => {
        slot.body = body;
        this.#scheduleFlush();
      },
      (e: Error) => {
        slot.body = errorBody(NodeErrorCodes.INTERNAL, e.message);
        this.#scheduleFlush();
      },
    );
  }

  /**
   * Flushes once the current run of promise callbacks is over: the replies of one durable batch
   * settle in one such run, and go out in one write instead of one write each.
   */
  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    process.nextTick(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    // Replies that are ready go out in one write (fewer syscalls and segments under load).
    let corked = false;
    while (this.#queue.length > 0 && this.#queue[0]!.body !== undefined) {
      const body = this.#queue.shift()!.body!;
      if (this.#sock.destroyed) continue;
      if (!corked) {
        this.#sock.cork();
        corked = true;
      }
      this.#sock.write(frameMessage(body, MAX_DECLARABLE_LENGTH));
    }
    if (corked) this.#sock.uncork();
    if (this.#closing && this.#queue.length === 0) {
      // Fully closed once the last reply is written: the listener allows half-open connections,
      // and a client that never closes its half would otherwise hold this slot until the idle timeout.
      this.#sock.end(() => this.#sock.destroy());
      return;
    }
    this.#maybeResume();
  }

  #maybeResume(): void {
    if (!this.#paused || this.#closing) return;
    if (this.#queue.length < this.#server.limits.maxPending / 2 + 1 && this.#sock.writableLength <= WRITE_HIGH_WATER) {
      this.#paused = false;
      this.#sock.resume();
      this.#armReadTimer(true); // a frame left incomplete while paused gets a full timeout again
    }
  }
}

/** The jcp/1 listener. */
export class JcpServer {
  readonly handler: MessageHandler;
  readonly limits: ServerLimits;
  readonly metrics: NodeMetrics;
  readonly #log: Logger;
  readonly #conns = new Set<Connection>();
  /** Open connections per remote address. */
  readonly #perPeer = new Map<string, number>();
  readonly #server: Server;
  /** TLS only: raw sockets accepted by TCP, until they close. */
  readonly #handshaking = new Set<Socket>();
  #accepting = true;

  constructor(handler: MessageHandler, limits: ServerLimits, metrics: NodeMetrics, log: Logger) {
    this.handler = handler;
    this.limits = limits;
    this.metrics = metrics;
    this.#log = log;
    const tls = limits.tls;
    this.#server =
      tls === undefined
        ? createServer({ noDelay: true, allowHalfOpen: true }, (sock) => this.#accept(sock))
        : createTlsServer(
            {
              cert: tls.cert,
              key: tls.key,
              ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
              requestCert: tls.clientCerts !== 'off',
              // `request`: a client without a certificate is let in (its signature still decides);
              // one that sends a certificate that does not verify fails the handshake (below).
              rejectUnauthorized: tls.clientCerts === 'require',
              minVersion: 'TLSv1.2',
              noDelay: true,
              allowHalfOpen: true,
            },
            (sock) => {
              if (
                tls.clientCerts === 'request' &&
                sock.getPeerCertificate() &&
                Object.keys(sock.getPeerCertificate()).length > 0 &&
                !sock.authorized
              ) {
                this.metrics.tlsRefused.inc({ why: 'client-certificate' });
                sock.destroy();
                return;
              }
              this.#accept(sock);
            },
          );
    if (tls !== undefined) {
      // Sockets still in (or failed at) the handshake are not connections yet: close() ends them.
      this.#server.on('connection', (raw: Socket) => {
        this.#handshaking.add(raw);
        raw.once('close', () => this.#handshaking.delete(raw));
      });
      // A plaintext client (or a failed handshake) never reaches #accept: counted and logged.
      this.#server.on('tlsClientError', (e: Error & { code?: string }) => {
        this.metrics.tlsRefused.inc({ why: 'handshake' });
        this.#log.debug({ err: e.message, code: e.code }, 'jcp/1 TLS handshake failed (plaintext or untrusted client)');
      });
    }
    this.#server.on('error', (e) => this.#log.error({ err: e }, 'listener error'));
  }

  /** Open connections. */
  get connections(): number {
    return this.#conns.size;
  }

  #accept(sock: Socket): void {
    const peer = sock.remoteAddress ?? '';
    if (this.#accepting && this.#conns.size >= this.limits.maxConnections) {
      const victim = this.#victimFor(peer);
      if (victim !== undefined) {
        this.metrics.errors.inc({ code: NodeErrorCodes.BUSY });
        victim.evict();
        this.#log.warn(
          { peer, evicted: victim.peer },
          'connection limit: a connection owing no reply, of the address holding the most, was closed',
        );
      }
    }
    if (!this.#accepting || this.#conns.size - this.#evicting >= this.limits.maxConnections) {
      this.metrics.errors.inc({ code: NodeErrorCodes.BUSY });
      sock.on('error', () => undefined);
      // Closed for good once the reply is written (and at the latest after the read timeout): the
      // listener allows half-open connections, and a refused client that never closes its half
      // would otherwise hold this socket, uncounted, and keep the node from stopping.
      sock.setTimeout(this.limits.readTimeoutMs, () => sock.destroy());
      sock.end(frameMessage(errorBody(NodeErrorCodes.BUSY, 'the node is at its connection limit or stopping')), () => sock.destroy());
      return;
    }
    const c = new Connection(sock, this);
    this.#conns.add(c);
    this.#perPeer.set(peer, (this.#perPeer.get(peer) ?? 0) + 1);
    this.metrics.connections.set(this.#conns.size);
  }

  /** Connections told to close for a newcomer that have not closed yet (they no longer count). */
  #evicting = 0;
  readonly #evicted = new WeakSet<Connection>();

  /**
   * At the limit: an idle (else only partly sent, no reply owed) connection of the address that
   * holds the most connections, if that is another address holding more than one connection more
   * than `peer` does; else undefined.
   */
  #victimFor(peer: string): Connection | undefined {
    let top = '';
    let most = 0;
    for (const [p, n] of this.#perPeer) {
      if (n > most) {
        top = p;
        most = n;
      }
    }
    if (top === peer || most <= (this.#perPeer.get(peer) ?? 0) + 1) return undefined;
    // An idle connection first; else one holding only a partial frame (no reply owed).
    let partial: Connection | undefined;
    for (const c of this.#conns) {
      if (c.peer !== top || this.#evicted.has(c)) continue;
      if (c.idle) return this.#markEvicted(c);
      if (partial === undefined && c.evictable) partial = c;
    }
    return partial === undefined ? undefined : this.#markEvicted(partial);
  }

  #markEvicted(c: Connection): Connection {
    this.#evicted.add(c);
    this.#evicting++;
    return c;
  }

  /** @internal Called when a connection closes. */
  forget(c: Connection): void {
    if (!this.#conns.delete(c)) return;
    if (this.#evicted.has(c)) this.#evicting--;
    const n = (this.#perPeer.get(c.peer) ?? 1) - 1;
    if (n <= 0) this.#perPeer.delete(c.peer);
    else this.#perPeer.set(c.peer, n);
    this.metrics.connections.set(this.#conns.size);
  }

  /** Listens on `host:port` (port 0 = any free port); resolves to the bound port. */
  async listen(host: string, port: number): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ host, port, backlog: 4096 }, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /**
   * Stops accepting, lets every connection send the replies it still owes (up to `graceMs`),
   * closes them, and resolves when the listener is closed.
   */
  async close(graceMs = 2000): Promise<void> {
    this.#accepting = false;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const c of this.#conns) c.drain();
    const end = Date.now() + graceMs;
    while (this.#conns.size > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    for (const c of this.#conns) c.destroy();
    for (const raw of this.#handshaking) raw.destroy();
    await closed;
  }
}
