/**
 * The bridge over MCP Streamable HTTP (the SDK's `StreamableHTTPServerTransport`) at `/mcp`, for
 * one agent or several. Each agent has its own bearer token; a request's token is compared with
 * every agent's in constant time (SHA-256 of both, `timingSafeEqual`), and a request without a
 * matching one gets `401` with `WWW-Authenticate: Bearer`. A session (`Mcp-Session-Id`) belongs
 * to the agent that opened it: another agent's token on it gets `404`, as an unknown session.
 *
 * Listening: loopback (127.0.0.0/8, ::1, localhost) unless `allowRemote`; a non-loopback address
 * also needs every agent to have a token. On loopback, DNS-rebinding protection accepts only
 * Host headers naming the loopback address and port.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { BridgeAgent } from './agent.ts';
import { bridgeServer, refusal } from './server.ts';

/** One agent served over HTTP, and its bearer token (absent: only for a single agent on loopback). */
export interface HttpAgent {
  readonly agent: BridgeAgent;
  readonly token?: string;
}

/** Options of {@link serveBridgeHttp}. */
export interface HttpOptions {
  readonly host: string;
  /** 0 for an ephemeral port. */
  readonly port: number;
  readonly agents: readonly HttpAgent[];
  /** Listen on a non-loopback address (refused without it). */
  readonly allowRemote?: boolean;
}

/** A listening bridge. */
export interface HttpBridge {
  /** `http://host:port/mcp`. */
  readonly url: string;
  readonly port: number;
  /** Open MCP sessions. */
  readonly sessions: () => number;
  /** Closes every session and the listener. */
  close(): Promise<void>;
}

/** A refused bridge configuration; `code` is stable. */
export class BridgeConfigError extends Error {
  override readonly name = 'BridgeConfigError';
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** True for a loopback host name or address. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/** The most bytes of one POST body (the SDK transport's default, 4 MiB). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/**
 * A POST's body, parsed, when it is one request the guard refuses (bridge/server.ts
 * `refusal`): answered here, 200 with the JSON-RPC error, since the SDK's transport would
 * answer 400 -32700 without its id. Otherwise the parsed body (or `undefined` when it is not
 * JSON) for the transport, which must not read the consumed stream again.
 */
async function screen(req: IncomingMessage, res: ServerResponse): Promise<{ done: true } | { done: false; body: unknown }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY_BYTES) {
      res.writeHead(413, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          error: { code: -32000, message: `payload too large: a request body is at most ${MAX_BODY_BYTES} bytes` },
          id: null,
        }),
      );
      return { done: true };
    }
    chunks.push(c);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: Invalid JSON' }, id: null }));
    return { done: true };
  }
  const no = refusal(body);
  if (no === undefined) return { done: false, body };
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: (body as { id: unknown }).id, error: no }));
  return { done: true };
}

/**
 * Serves `agents` over Streamable HTTP at `/mcp`.
 * @throws BridgeConfigError `remote-listen-refused` (a non-loopback host without `allowRemote`),
 *   `token-required` (several agents, or a non-loopback host, and an agent without a token),
 *   `token-duplicate` (two agents with one token); the listen error (EADDRINUSE…) as it is.
 */
export async function serveBridgeHttp(o: HttpOptions): Promise<HttpBridge> {
  if (!isLoopback(o.host) && o.allowRemote !== true) {
    throw new BridgeConfigError('remote-listen-refused', `${o.host} is not a loopback address; pass --allow-remote to listen there`);
  }
  if (o.agents.length === 0) throw new BridgeConfigError('no-agents', 'no agent to serve');
  const needTokens = o.agents.length > 1 || !isLoopback(o.host);
  if (needTokens && o.agents.some((a) => a.token === undefined || a.token.length === 0)) {
    throw new BridgeConfigError(
      'token-required',
      'every agent needs a bearer token when several agents are served or the address is not loopback',
    );
  }
  const tokens = o.agents.filter((a) => a.token !== undefined).map((a) => digest(a.token!));
  if (new Set(tokens.map((t) => t.toString('hex'))).size !== tokens.length) {
    throw new BridgeConfigError('token-duplicate', 'two agents share a bearer token');
  }
  const keyed = o.agents.map((a) => ({ ...a, hash: a.token === undefined ? undefined : digest(a.token) }));
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; agent: BridgeAgent }>();
  let allowedHosts: string[] | undefined;

  /** The agent a request authenticates as, comparing against every token (constant time per token). */
  const authenticate = (req: IncomingMessage): BridgeAgent | undefined => {
    if (keyed.length === 1 && keyed[0]!.hash === undefined) return keyed[0]!.agent;
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const presented = digest(m?.[1] ?? '');
    let found: BridgeAgent | undefined;
    for (const a of keyed) if (a.hash !== undefined && timingSafeEqual(a.hash, presented) && m !== null) found = a.agent;
    return found;
  };

  const reply = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname !== '/mcp') return reply(res, 404, 'not found: the MCP endpoint is /mcp');
    const agent = authenticate(req);
    if (agent === undefined) return reply(res, 401, 'unauthorized: a valid bearer token is required', { 'www-authenticate': 'Bearer' });
    const sid = req.headers['mcp-session-id'];
    const known = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (typeof sid === 'string' && (known === undefined || known.agent !== agent)) return reply(res, 404, 'session not found');
    let body: unknown;
    if (req.method === 'POST') {
      const screened = await screen(req, res);
      if (screened.done) return;
      body = screened.body;
    }
    if (known !== undefined) return known.transport.handleRequest(req, res, body);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, agent });
      },
      ...(allowedHosts !== undefined ? { enableDnsRebindingProtection: true, allowedHosts } : {}),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await bridgeServer(agent).connect(transport);
    await transport.handleRequest(req, res, body);
    if (transport.sessionId === undefined) await transport.close();
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) reply(res, 500, `internal error: ${(e as Error).message}`);
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  if (isLoopback(o.host)) allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${o.host}:${port}`];
  const shownHost = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host;
  return {
    url: `http://${shownHost}:${port}/mcp`,
    port,
    sessions: () => sessions.size,
    async close() {
      for (const s of [...sessions.values()]) await s.transport.close().catch(() => undefined);
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
