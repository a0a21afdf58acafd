/**
 * The jcp/1 TCP server (spec §11): framing, per-connection ordering and the protections that keep
 * one slow or hostile connection from stalling the others.
 *
 * - Each connection has its own `FrameReader`: a declared length above the cap is refused before
 *   any buffer is allocated (`frame-too-large`), answered, and the connection closed (a stream
 *   cannot be resynchronised after a bad length).
 * - A partial frame must complete within `readTimeoutMs` of its first byte (`read-timeout`, then
 *   close): a client that trickles bytes holds one bounded buffer for a bounded time. The clock
 *   restarts with each new frame (not with each byte) and stops while the node holds bytes of the
 *   connection it has not taken. A
 *   connection with no traffic for `idleTimeoutMs` is closed.
 * - Requests that a chunk completes before a bad length are answered before the error reply.
 * - A client that half-closes (FIN) after its last request still gets every reply owed; the node
 *   then ends the connection.
 * - Replies go out in request order on each connection (clients match them FIFO), but requests
 *   are handled concurrently; at most `maxPending` unanswered requests per connection, and the
 *   node stops taking requests from a connection that does not read its replies.
 * - Bytes received wait in the connection's inbox (at most 64 KiB or 64 reads; the socket is not
 *   read past that, nor while the connection may take no more requests) and are taken in turns:
 *   each connection with bytes gets a turn of at most {@link TURN_MESSAGES} messages (fewer when
 *   many connections wait: {@link MAX_IN_FLIGHT} shared among them, at least one each),
 *   round-robin, and a round yields to I/O after 5 ms. At most `maxInFlight` requests are being
 *   handled at once, all connections together: a round that finds none of that room left stops,
 *   and the turns go on in order once a quarter of it is back. So a peer that pipelines thousands
 *   of messages does not hold the event loop, and the work a round starts (a handler's part after
 *   its first `await` included) is bounded however many connections send.
 * - Replies and notices written but not yet taken by the kernel are counted per peer address,
 *   every connection from it together (at most 4 MiB before its connections' requests stop being
 *   taken), and in total (`unsentBudgetBytes`, default {@link UNSENT_BUDGET_BYTES}: past it, an
 *   address with unsent bytes of its own is not taken from until they go out, and a turn takes
 *   one message). What is held past the budget is the replies of the requests in flight and one
 *   more reply per address; past {@link UNSENT_CEILING_FACTOR} × the budget, the connections
 *   holding the most are closed until the total is within it. The replies ready at once go out
 *   as one buffer in one write.
 * - TLS: a connection in its handshake is bounded apart (at most {@link HANDSHAKES_PER_PEER} per
 *   address and `maxConnections` in all, where a newcomer takes the place of the oldest of the
 *   address holding the most; each ended after `readTimeoutMs` unless it completes).
 * - With the node's per-address `rate-limited` check (`hooks.admits`), an address refused
 *   `rate-limited` has its new connections told so and closed, and a connection that sends
 *   {@link REFUSED_BEFORE_CLOSE} refused messages, or more than {@link REFUSED_BYTES_BEFORE_CLOSE}
 *   bytes of them, within {@link REFUSED_WINDOW_MS} is closed; the bytes are counted on a message's
 *   declared length, before its body is read. A `read-timeout` spends a token (`hooks.charge`).
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
import { FRAME_HEADER_BYTES, frameMessage, FrameReader, MAX_DECLARABLE_LENGTH } from '../core/index.ts';
import { peerAddress } from '../io/index.ts';
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
  /** Unanswered requests per connection before no more are taken from it. */
  readonly maxPending: number;
  /**
   * Most bytes of replies and notices held unsent, all connections together (default
   * {@link UNSENT_BUDGET_BYTES}). Past it, no request is taken from an address (a
   * {@link peerAddress}) that itself holds unsent bytes until they are sent, and a turn takes one
   * message; addresses whose connections read their replies go on. With the per-address bound
   * (4 MiB), it keeps peers that send and never read from holding the node's memory: what is held
   * is this budget plus the replies of the requests in flight and one more reply per address.
   */
  readonly unsentBudgetBytes?: number | undefined;
  /** Requests being handled at once, all connections together (default {@link MAX_IN_FLIGHT}). */
  readonly maxInFlight?: number | undefined;
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

/**
 * TLS: handshakes one peer address ({@link peerAddress}) may have in progress at once; one more
 * is closed at once. Each must complete within `readTimeoutMs`.
 */
export const HANDSHAKES_PER_PEER = 64;
/**
 * The fairness rule of a full server (connections, or TLS handshakes): the address holding the
 * most (`sizeOf` of its entry in `byPeer`), if that is not `peer` and holds more than one more
 * than `peer`'s `mine`; else undefined, and the newcomer is refused.
 */
function busiestOther<T>(byPeer: ReadonlyMap<string, T>, peer: string, mine: number, sizeOf: (t: T) => number): string | undefined {
  let top: string | undefined;
  let most = 0;
  for (const [p, t] of byPeer) {
    const n = sizeOf(t);
    if (n > most) {
      top = p;
      most = n;
    }
  }
  return top === undefined || top === peer || most <= mine + 1 ? undefined : top;
}

/** Take no more requests from the connections of an address whose unsent replies exceed this many bytes. */
const WRITE_HIGH_WATER = 4 << 20;
/**
 * Default of {@link ServerLimits.unsentBudgetBytes}: most bytes of replies and notices, all
 * connections together, the node holds written but not yet taken by the kernel.
 */
export const UNSENT_BUDGET_BYTES = 64 << 20;
/**
 * Past this many times {@link ServerLimits.unsentBudgetBytes} held unsent, the connections holding
 * the most are closed until the total is within the budget: what bounds the total however many
 * addresses each hold one reply past the budget.
 */
export const UNSENT_CEILING_FACTOR = 2;
/**
 * Bytes a connection may hold received but not yet taken (its inbox): past it the socket is not
 * read until the node takes them, and the peer's further bytes wait in the kernel.
 */
const INBOX_MAX_BYTES = 64 << 10;
/**
 * Reads a connection's inbox may hold (each read one buffer): past it the socket is not read
 * either, so a peer sending one-byte segments holds at most this many small buffers.
 */
const INBOX_MAX_READS = 64;
/**
 * Most messages one connection's turn takes (the server's round-robin over connections). With
 * many connections waiting, a turn takes fewer: {@link MAX_IN_FLIGHT} shared among them, at least
 * one each, so a connection's wait grows with the number of connections, not with their backlogs.
 */
export const TURN_MESSAGES = 32;
/**
 * A round of turns stops once it has run this long (milliseconds; at least one turn runs): the
 * rest wait for the next turn of the event loop, after its I/O, so reading sockets and accepting
 * connections (Node accepts one per turn of its loop) never wait behind a long round.
 */
const ROUND_MS = 5;
/**
 * A connection that sends this many messages refused `rate-limited` (its address's bucket empty,
 * node/ratelimit.ts) within {@link REFUSED_WINDOW_MS} is closed: told `rate-limited` once more,
 * then ended, instead of being answered message by message for as long as it keeps sending. The
 * messages admitted in between (the bucket refills) do not reset the count.
 */
export const REFUSED_BEFORE_CLOSE = 64;
/**
 * A connection whose messages refused `rate-limited` within {@link REFUSED_WINDOW_MS} would come
 * to more than this many bytes (headers included) is closed: a message from a refused address is
 * refused on its declared length, before its body is read, when it would take the count past this
 * (told `rate-limited` once more, then ended). So a refused address's large frames are not read,
 * allocated and copied up to {@link REFUSED_BEFORE_CLOSE} times each connection (2026-12-07: 300
 * connections sending frames of 1 MiB of junk, 1.1 s for another address's call).
 */
export const REFUSED_BYTES_BEFORE_CLOSE = 256 << 10;
/** The window {@link REFUSED_BEFORE_CLOSE} and {@link REFUSED_BYTES_BEFORE_CLOSE} are counted in, milliseconds. */
export const REFUSED_WINDOW_MS = 10_000;
/**
 * Default of {@link ServerLimits.maxInFlight}: requests handed to the handler and not yet answered,
 * all connections together. Past it no connection's turn takes more until replies settle, so the
 * work a round starts (a handler's part after its first `await` included) is bounded however many
 * connections send at once.
 */
export const MAX_IN_FLIGHT = 256;
/**
 * Most bytes of notices queued on a connection whose peer does not read them (an A2A stream to a
 * stalled caller): past it the connection is dropped, so its calls end as `caller-gone` and the
 * upstream stream is closed, instead of the node buffering without bound.
 */
export const NOTICE_BACKLOG_MAX_BYTES = 2 * WRITE_HIGH_WATER;

interface Slot {
  body: Uint8Array | undefined;
}

/**
 * Optional hooks of {@link JcpServer}: `admits(peer)` is false while the address `peer` is
 * refused `rate-limited` (the node's per-address bucket, node/ratelimit.ts). With it, such an
 * address's new connections are refused at once, and a connection that sends
 * {@link REFUSED_BEFORE_CLOSE} refused messages within {@link REFUSED_WINDOW_MS} is closed.
 */
export interface ServerHooks {
  readonly admits?: ((peer: string) => boolean) | undefined;
  /**
   * Takes one token of the address `peer` for a failure the server answers itself: a
   * `read-timeout` (a frame not completed in time), as the node's handler charges its error replies.
   */
  readonly charge?: ((peer: string) => void) | undefined;
}

class Connection {
  readonly #sock: Socket;
  readonly #reader: FrameReader;
  readonly #server: JcpServer;
  readonly #peer: string;
  readonly #queue: Slot[] = [];
  #readTimer: NodeJS.Timeout | undefined;
  #closing = false;
  /** The socket is paused: the inbox is full, or the connection may take no more requests. */
  #paused = false;
  #flushScheduled = false;
  /** Bytes received and not yet read into messages, oldest first; taken in the server's turns. */
  readonly #inbox: Uint8Array[] = [];
  #inboxBytes = 0;
  /** In the server's queue of connections waiting for a turn. */
  #waiting = false;
  /** The peer half-closed: once the inbox is taken, the connection drains. */
  #peerEnded = false;
  /** Bytes written to the socket that it has not yet handed to the kernel (counted in the server's total). */
  #unsent = 0;
  /** Messages refused `rate-limited` since {@link #refusedSince} (ms, performance.now()). */
  #refused = 0;
  /** Bytes (headers included) of the messages counted in {@link #refused}. */
  #refusedBytes = 0;
  #refusedSince = 0;

  constructor(sock: Socket, server: JcpServer) {
    this.#sock = sock;
    this.#server = server;
    this.#peer = peerAddress(sock.remoteAddress);
    this.#reader = new FrameReader(server.limits.frameCap);
    sock.setNoDelay(true);
    sock.setTimeout(server.limits.idleTimeoutMs, () => sock.destroy());
    sock.on('data', (chunk: Buffer) => this.#onData(chunk));
    sock.on('error', () => undefined);
    // A client that half-closes (FIN after its last request) still gets every reply it is owed:
    // the requests still in the inbox are taken first, and the connection ends once the replies
    // are written.
    sock.on('end', () => {
      this.#peerEnded = true;
      if (this.#inbox.length === 0) this.drain();
    });
    sock.on('close', () => {
      this.#closing = true; // a turn still queued for it takes nothing
      this.#gone.abort();
      if (this.#readTimer) clearTimeout(this.#readTimer);
      this.#dropInbox();
      this.#server.unsentChanged(-this.#unsent, this.#peer);
      this.#unsent = 0;
      this.#server.forget(this);
    });
  }

  destroy(): void {
    this.#sock.destroy();
  }

  /** Bytes written to this connection that the kernel has not taken yet. */
  get unsent(): number {
    return this.#unsent;
  }

  /** Closes it with its unsent bytes counted off at once (the server is over its ceiling). */
  shed(): void {
    this.#server.unsentChanged(-this.#unsent, this.#peer);
    this.#unsent = 0; // the write callbacks of a destroyed socket then count nothing off
    this.#sock.destroy();
  }

  /** The remote IP address. */
  get peer(): string {
    return this.#peer;
  }

  /** Reads (socket buffers) held in the inbox, not yet taken. */
  get inboxReads(): number {
    return this.#inbox.length;
  }

  /** Nothing buffered, nothing owed, not closing: closing it loses no request. */
  get idle(): boolean {
    return this.evictable && this.#reader.buffered === 0 && this.#inbox.length === 0;
  }

  /**
   * No reply owed and not closing (a partial frame, or bytes not yet taken, may be buffered: they
   * were never decided, so closing the connection loses no request). A connection that holds only
   * a half-sent frame is as evictable as an idle one: else one address sending headers could keep
   * every slot.
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
    this.#dropInbox();
    if (this.#readTimer) clearTimeout(this.#readTimer);
    this.#sock.pause();
    this.#flush();
  }

  get closed(): boolean {
    return this.#sock.destroyed;
  }

  #onData(chunk: Buffer): void {
    if (this.#closing) return;
    this.#inbox.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#inboxBytes += chunk.byteLength;
    // The read timeout keeps running: a frame trickled byte by byte is still one frame late.
    if (!this.#paused && (this.#inboxFull() || !this.#mayTake())) {
      this.#paused = true;
      this.#sock.pause();
    }
    this.#wait();
  }

  /** The inbox holds {@link INBOX_MAX_BYTES} or {@link INBOX_MAX_READS}: the socket is not read. */
  #inboxFull(): boolean {
    return this.#inboxBytes >= INBOX_MAX_BYTES || this.#inbox.length >= INBOX_MAX_READS;
  }

  #dropInbox(): void {
    this.#inbox.length = 0;
    this.#inboxBytes = 0;
  }

  /** Joins the server's queue for a turn when there are bytes to take and room to take them. */
  #wait(): void {
    if (this.#waiting || this.#closing || this.#inbox.length === 0 || !this.#mayTake()) return;
    this.#waiting = true;
    this.#server.enqueueTurn(this);
  }

  /**
   * @internal One turn (the server's round-robin, {@link JcpServer}): reads at most `max` messages
   * out of the inbox while fewer than `maxPending` replies are owed and the unsent bytes allow it,
   * and hands each to the handler. Bytes past the last message taken stay in the inbox. A peer
   * that pipelines thousands of messages gets them handled a turn at a time, every other
   * connection's turn in between; a peer that never reads its replies stops being taken.
   */
  takeTurn(max: number): void {
    this.#waiting = false;
    let taken = 0;
    while (!this.#closing && this.#inbox.length > 0 && taken < max && this.#mayTake()) {
      const room = Math.min(max - taken, this.#server.limits.maxPending - this.#queue.length, this.#server.inFlightRoom);
      if (room <= 0) break; // no in-flight room left: it asks again, behind the others
      const chunk = this.#inbox[0]!;
      const fed = this.#mayRead(chunk);
      if (fed === undefined) return; // refused on its declared length: closed
      const { bodies, error, rest } = this.#reader.read(fed, room);
      const left = (rest?.length ?? 0) + chunk.length - fed.length;
      if (left === 0) this.#inbox.shift();
      else this.#inbox[0] = chunk.subarray(chunk.length - left);
      this.#inboxBytes -= chunk.length - left;
      for (const body of bodies) {
        // Requests completed before a bad length in the same chunk are still answered, in order.
        if (this.#refusedFor(body)) return;
        this.#enqueue(this.#server.handler(body, this.#notice, this.#peer));
        taken++;
      }
      if (error) {
        this.#server.metrics.errors.inc({ code: error.code });
        this.#closeWith(errorBody(error.code, error.message));
        return;
      }
    }
    if (this.#closing) return;
    if (this.#peerEnded && this.#inbox.length === 0) {
      this.drain();
      return;
    }
    this.#armReadTimer(taken > 0);
    this.#maybeResume();
  }

  /**
   * Counts a message that arrives while the peer's address is refused `rate-limited`; at
   * {@link REFUSED_BEFORE_CLOSE} within {@link REFUSED_WINDOW_MS} the connection is closed (true:
   * the message is not handled).
   */
  #refusedFor(body: Uint8Array): boolean {
    if (this.#admitted()) return false;
    this.#refusedWindow();
    this.#refusedBytes += FRAME_HEADER_BYTES + body.length;
    if (++this.#refused < REFUSED_BEFORE_CLOSE) return false;
    this.#closeRefused(
      `${REFUSED_BEFORE_CLOSE} messages within ${REFUSED_WINDOW_MS / 1000} s while ${this.#peer} is rate-limited`,
      'messages',
    );
    return true;
  }

  /** Whether the peer's address is admitted now (no `rate-limited` hook, or it admits the address). */
  #admitted(): boolean {
    const admits = this.#server.hooks.admits;
    return admits === undefined || admits(this.#peer);
  }

  /** Tells the peer `rate-limited` once more (`why` it is closed), counts the close by `counted` (`jcp_rate_limited_closes_total`) and closes the connection. */
  #closeRefused(why: string, counted: 'messages' | 'bytes'): void {
    this.#server.metrics.errors.inc({ code: NodeErrorCodes.RATE_LIMITED });
    this.#server.metrics.rateLimitedCloses.inc({ why: counted });
    this.#closeWith(errorBody(NodeErrorCodes.RATE_LIMITED, `${why}: the connection is closed; retry later`));
  }

  /** Starts a new window of refused messages once {@link REFUSED_WINDOW_MS} have passed since the last began. */
  #refusedWindow(): void {
    const now = performance.now();
    if (now - this.#refusedSince <= REFUSED_WINDOW_MS) return;
    this.#refused = 0;
    this.#refusedBytes = 0;
    this.#refusedSince = now;
  }

  /**
   * What of `chunk` the frame reader may take now: all of it while the peer's address is admitted.
   * While it is refused `rate-limited`, a message's body is not read before its declared length is
   * counted: the reader takes only the rest of a header first, and a message whose length would
   * take the refused bytes within the window past {@link REFUSED_BYTES_BEFORE_CLOSE} closes the
   * connection (undefined), its body unread. So a refused address's large frames cost the node a
   * header each, not a megabyte read, allocated and copied.
   */
  #mayRead(chunk: Uint8Array): Uint8Array | undefined {
    if (this.#admitted()) return chunk;
    const declared = this.#reader.declared;
    if (declared === undefined) return chunk.subarray(0, Math.min(chunk.length, FRAME_HEADER_BYTES - this.#reader.buffered));
    this.#refusedWindow();
    if (this.#refusedBytes + FRAME_HEADER_BYTES + declared <= REFUSED_BYTES_BEFORE_CLOSE) return chunk;
    this.#closeRefused(
      `a message of ${declared} bytes while ${this.#peer} is rate-limited (more than ${REFUSED_BYTES_BEFORE_CLOSE} bytes refused within ${REFUSED_WINDOW_MS / 1000} s)`,
      'bytes',
    );
    return undefined;
  }

  /**
   * More messages may be taken: fewer than `maxPending` replies owed, and the unsent bytes of its
   * peer address (every connection from it together) at most {@link WRITE_HIGH_WATER}, and none
   * while the server's total is past its budget. Counted by address, not connection: otherwise
   * each new connection that never reads got one more reply (2026-12-06: 2,009 connections from
   * 49 addresses held 3.8 GB of replays).
   */
  #mayTake(): boolean {
    const unsent = this.#server.peerUnsent(this.#peer);
    return this.#queue.length < this.#server.limits.maxPending && unsent <= WRITE_HIGH_WATER && !(unsent > 0 && this.#server.overBudget);
  }

  /** @internal Its peer's unsent bytes went down (or the server's total came under budget): take again if it may. */
  resume(): void {
    this.#maybeResume();
  }

  /** Writes `bytes` to the socket, counting them unsent until the socket has handed them to the kernel. */
  #write(bytes: Uint8Array): void {
    const n = bytes.length;
    this.#unsent += n;
    this.#server.unsentChanged(n, this.#peer);
    this.#sock.write(bytes, () => {
      if (this.#sock.destroyed && this.#unsent === 0) return; // counted off at close
      this.#unsent -= n;
      this.#server.unsentChanged(-n, this.#peer);
      this.#maybeResume();
    });
  }

  /**
   * The read timeout measures how long the frame being received has been incomplete: it starts
   * when a partial frame begins (restarting when a turn completes one frame and begins the
   * next), and does not run while bytes wait in the inbox (the node, not the peer, holds them).
   */
  #armReadTimer(frameCompleted: boolean): void {
    if (this.#reader.buffered === 0 || this.#inbox.length > 0 || this.#closing) {
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
    if (this.#closing || this.#reader.buffered === 0 || this.#inbox.length > 0) return;
    this.#server.metrics.errors.inc({ code: NodeErrorCodes.READ_TIMEOUT });
    // A failure of the peer like any other error reply: it spends a token, so an address that
    // keeps opening connections and trickling frames is refused at connect once its bucket is empty.
    this.#server.hooks.charge?.(this.#peer);
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
    this.#dropInbox();
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
      if (this.#unsent > NOTICE_BACKLOG_MAX_BYTES) {
        this.#sock.destroy(new Error(`the peer read none of ${this.#unsent} bytes of notices (caller-slow)`));
        return;
      }
      this.#write(frameMessage(body, MAX_DECLARABLE_LENGTH));
    },
    { closed: this.#gone.signal },
  );

  #enqueue(p: Promise<Uint8Array>): void {
    const slot: Slot = { body: undefined };
    this.#queue.push(slot);
    this.#server.inFlightChanged(1);
    p.then(
      (body) => {
        slot.body = body;
        this.#server.inFlightChanged(-1);
        this.#scheduleFlush();
      },
      (e: Error) => {
        slot.body = errorBody(NodeErrorCodes.INTERNAL, e.message);
        this.#server.inFlightChanged(-1);
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
    // Replies that are ready go out in one write of one buffer (fewer syscalls and segments under
    // load, and one entry in the socket's queue however many small replies it holds).
    const frames: Uint8Array[] = [];
    let bytes = 0;
    while (this.#queue.length > 0 && this.#queue[0]!.body !== undefined) {
      const body = this.#queue.shift()!.body!;
      if (this.#sock.destroyed) continue;
      const frame = frameMessage(body, MAX_DECLARABLE_LENGTH);
      frames.push(frame);
      bytes += frame.length;
    }
    if (frames.length === 1) this.#write(frames[0]!);
    else if (frames.length > 1) this.#write(Buffer.concat(frames, bytes));
    if (this.#closing && this.#queue.length === 0) {
      // Fully closed once the last reply is written: the listener allows half-open connections,
      // and a client that never closes its half would otherwise hold this slot until the idle timeout.
      this.#sock.end(() => this.#sock.destroy());
      return;
    }
    this.#maybeResume();
  }

  /**
   * After replies went out or were handed to the kernel: asks for a turn if the inbox holds bytes
   * that may now be taken, and reads the socket again once the inbox has room.
   */
  #maybeResume(): void {
    if (this.#closing) return;
    this.#wait();
    if (this.#paused && !this.#inboxFull() && this.#mayTake()) {
      this.#paused = false;
      this.#sock.resume();
    }
  }
}

/** The jcp/1 listener. */
export class JcpServer {
  readonly handler: MessageHandler;
  readonly limits: ServerLimits;
  readonly metrics: NodeMetrics;
  readonly hooks: ServerHooks;
  readonly #unsentBudget: number;
  #unsent = 0;
  /** Unsent bytes by peer address (every connection from it together); absent: none. */
  readonly #unsentByPeer = new Map<string, number>();
  readonly #maxInFlight: number;
  #inFlight = 0;
  /** A round stopped for want of in-flight room: the next runs once a quarter of it is back. */
  #waitingForRoom = false;
  readonly #log: Logger;
  readonly #conns = new Set<Connection>();
  /** Open connections per remote address. */
  readonly #perPeer = new Map<string, number>();
  readonly #server: Server;
  /**
   * TLS only: raw sockets accepted by TCP and not yet through the handshake, by `address:port`
   * (what the TLS socket reports too), each with the timer that ends it; and how many per peer.
   */
  readonly #handshaking = new Map<string, { readonly raw: Socket; readonly peer: string; readonly timer: NodeJS.Timeout }>();
  /** The keys of {@link #handshaking} by peer, oldest first. */
  readonly #handshakesOf = new Map<string, Set<string>>();
  #accepting = true;

  /** `hooks`: {@link ServerHooks} (the node passes its per-address `rate-limited` check). */
  constructor(handler: MessageHandler, limits: ServerLimits, metrics: NodeMetrics, log: Logger, hooks: ServerHooks = {}) {
    this.handler = handler;
    this.limits = limits;
    this.metrics = metrics;
    this.hooks = hooks;
    this.#unsentBudget = limits.unsentBudgetBytes ?? UNSENT_BUDGET_BYTES;
    this.#maxInFlight = limits.maxInFlight ?? MAX_IN_FLIGHT;
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
              this.#handshakeDone(`${sock.remoteAddress}:${sock.remotePort}`);
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
      // Sockets still in (or failed at) the handshake are not connections yet: bounded per peer
      // and in total, ended after `readTimeoutMs` (node:tls would keep one whose client closed
      // before its handshake, half-open, for good), and by close().
      this.#server.on('connection', (raw: Socket) => this.#handshakeStarted(raw));
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

  /** TLS: connections accepted by TCP whose handshake has not completed. */
  get handshaking(): number {
    return this.#handshaking.size;
  }

  /**
   * A raw TLS connection: refused at once past {@link HANDSHAKES_PER_PEER} handshakes of its peer
   * (`jcp_tls_refused_connections_total{why="handshake-limit"}`); with `maxConnections` in their
   * handshake already, it takes the place of the oldest handshake of the address holding the most
   * (`why="handshake-evicted"`) if that address holds more than one more than its own, else it is
   * refused (`handshake-limit`): addresses that fill the handshakes cannot keep another out.
   * Ended unless its handshake completes within `readTimeoutMs` (`why="handshake-timeout"`).
   */
  #handshakeStarted(raw: Socket): void {
    raw.on('error', () => undefined);
    if (raw.remoteAddress === undefined) {
      raw.destroy(); // closed before it was seen
      return;
    }
    const peer = peerAddress(raw.remoteAddress);
    const mine = this.#handshakesOf.get(peer)?.size ?? 0;
    const full = this.#handshaking.size >= this.limits.maxConnections;
    const victim = full ? this.#handshakeVictimFor(peer, mine) : undefined;
    if (!this.#accepting || mine >= HANDSHAKES_PER_PEER || (full && victim === undefined)) {
      this.metrics.tlsRefused.inc({ why: 'handshake-limit' });
      raw.destroy();
      return;
    }
    if (victim !== undefined) {
      this.metrics.tlsRefused.inc({ why: 'handshake-evicted' });
      const v = this.#handshaking.get(victim)!;
      this.#handshakeDone(victim);
      v.raw.destroy();
    }
    const key = `${raw.remoteAddress}:${raw.remotePort}`;
    const timer = setTimeout(() => {
      if (this.#handshaking.get(key)?.raw !== raw) return;
      this.metrics.tlsRefused.inc({ why: 'handshake-timeout' });
      raw.destroy();
    }, this.limits.readTimeoutMs);
    this.#handshaking.set(key, { raw, peer, timer });
    const keys = this.#handshakesOf.get(peer);
    if (keys === undefined) this.#handshakesOf.set(peer, new Set([key]));
    else keys.add(key);
    raw.once('close', () => {
      if (this.#handshaking.get(key)?.raw === raw) this.#handshakeDone(key);
    });
  }

  /** The handshake of the connection from `key` (`address:port`) completed, or it closed. */
  #handshakeDone(key: string): void {
    const h = this.#handshaking.get(key);
    if (h === undefined) return;
    clearTimeout(h.timer);
    this.#handshaking.delete(key);
    const keys = this.#handshakesOf.get(h.peer);
    keys?.delete(key);
    if (keys?.size === 0) this.#handshakesOf.delete(h.peer);
  }

  /**
   * With the handshakes full: the key of the oldest handshake of the address holding the most, if
   * that is another address holding more than one more than `peer` (which holds `mine`); else undefined.
   */
  #handshakeVictimFor(peer: string, mine: number): string | undefined {
    const top = busiestOther(this.#handshakesOf, peer, mine, (keys) => keys.size);
    return top === undefined ? undefined : this.#handshakesOf.get(top)!.values().next().value;
  }

  /** Reads held in connections' inboxes, not yet taken, all connections together (a walk over them). */
  get inboxReads(): number {
    let n = 0;
    for (const c of this.#conns) n += c.inboxReads;
    return n;
  }

  /** Bytes of replies and notices written by all connections and not yet taken by the kernel. */
  get unsentBytes(): number {
    return this.#unsent;
  }

  /** True while {@link unsentBytes} is past the budget ({@link ServerLimits.unsentBudgetBytes}). */
  get overBudget(): boolean {
    return this.#unsent > this.#unsentBudget;
  }

  /** Unsent bytes of the connections from `peer` (a {@link peerAddress}), together. */
  peerUnsent(peer: string): number {
    return this.#unsentByPeer.get(peer) ?? 0;
  }

  /**
   * @internal A connection's unsent bytes changed by `delta`. Where that lets connections take
   * again (its address back under {@link WRITE_HIGH_WATER} or at zero, the total back under
   * budget), they are resumed.
   */
  unsentChanged(delta: number, peer: string): void {
    const wasOver = this.overBudget;
    this.#unsent += delta;
    const before = this.#unsentByPeer.get(peer) ?? 0;
    const after = before + delta;
    if (after > 0) this.#unsentByPeer.set(peer, after);
    else this.#unsentByPeer.delete(peer);
    if (delta > 0 && this.#unsent > this.#unsentBudget * UNSENT_CEILING_FACTOR) this.#shed();
    if (delta >= 0) return;
    if (wasOver && !this.overBudget) {
      for (const c of this.#conns) c.resume();
    } else if ((before > WRITE_HIGH_WATER && after <= WRITE_HIGH_WATER) || (after <= 0 && this.overBudget)) {
      for (const c of this.#conns) if (c.peer === peer) c.resume();
    }
  }

  #shedding = false;

  /**
   * Past {@link UNSENT_CEILING_FACTOR} × the budget (each address may still be given one more
   * reply past the budget, and addresses are many): closes the connections holding the most
   * unsent bytes, largest first, until the total is back within the budget. A peer that reads its
   * replies holds next to none; a paid reply so lost is replayed from the log when asked again.
   */
  #shed(): void {
    if (this.#shedding) return;
    this.#shedding = true;
    try {
      const holders = [...this.#conns].filter((c) => c.unsent > 0).sort((a, b) => b.unsent - a.unsent);
      let closed = 0;
      let bytes = 0;
      for (const c of holders) {
        if (this.#unsent <= this.#unsentBudget) break;
        bytes += c.unsent;
        c.shed();
        closed++;
      }
      this.metrics.unsentShed.inc(closed);
      this.#log.warn(
        { closed, bytes, unsent: this.#unsent, budget: this.#unsentBudget },
        'jcp/1: unsent replies past twice the budget; the connections holding the most were closed',
      );
    } finally {
      this.#shedding = false;
    }
  }

  /** @internal Requests more that may be handed to the handler now (all connections). */
  get inFlightRoom(): number {
    return this.#maxInFlight - this.#inFlight;
  }

  /** Requests handed to the handler and not yet answered, all connections together. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** @internal A request was handed to the handler (+1) or answered (−1). */
  inFlightChanged(delta: number): void {
    this.#inFlight += delta;
    if (delta < 0 && this.#waitingForRoom && this.#inFlight <= (this.#maxInFlight * 3) >> 2) {
      // A quarter of the room back: the turns go on where they stopped, in order.
      this.#waitingForRoom = false;
      this.#scheduleRound();
    }
  }

  /** Connections waiting for a turn, in the order they asked. */
  #turns: Connection[] = [];
  #roundScheduled = false;

  /** @internal `c` has bytes to take: it gets a turn in the next round. */
  enqueueTurn(c: Connection): void {
    this.#turns.push(c);
    this.#scheduleRound();
  }

  #scheduleRound(): void {
    if (this.#roundScheduled || this.#waitingForRoom || this.#turns.length === 0) return;
    this.#roundScheduled = true;
    setImmediate(() => this.#round());
  }

  /**
   * A round: each connection waiting gets one turn ({@link TURN_MESSAGES} messages), in the order
   * they asked, until {@link ROUND_MS} have gone; those that still have bytes ask again, behind the
   * others. The next round runs in the next turn of the event loop, after its I/O.
   */
  #round(): void {
    this.#roundScheduled = false;
    const until = performance.now() + ROUND_MS;
    const turns = this.#turns;
    this.#turns = [];
    // Past the unsent budget a turn takes one message: what non-reading peers can add then is one reply each.
    const turn = this.overBudget ? 1 : Math.max(1, Math.min(TURN_MESSAGES, Math.floor(this.#maxInFlight / turns.length)));
    let i = 0;
    while (i < turns.length) {
      if (this.#inFlight >= this.#maxInFlight) {
        // No room: the rest keep their places, and go on once replies have settled.
        this.#waitingForRoom = true;
        break;
      }
      turns[i++]!.takeTurn(turn);
      if (performance.now() >= until) break;
    }
    if (i < turns.length) this.#turns = turns.slice(i).concat(this.#turns);
    this.#scheduleRound();
  }

  #accept(sock: Socket): void {
    const peer = peerAddress(sock.remoteAddress);
    if (this.#accepting && this.hooks.admits !== undefined && !this.hooks.admits(peer)) {
      // Refused while its address is rate-limited: told so, then closed, as a `busy` newcomer is.
      this.metrics.errors.inc({ code: NodeErrorCodes.RATE_LIMITED });
      this.#refuse(sock, errorBody(NodeErrorCodes.RATE_LIMITED, `too many failed or bad-signature requests from ${peer}; retry later`));
      return;
    }
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
      this.#refuse(sock, errorBody(NodeErrorCodes.BUSY, 'the node is at its connection limit or stopping'));
      return;
    }
    const c = new Connection(sock, this);
    this.#conns.add(c);
    this.#perPeer.set(peer, (this.#perPeer.get(peer) ?? 0) + 1);
    this.metrics.connections.set(this.#conns.size);
  }

  /** Sends `body` to a connection not taken, then closes it. */
  #refuse(sock: Socket, body: Uint8Array): void {
    sock.on('error', () => undefined);
    // Closed for good once the reply is written (and at the latest after the read timeout): the
    // listener allows half-open connections, and a refused client that never closes its half
    // would otherwise hold this socket, uncounted, and keep the node from stopping.
    sock.setTimeout(this.limits.readTimeoutMs, () => sock.destroy());
    sock.end(frameMessage(body), () => sock.destroy());
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
    const top = busiestOther(this.#perPeer, peer, this.#perPeer.get(peer) ?? 0, (n) => n);
    if (top === undefined) return undefined;
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
    for (const { raw } of [...this.#handshaking.values()]) raw.destroy();
    await closed;
  }
}
