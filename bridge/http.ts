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
 *
 * Headers before bodies: the path, `Host`, `Origin` (MCP transports, "Security Warning": a
 * server must validate `Origin`; a request without one, a non-browser client, is let through),
 * the bearer token, the session, `Content-Type` and `Content-Length` are checked before a byte of
 * the body is read; a refused request is answered with `Connection: close`, its body unread.
 *
 * Sessions are bounded ({@link SessionLimits}): an idle session expires (sooner when it never
 * sent `notifications/initialized`), its transport and MCP server closed; past the per-agent or
 * the total cap, `initialize` is refused (429 / 503) with a JSON-RPC error naming the limit.
 *
 * Two eras on `/mcp`: after the checks above and the guard, a POST without `Mcp-Session-Id` that
 * the SDK v2 classifier (`isLegacyRequest`) calls 2026-07-28 is answered statelessly by the v2
 * handler (bridge/modern.ts `modernHttp`: its own header checks, no session); the rest is the
 * 2025-era sessionful face above, unchanged.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
// v1 SDK: the 2025 face's sessions (GET stream, Mcp-Session-Id), which the v2 HTTP entry serves only statelessly.
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { type McpHttpHandler, isLegacyRequest } from '@modelcontextprotocol/server';
import { BRIDGE_HTTP_LIMITS, createBoundedServer, type HttpLimits } from '../io/index.ts';
import type { BridgeAgent } from './agent.ts';
import { modernHttp } from './modern.ts';
import { bridgeServer, refusal } from './server.ts';

/** One agent served over HTTP, and its bearer token (absent: only for a single agent on loopback). */
export interface HttpAgent {
  readonly agent: BridgeAgent;
  readonly token?: string;
}

/** A request listener running `handle`; its failure is a 500 `internal` (or the end of a started response). */
function answering(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<unknown>,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) reply(res, 500, `internal error: ${(e as Error).message}`, HttpErrorCodes.INTERNAL);
      else res.end();
    });
  };
}

/** Options of {@link serveBridgeHttp}. */
export interface HttpOptions {
  readonly host: string;
  /** 0 for an ephemeral port. */
  readonly port: number;
  readonly agents: readonly HttpAgent[];
  /** Listen on a non-loopback address (refused without it). */
  readonly allowRemote?: boolean;
  /** Session expiry and caps; each absent field takes its {@link DEFAULT_SESSION_LIMITS} value. */
  readonly limits?: Partial<SessionLimits>;
  /**
   * Origins (`scheme://host[:port]`, as browsers send them) allowed besides the listening address's
   * own (`http://<host>:<port>`, and on loopback `http://127.0.0.1|localhost|[::1]:<port>`).
   */
  readonly allowedOrigins?: readonly string[];
  /**
   * `Host` values (`host:port`, as clients send them) accepted besides the listening address's own
   * on loopback: the name of a proxy in front of several bridges (a replica behind a round-robin
   * proxy sees the proxy's `Host`). Not needed off loopback, where `Host` is not checked.
   */
  readonly allowedHosts?: readonly string[];
  /**
   * Connection bounds of the listener (io/httplimits.ts; default `BRIDGE_HTTP_LIMITS`: 4096 in
   * all, 256 per peer address, 10 s for the headers, 30 s for a request): one over a bound is
   * closed as it is accepted, before any token is read (slow loris, file-handle exhaustion).
   */
  readonly connectionLimits?: HttpLimits;
}

/** Bounds on Streamable HTTP sessions (see {@link DEFAULT_SESSION_LIMITS}). */
export interface SessionLimits {
  /** An initialized session with no request open for this long is closed, ms. */
  readonly idleMs: number;
  /** A session that has not sent `notifications/initialized` is closed this long after its last request, ms. */
  readonly initMs: number;
  /** Open sessions per agent; one more `initialize` is refused 429 `session-limit-agent`. */
  readonly perAgent: number;
  /** Open sessions in all; one more `initialize` is refused 503 `session-limit-total`. */
  readonly total: number;
}

/** Default session bounds: 5 minutes idle, 15 s to initialize, 64 sessions per agent, 1,024 in all. */
export const DEFAULT_SESSION_LIMITS: SessionLimits = { idleMs: 300_000, initMs: 15_000, perAgent: 64, total: 1024 };

/** Stable codes (`error.data.code`) of requests refused by the HTTP face before the MCP layer. */
export const HttpErrorCodes = {
  /** 403: the `Origin` header names a site that is not allowed (MCP transports, DNS rebinding). */
  ORIGIN_FORBIDDEN: 'origin-forbidden',
  /** 403: the `Host` header does not name the listening address (DNS rebinding). */
  HOST_FORBIDDEN: 'host-forbidden',
  /** 401: no bearer token, or one that names no agent of this bridge. */
  UNAUTHORIZED: 'unauthorized',
  /** 404: a path other than `/mcp`. */
  NOT_FOUND: 'not-found',
  /** 404: an `Mcp-Session-Id` this bridge does not hold for this agent (expired, closed, another agent's). */
  SESSION_NOT_FOUND: 'session-not-found',
  /** 500: the bridge failed on the request (its message says how). */
  INTERNAL: 'internal',
  /** 415: a POST whose `Content-Type` is not `application/json`. */
  CONTENT_TYPE: 'content-type-unsupported',
  /** 413: a body over the cap (by `Content-Length` or as read). */
  PAYLOAD_TOO_LARGE: 'payload-too-large',
  /** 429: the agent has {@link SessionLimits.perAgent} sessions open. */
  SESSION_LIMIT_AGENT: 'session-limit-agent',
  /** 503: the bridge has {@link SessionLimits.total} sessions open. */
  SESSION_LIMIT_TOTAL: 'session-limit-total',
} as const;

/** A listening bridge. */
export interface HttpBridge {
  /** `http://host:port/mcp`. */
  readonly url: string;
  readonly port: number;
  /** Open MCP sessions (those being initialized included). */
  readonly sessions: () => number;
  /** Session counters since start: `expired` (closed by the idle or init timeout), `refused` (past a cap). */
  readonly sessionStats: () => { readonly open: number; readonly expired: number; readonly refused: number };
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
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Answers 413 `payload-too-large` and closes the connection (the rest of the body is not read). */
function tooLarge(res: ServerResponse): void {
  res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
  res.end(
    JSON.stringify({
      jsonrpc: '2.0',
      error: {
        code: -32000,
        message: `payload too large: a request body is at most ${MAX_BODY_BYTES} bytes`,
        data: { code: HttpErrorCodes.PAYLOAD_TOO_LARGE, limit: MAX_BODY_BYTES },
      },
      id: null,
    }),
  );
}

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
      tooLarge(res);
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

/** One open session: its transport, its agent, and what its expiry needs. */
interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly agent: BridgeAgent;
  /** `notifications/initialized` seen. */
  initialized: boolean;
  /** Requests being answered (an SSE stream stays open): a session with one never expires. */
  open: number;
  timer: NodeJS.Timeout | undefined;
}

/** A JSON-RPC error body (`id: null`) with status `status`; `code` goes in `error.data.code`. */
export function refuse(res: ServerResponse, status: number, message: string, code?: string, extra: Record<string, unknown> = {}): void {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  // A refused request's body is not read: the connection cannot carry another request after it.
  if (code !== undefined) headers['connection'] = 'close';
  if (status === 429 || status === 503) headers['retry-after'] = '1';
  res.writeHead(status, headers);
  const data = code === undefined ? {} : { data: { code, ...extra } };
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message, ...data }, id: null }));
}

/** Whether `body` (one message or a batch) holds `notifications/initialized`. */
function initializes(body: unknown): boolean {
  const all = Array.isArray(body) ? body : [body];
  return all.some((m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'notifications/initialized');
}

/**
 * Why a request's headers refuse it before its body is read, or undefined: `Host` not in
 * `hosts` (when set) 403, `Origin` present and not in `origins` 403, a POST whose `Content-Type`
 * is not JSON 415, a `Content-Length` over the body cap 413.
 */
export function headerRefusal(
  req: IncomingMessage,
  hosts: ReadonlySet<string> | undefined,
  origins: ReadonlySet<string>,
  types: readonly string[] = ['application/json'],
): [number, string, string] | undefined {
  const host = (req.headers.host ?? '').toLowerCase();
  if (hosts !== undefined && !hosts.has(host))
    return [403, `forbidden: Host ${JSON.stringify(host)} is not this bridge's address`, HttpErrorCodes.HOST_FORBIDDEN];
  const origin = req.headers.origin;
  if (origin !== undefined && !origins.has(origin.toLowerCase()))
    return [403, `forbidden: Origin ${JSON.stringify(origin)} is not allowed`, HttpErrorCodes.ORIGIN_FORBIDDEN];
  if (req.method === 'POST') {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (!types.includes(type))
      return [
        415,
        `unsupported media type: a POST body must be ${types.join(' or ')}, not ${JSON.stringify(type)}`,
        HttpErrorCodes.CONTENT_TYPE,
      ];
    const length = Number(req.headers['content-length'] ?? 0);
    if (length > MAX_BODY_BYTES)
      return [413, `payload too large: a request body is at most ${MAX_BODY_BYTES} bytes`, HttpErrorCodes.PAYLOAD_TOO_LARGE];
  }
  return undefined;
}

/** The `Host` values a loopback bridge on `port` answers to, lower case. */
export function loopbackHosts(host: string, port: number): Set<string> {
  return new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${host}:${port}`].map((h) => h.toLowerCase()));
}

/**
 * Serves `agents` over Streamable HTTP at `/mcp`.
 * @throws BridgeConfigError `remote-listen-refused` (a non-loopback host without `allowRemote`),
 *   `token-required` (several agents, or a non-loopback host, and an agent without a token),
 *   `token-duplicate` (two agents with one token), `limits-invalid` (a limit that is not a
 *   positive whole number), `origin-invalid` (an allowed origin that is not `scheme://host[:port]`);
 *   the listen error (EADDRINUSE…) as it is.
 */
export async function serveBridgeHttp(o: HttpOptions): Promise<HttpBridge> {
  const keyed = checkedAgents(o);
  const table = new SessionTable(sessionLimits(o.limits));
  const modern = new Map<BridgeAgent, McpHttpHandler>(keyed.map((k) => [k.agent, modernHttp(k.agent, MAX_BODY_BYTES)]));
  const extraOrigins = (o.allowedOrigins ?? []).map(originOf);
  let allowedHosts: Set<string> | undefined;
  let origins = new Set<string>();

  /** A new session for `agent` (an `initialize` POST), or a 429/503 past a cap. */
  const open = async (agent: BridgeAgent, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> => {
    const slot = table.reserve(agent);
    if (!slot.ok) {
      const { status, code, limit, what } = slot;
      return refuse(res, status, `too many sessions: ${what} ${limit} open (${code}); close one or wait for one to expire`, code, {
        limit,
      });
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => table.add(id, { transport, agent, initialized: false, open: 0, timer: undefined }, res),
      ...(allowedHosts !== undefined ? { enableDnsRebindingProtection: true, allowedHosts: [...allowedHosts] } : {}),
    });
    transport.onclose = () => {
      table.remove(transport.sessionId);
      slot.release();
    };
    try {
      await bridgeServer(agent).connect(transport);
      await transport.handleRequest(req, res, body);
    } finally {
      if (transport.sessionId === undefined) {
        slot.release();
        await transport.close();
      }
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname !== '/mcp') return reply(res, 404, 'not found: the MCP endpoint is /mcp', HttpErrorCodes.NOT_FOUND);
    const bad = headerRefusal(req, allowedHosts, origins);
    if (bad !== undefined)
      return refuse(res, bad[0], bad[1], bad[2], bad[2] === HttpErrorCodes.PAYLOAD_TOO_LARGE ? { limit: MAX_BODY_BYTES } : {});
    const agent = authenticate(keyed, req);
    if (agent === undefined) return reply(res, 401, UNAUTHORIZED_MESSAGE, HttpErrorCodes.UNAUTHORIZED, BEARER_CHALLENGE);
    const sid = req.headers['mcp-session-id'];
    const known = typeof sid === 'string' ? table.get(sid) : undefined;
    if (typeof sid === 'string' && (known === undefined || known.agent !== agent))
      return reply(res, 404, 'session not found', HttpErrorCodes.SESSION_NOT_FOUND);
    let body: unknown;
    if (req.method === 'POST') {
      const screened = await screen(req, res);
      if (screened.done) return;
      body = screened.body;
      if (known === undefined) {
        const web = webRequest(req, body, res);
        if (!(await isLegacyRequest(web, body, { maxRequestBodySize: MAX_BODY_BYTES }))) {
          return sendWeb(res, await modern.get(agent)!.fetch(web, { parsedBody: body }));
        }
      }
    }
    if (known === undefined) return open(agent, req, res, body);
    if (initializes(body)) known.initialized = true;
    table.track(known, res);
    return known.transport.handleRequest(req, res, body);
  };

  const { server: http } = createBoundedServer(answering(handle), o.connectionLimits, BRIDGE_HTTP_LIMITS);
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  const shownHost = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host;
  if (isLoopback(o.host))
    allowedHosts = new Set([...loopbackHosts(shownHost, port), ...(o.allowedHosts ?? []).map((h) => h.toLowerCase())]);
  origins = new Set([`http://${shownHost}:${port}`.toLowerCase(), ...[...(allowedHosts ?? [])].map((h) => `http://${h}`), ...extraOrigins]);
  return {
    url: `http://${shownHost}:${port}/mcp`,
    port,
    sessions: () => table.size,
    sessionStats: () => table.stats(),
    async close() {
      for (const h of modern.values()) await h.close().catch(() => undefined);
      await table.closeAll();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * `req` (a POST whose body was read and parsed into `body`) as a web `Request` for the SDK v2
 * handler: the same headers, the body re-serialized, a signal aborted when the client goes away
 * before its answer is written.
 */
function webRequest(req: IncomingMessage, body: unknown, res: ServerResponse): Request {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return new Request(`http://${req.headers.host ?? 'bridge'}${req.url ?? '/mcp'}`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: gone.signal,
  });
}

/** Writes a web `Response` (a JSON body or an SSE stream) to `res`. */
async function sendWeb(res: ServerResponse, r: Response): Promise<void> {
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    headers[k] = v;
  });
  res.writeHead(r.status, headers);
  if (r.body !== null) for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
  res.end();
}

/** An agent with the SHA-256 of its bearer token (absent: the single-agent loopback case). */
export interface KeyedAgent {
  readonly agent: BridgeAgent;
  readonly hash: Buffer | undefined;
}

/**
 * `o`'s agents with their token digests, after the listening rules are checked.
 * @throws BridgeConfigError `remote-listen-refused`, `no-agents`, `token-required`, `token-duplicate`.
 */
export function checkedAgents(o: Pick<HttpOptions, 'host' | 'agents' | 'allowRemote'>): KeyedAgent[] {
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
  return o.agents.map((a) => ({ agent: a.agent, hash: a.token === undefined ? undefined : digest(a.token) }));
}

/** The agent a request authenticates as, comparing against every token (constant time per token). */
export function authenticate(keyed: readonly KeyedAgent[], req: IncomingMessage): BridgeAgent | undefined {
  if (keyed.length === 1 && keyed[0]!.hash === undefined) return keyed[0]!.agent;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  const presented = digest(m?.[1] ?? '');
  let found: BridgeAgent | undefined;
  for (const a of keyed) if (a.hash !== undefined && timingSafeEqual(a.hash, presented) && m !== null) found = a.agent;
  return found;
}

/** The message of a 401 (no bearer token, or one naming no agent). */
export const UNAUTHORIZED_MESSAGE = 'unauthorized: a valid bearer token is required';
/** The `WWW-Authenticate` header of a 401. */
export const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer' };

/** A JSON-RPC error body (`id: null`) with status `status` and `data.code`, the connection closed after it. */
export function reply(res: ServerResponse, status: number, message: string, code: string, headers: Record<string, string> = {}): void {
  // Refused before its body was read (if it has one): the connection is not reused.
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message, data: { code } }, id: null }));
}

/** A session slot held for an agent ({@link SessionTable.reserve}), or why there is none. */
type Slot =
  | { readonly ok: true; readonly release: () => void }
  | { readonly ok: false; readonly status: 429 | 503; readonly code: string; readonly limit: number; readonly what: string };

/** The open sessions, their expiry timers and the per-agent and total caps ({@link SessionLimits}). */
class SessionTable {
  readonly #limits: SessionLimits;
  readonly #sessions = new Map<string, Session>();
  readonly #perAgent = new Map<BridgeAgent, number>();
  #expired = 0;
  #refused = 0;

  constructor(limits: SessionLimits) {
    this.#limits = limits;
  }

  get size(): number {
    return this.#sessions.size;
  }

  stats(): { open: number; expired: number; refused: number } {
    return { open: this.#sessions.size, expired: this.#expired, refused: this.#refused };
  }

  get(id: string): Session | undefined {
    return this.#sessions.get(id);
  }

  /**
   * Holds a slot for a new session of `agent`, or says which cap refuses it (429 per agent, 503 in
   * all). The slot is held from here, so a burst of `initialize` requests cannot pass a cap together.
   */
  reserve(agent: BridgeAgent): Slot {
    const mine = this.#perAgent.get(agent) ?? 0;
    const total = [...this.#perAgent.values()].reduce((a, b) => a + b, 0);
    if (mine >= this.#limits.perAgent || total >= this.#limits.total) {
      this.#refused++;
      return mine >= this.#limits.perAgent
        ? {
            ok: false,
            status: 429,
            code: HttpErrorCodes.SESSION_LIMIT_AGENT,
            limit: this.#limits.perAgent,
            what: `agent ${agent.name} has`,
          }
        : { ok: false, status: 503, code: HttpErrorCodes.SESSION_LIMIT_TOTAL, limit: this.#limits.total, what: 'the bridge has' };
    }
    this.#perAgent.set(agent, mine + 1);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 1) - 1);
    };
    return { ok: true, release };
  }

  /** Records a session its transport has just initialized; `res` is its first open request. */
  add(id: string, s: Session, res: ServerResponse): void {
    this.#sessions.set(id, s);
    this.track(s, res);
  }

  /** Forgets a closed session and its timer. */
  remove(id: string | undefined): void {
    if (id === undefined) return;
    clearTimeout(this.#sessions.get(id)?.timer);
    this.#sessions.delete(id);
  }

  /** Counts `res` as an open request of `s` until it closes. */
  track(s: Session, res: ServerResponse): void {
    s.open++;
    this.#arm(s);
    res.once('close', () => {
      s.open--;
      this.#arm(s);
    });
  }

  async closeAll(): Promise<void> {
    for (const s of [...this.#sessions.values()]) await s.transport.close().catch(() => undefined);
    this.#sessions.clear();
  }

  /** Arms (or re-arms) the expiry of `s` when no request of it is open. */
  #arm(s: Session): void {
    clearTimeout(s.timer);
    s.timer = undefined;
    if (s.open > 0) return;
    s.timer = setTimeout(
      () => {
        this.#expired++;
        void s.transport.close().catch(() => undefined);
      },
      s.initialized ? this.#limits.idleMs : this.#limits.initMs,
    );
    s.timer.unref();
  }
}

/** `o` over {@link DEFAULT_SESSION_LIMITS}, checked. @throws BridgeConfigError `limits-invalid`. */
function sessionLimits(o: Partial<SessionLimits> | undefined): SessionLimits {
  const l = { ...DEFAULT_SESSION_LIMITS, ...o };
  for (const [k, v] of Object.entries(l)) {
    if (!Number.isSafeInteger(v) || v < 1)
      throw new BridgeConfigError('limits-invalid', `session limit ${k}: expected a whole number ≥ 1, got ${v}`);
  }
  return l;
}

/** The origin `scheme://host[:port]` of `s`, lower case. @throws BridgeConfigError `origin-invalid`. */
export function originOf(s: string): string {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new BridgeConfigError('origin-invalid', `allowed origin ${s} does not parse as scheme://host[:port]`);
  }
  if (u.origin === 'null' || u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '')
    throw new BridgeConfigError('origin-invalid', `allowed origin ${s}: give scheme://host[:port] only (no path)`);
  return u.origin;
}
