/**
 * Connection bounds for the product's HTTP listeners (the node's metrics port and standing
 * webhook server, the bridge's HTTP and A2A faces, the audit console). A plain
 * `http.createServer` accepts connections until the process runs out of file handles, and Node
 * closes a connection whose headers never finish only after `headersTimeout` (60 s) and then only
 * at its next check (every 30 s): a slow-loris peer sending a header line every few seconds can
 * hold thousands of connections and starve the process (no new jcp/1 connections, no snapshot
 * child). {@link createBoundedServer} refuses a connection over a per-peer bound the moment it
 * is accepted (before a byte is read, so a bearer token checked later does not help); at the total
 * bound it makes room for a peer holding fewer connections by closing one of the biggest holder's;
 * it closes a connection pipelining more than a few requests, and unfinished requests within
 * about a second of their timeouts.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { peerAddress } from './peer.ts';

/** The bounds of one HTTP listener. Every field is optional; unset ones take {@link HTTP_LIMITS}. */
export interface HttpLimits {
  /** Open connections, all peers together, beyond which a new one is closed at once. */
  readonly maxConnections?: number;
  /** Open connections from one peer address ({@link peerAddress}: IPv4 as is, IPv6 by /64). */
  readonly maxPerPeer?: number;
  /** Milliseconds a client has to send a request's headers (Node's `headersTimeout`); then 408 and close. */
  readonly headersTimeoutMs?: number;
  /** Milliseconds a client has to send a whole request, body included (Node's `requestTimeout`). */
  readonly requestTimeoutMs?: number;
  /** Milliseconds between Node's checks of those two timeouts (`connectionsCheckingInterval`). */
  readonly checkIntervalMs?: number;
  /**
   * Requests one connection may have in flight (received, response not finished): HTTP/1.1
   * pipelining. A connection that sends more is destroyed, its extra requests unanswered: Node
   * parses every request of a chunk before any answer is written, so without this one connection
   * that never reads its answers has every one of thousands of pipelined requests rendered and
   * held in memory.
   */
  readonly maxPipelined?: number;
}

/**
 * The defaults for a listener few clients use (metrics, standing webhooks, console): 1024
 * connections in total, 64 per peer address, 10 s for the headers, 30 s for the whole request,
 * timeouts checked every second, 8 requests in flight per connection.
 */
export const HTTP_LIMITS: Required<HttpLimits> = {
  maxConnections: 1024,
  maxPerPeer: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  maxPipelined: 8,
};

/**
 * The defaults for the bridge's HTTP and A2A faces, which serve many agents (often from one
 * address, behind a proxy): 4096 connections in total, 256 per peer address; timeouts as
 * {@link HTTP_LIMITS}.
 */
export const BRIDGE_HTTP_LIMITS: Required<HttpLimits> = { ...HTTP_LIMITS, maxConnections: 4096, maxPerPeer: 256 };

/** What a bounded listener has done so far: connections open now and those refused, by bound. */
export interface HttpConnectionCounts {
  /** Connections accepted and not yet closed. */
  readonly open: number;
  /** Connections closed at once because their peer already held `maxPerPeer`. */
  readonly refusedPeer: number;
  /** Connections closed at once because the listener already held `maxConnections`. */
  readonly refusedTotal: number;
  /** Connections closed to make room, at the total bound, for a peer holding fewer (of the peer holding the most). */
  readonly evicted: number;
  /** Connections closed for having more than `maxPipelined` requests in flight. */
  readonly refusedPipelined: number;
}

/** A bounded HTTP server (not yet listening) and a view of its {@link HttpConnectionCounts}. */
export interface BoundedServer {
  readonly server: Server;
  counts(): HttpConnectionCounts;
}

/**
 * An `http.Server` serving `handler` under `limits` (unset fields from `defaults`, itself
 * {@link HTTP_LIMITS} unless given):
 * - a connection from a peer that already holds `maxPerPeer` open connections is destroyed as it
 *   is accepted (its file handle freed; no response, not read);
 * - at `maxConnections`, a newcomer from a peer holding fewer connections than the peer holding
 *   the most, by more than one, takes the place of one of that peer's (the oldest with no request
 *   in flight, else the oldest), so a few addresses filling the listener cannot keep the others
 *   out; any other newcomer is destroyed;
 * - a connection with more than `maxPipelined` requests in flight is destroyed;
 * - a request whose headers are not complete in `headersTimeoutMs`, or whole in
 *   `requestTimeoutMs`, is answered 408 and closed within `checkIntervalMs` of that.
 * Counts drop when a connection closes, so a refused peer may connect again once its others close.
 * Throws RangeError for a bound that is not a positive integer.
 */
export function createBoundedServer(
  handler: RequestListener,
  limits: HttpLimits = {},
  defaults: Required<HttpLimits> = HTTP_LIMITS,
): BoundedServer {
  const l = { ...defaults, ...stripUndefined(limits) };
  for (const [k, v] of Object.entries(l))
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`HTTP limit ${k} must be a positive integer, not ${String(v)}`);
  // Each peer's open connections, oldest first, and the requests each connection has in flight.
  const perPeer = new Map<string, Set<Socket>>();
  const inFlight = new Map<Socket, number>();
  const c = { open: 0, refusedPeer: 0, refusedTotal: 0, evicted: 0, refusedPipelined: 0 };
  const counted: RequestListener = (req, res) => {
    const sock = req.socket;
    if (sock.destroyed) return;
    const n = (inFlight.get(sock) ?? 0) + 1;
    if (n > l.maxPipelined) {
      c.refusedPipelined++;
      sock.destroy();
      return;
    }
    inFlight.set(sock, n);
    res.once('close', () => {
      const m = (inFlight.get(sock) ?? 1) - 1;
      if (m <= 0) inFlight.delete(sock);
      else inFlight.set(sock, m);
    });
    handler(req, res);
  };
  const server = createServer(
    { headersTimeout: l.headersTimeoutMs, requestTimeout: l.requestTimeoutMs, connectionsCheckingInterval: l.checkIntervalMs },
    counted,
  );
  const drop = (peer: string, sock: Socket): void => {
    const mine = perPeer.get(peer);
    if (mine === undefined || !mine.delete(sock)) return;
    c.open--;
    inFlight.delete(sock);
    if (mine.size === 0) perPeer.delete(peer);
  };
  server.on('connection', (sock: Socket) => {
    const peer = peerAddress(sock.remoteAddress);
    const held = perPeer.get(peer)?.size ?? 0;
    if (peer === '' || held >= l.maxPerPeer) {
      c.refusedPeer++;
      sock.destroy();
      return;
    }
    if (c.open >= l.maxConnections) {
      const victim = evictable(perPeer, held, inFlight);
      if (victim === undefined) {
        c.refusedTotal++;
        sock.destroy();
        return;
      }
      c.evicted++;
      drop(victim.peer, victim.sock);
      victim.sock.destroy();
    }
    c.open++;
    const mine = perPeer.get(peer) ?? new Set<Socket>();
    mine.add(sock);
    perPeer.set(peer, mine);
    sock.once('close', () => drop(peer, sock));
  });
  return { server, counts: () => ({ ...c }) };
}

/**
 * The connection to close so a newcomer from a peer holding `held` connections gets a place: one
 * of the peer holding the most, when that is more than `held` + 1 (the oldest with no request in
 * flight, else its oldest); undefined when no peer holds that many more.
 */
function evictable(
  perPeer: ReadonlyMap<string, ReadonlySet<Socket>>,
  held: number,
  inFlight: ReadonlyMap<Socket, number>,
): { peer: string; sock: Socket } | undefined {
  let most: [string, ReadonlySet<Socket>] | undefined;
  for (const e of perPeer) if (most === undefined || e[1].size > most[1].size) most = e;
  if (most === undefined || most[1].size <= held + 1) return undefined;
  let oldest: Socket | undefined;
  for (const sock of most[1]) {
    oldest ??= sock;
    if (!inFlight.has(sock)) return { peer: most[0], sock };
  }
  return oldest && { peer: most[0], sock: oldest };
}

function stripUndefined(o: HttpLimits): HttpLimits {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as HttpLimits;
}
