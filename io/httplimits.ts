/**
 * Connection bounds for the product's HTTP listeners (the node's metrics port and standing
 * webhook server, the bridge's HTTP and A2A faces, the audit console). A plain
 * `http.createServer` accepts connections until the process runs out of file handles, and Node
 * closes a connection whose headers never finish only after `headersTimeout` (60 s) and then only
 * at its next check (every 30 s): a slow-loris peer sending a header line every few seconds can
 * hold thousands of connections and starve the process (no new jcp/1 connections, no snapshot
 * child). {@link createBoundedServer} refuses a connection over a per-peer or total bound the
 * moment it is accepted (before a byte is read, so a bearer token checked later does not help)
 * and closes unfinished requests within about a second of their timeouts.
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
}

/**
 * The defaults for a listener few clients use (metrics, standing webhooks, console): 1024
 * connections in total, 64 per peer address, 10 s for the headers, 30 s for the whole request,
 * timeouts checked every second.
 */
export const HTTP_LIMITS: Required<HttpLimits> = {
  maxConnections: 1024,
  maxPerPeer: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
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
}

/** A bounded HTTP server (not yet listening) and a view of its {@link HttpConnectionCounts}. */
export interface BoundedServer {
  readonly server: Server;
  counts(): HttpConnectionCounts;
}

/**
 * An `http.Server` serving `handler` under `limits` (unset fields from `defaults`, itself
 * {@link HTTP_LIMITS} unless given): a connection from a peer that already holds `maxPerPeer`
 * open connections, or arriving while `maxConnections` are open, is destroyed as it is accepted
 * (its file handle freed; no response, not read); counts drop when a connection closes, so a
 * refused peer may connect again once its others close. A request whose headers are not complete
 * in `headersTimeoutMs`, or whole in `requestTimeoutMs`, is answered 408 and closed within
 * `checkIntervalMs` of that. Throws RangeError for a bound that is not a positive integer.
 */
export function createBoundedServer(
  handler: RequestListener,
  limits: HttpLimits = {},
  defaults: Required<HttpLimits> = HTTP_LIMITS,
): BoundedServer {
  const l = { ...defaults, ...stripUndefined(limits) };
  for (const [k, v] of Object.entries(l))
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`HTTP limit ${k} must be a positive integer, not ${String(v)}`);
  const server = createServer(
    { headersTimeout: l.headersTimeoutMs, requestTimeout: l.requestTimeoutMs, connectionsCheckingInterval: l.checkIntervalMs },
    handler,
  );
  const perPeer = new Map<string, number>();
  let open = 0;
  let refusedPeer = 0;
  let refusedTotal = 0;
  server.on('connection', (sock: Socket) => {
    const peer = peerAddress(sock.remoteAddress);
    const held = perPeer.get(peer) ?? 0;
    if (open >= l.maxConnections || held >= l.maxPerPeer || peer === '') {
      if (open >= l.maxConnections) refusedTotal++;
      else refusedPeer++;
      sock.destroy();
      return;
    }
    open++;
    perPeer.set(peer, held + 1);
    sock.once('close', () => {
      open--;
      const n = (perPeer.get(peer) ?? 1) - 1;
      if (n <= 0) perPeer.delete(peer);
      else perPeer.set(peer, n);
    });
  });
  return { server, counts: () => ({ open, refusedPeer, refusedTotal }) };
}

function stripUndefined(o: HttpLimits): HttpLimits {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as HttpLimits;
}
