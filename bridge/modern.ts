/**
 * The bridge's face for the MCP 2026-07-28 revision (stateless: no `initialize`, no session; each
 * request carries its protocol version and the client's capabilities in `_meta`), on the SDK v2
 * server (`@modelcontextprotocol/server`). The SDK speaks the revision: `server/discover`, the
 * per-request envelope, `resultType`, the caching fields, the HTTP header checks
 * (`MCP-Protocol-Version`, `Mcp-Method`) and their error shapes. The bridge gives it the same
 * tools, resources and deny results as the 2025-era face (bridge/server.ts), from the same
 * {@link BridgeAgent} (node connection, journal, budgets).
 *
 * Routing: a message carrying the envelope claim (`_meta["io.modelcontextprotocol/protocolVersion"]`,
 * {@link isModernMessage}) is 2026-07-28; anything else is 2025-era and goes to the v1 server as
 * before. Over HTTP the SDK's own classifier decides per request (bridge/http.ts); over stdio the
 * opening message decides for the connection ({@link serveBridgeStdio}).
 *
 * Caching hints (2026-07-28 `ttlMs`, `cacheScope`): the tool list is the agent's grants joined with
 * the node's upstream lists, fetched from the node on every `tools/list`; the bridge hears neither
 * an upstream's `list_changed` nor a revoked or amended grant, so it vouches for no lifetime:
 * `ttlMs: 0`, `cacheScope: 'private'` (it is this agent's list). The budget resource changes with
 * every call: the same. `server/discover` and `resources/list` are fixed for the life of the
 * process but answered per agent behind its token: `private`, {@link STATIC_TTL_MS}.
 */
import { type McpHttpHandler, Server, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
// v1 SDK types: the transport and messages of the 2025 face this module routes legacy traffic to.
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import type { McpNotification } from '../client/index.ts';
import type { BridgeAgent } from './agent.ts';
import { BRIDGE_INFO, BUDGET_RESOURCE, bridgeServer, delegationOf, readBudgetResource, refusal } from './server.ts';

/** The `_meta` key of the 2026-07-28 envelope's protocol version (the claim that makes a request modern). */
export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
/** The `_meta` key of the 2026-07-28 envelope's client capabilities. */
const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
/** The `_meta` key of a 2026-07-28 request's log level (replaces `logging/setLevel`). */
const LOG_LEVEL_KEY = 'io.modelcontextprotocol/logLevel';
/** Lifetime the bridge vouches for of results fixed for the process's life (`server/discover`, `resources/list`), ms. */
export const STATIC_TTL_MS = 60_000;
/** The protocol revision this face serves. */
export const MODERN_VERSION = '2026-07-28';

const LEVELS: readonly LoggingLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** Whether a parsed JSON-RPC message carries the 2026-07-28 envelope claim (a protocol version in `params._meta`). */
export function isModernMessage(message: unknown): boolean {
  if (typeof message !== 'object' || message === null) return false;
  const meta = (message as { params?: { _meta?: unknown } }).params?._meta;
  return typeof meta === 'object' && meta !== null && PROTOCOL_VERSION_KEY in meta;
}

/**
 * A new SDK v2 `Server` answering 2026-07-28 requests for `agent` (one per request over HTTP,
 * one per connection over stdio). Tools, resources and errors as bridgeServer's (bridge/server.ts):
 * a deny is a tool result (`isError`, the reason, `_meta` with `jcp/receipt`, grant and budget);
 * `-32602` `unknown-tool`, `unknown-resource`; the node's errors as BridgeAgent.call throws them.
 * Progress reaches the client when it gave a `progressToken`; log messages at or above the
 * request's `_meta["io.modelcontextprotocol/logLevel"]` (all when absent).
 */
export function modernServer(agent: BridgeAgent): Server {
  const server = new Server(BRIDGE_INFO, {
    capabilities: { tools: {}, resources: {}, logging: {} },
    instructions:
      'Every tool call is a signed JCP request decided by an enforcement node. A denied call is a tool result with isError and the deny reason; _meta["jcp/receipt"] names its receipt. Read jcp://budget for the budget left.',
    cacheHints: {
      'tools/list': { ttlMs: 0, cacheScope: 'private' },
      'resources/read': { ttlMs: 0, cacheScope: 'private' },
      'resources/list': { ttlMs: STATIC_TTL_MS, cacheScope: 'private' },
      'server/discover': { ttlMs: STATIC_TTL_MS, cacheScope: 'private' },
    },
  });
  server.setRequestHandler('tools/list', async () => ({
    tools: (await agent.tools()).map((t) => t.definition) as never,
    ttlMs: 0,
    cacheScope: 'private',
  }));
  server.setRequestHandler('tools/call', async (req, ctx) => {
    const meta = (req.params._meta ?? {}) as Record<string, unknown>;
    const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
    const key = meta['jcp/idempotency_key'];
    const progressToken = meta['progressToken'];
    const level = envelope[LOG_LEVEL_KEY] ?? envelope['logLevel'] ?? meta[LOG_LEVEL_KEY];
    const minLevel = Math.max(0, LEVELS.indexOf(level as LoggingLevel));
    let sent: Promise<void> = Promise.resolve();
    const relay = (n: McpNotification) => {
      const params = (n.params ?? {}) as Record<string, unknown>;
      let out: { method: string; params: Record<string, unknown> } | undefined;
      if (n.method === 'notifications/progress' && (typeof progressToken === 'string' || typeof progressToken === 'number'))
        out = { method: n.method, params: { ...params, progressToken } };
      if (n.method === 'notifications/message' && LEVELS.indexOf(params['level'] as LoggingLevel) >= minLevel)
        out = { method: n.method, params };
      if (out === undefined) return;
      const send = out;
      sent = sent.then(() => ctx.mcpReq.notify(send as never)).catch(() => undefined);
    };
    // Multi round-trip (SEP-2322, docs/bridge.md): the client's capabilities go to the node with
    // every call; a retry's inputResponses and requestState (the node's continuation token, passed
    // through untouched: the node checks it) make the call a continuation of the first round.
    const caps = envelope[CLIENT_CAPABILITIES_KEY] ?? meta[CLIENT_CAPABILITIES_KEY];
    const responses = ctx.mcpReq.inputResponses;
    const state = ctx.mcpReq.requestState();
    const input = {
      ...(typeof caps === 'object' && caps !== null ? { capabilities: caps as Record<string, unknown> } : {}),
      ...(responses !== undefined ? { responses } : {}),
      ...(typeof state === 'string' ? { state } : {}),
    };
    const result = await agent.call(req.params.name, req.params.arguments, {
      ...delegationOf(meta),
      mcpRequestId: ctx.mcpReq.id,
      ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
      signal: ctx.mcpReq.signal,
      onNotice: relay,
      input,
    });
    await sent;
    // The tool needs input: the node's input_required result (its inputRequests, the node's
    // continuation token as requestState) goes to the client as this revision's answer.
    if (result['resultType'] === 'input_required') {
      const { inputRequests, requestState, _meta } = result as Record<string, unknown>;
      return { resultType: 'input_required', inputRequests, requestState, _meta } as never;
    }
    return result as never;
  });
  server.setRequestHandler('resources/list', async () => ({ resources: [BUDGET_RESOURCE] }));
  server.setRequestHandler('resources/read', (req) => readBudgetResource(agent, req.params.uri));
  return server;
}

/**
 * The 2026-07-28 HTTP handler for `agent` (web `Request` → `Response`): a fresh {@link modernServer}
 * per request, nothing kept between requests (any bridge process for the agent answers any request).
 * 2025-era requests are refused here (the unsupported-protocol-version error): bridge/http.ts routes
 * them to its sessionful v1 face first. `maxBodyBytes` bounds a body the handler reads itself.
 */
export function modernHttp(agent: BridgeAgent, maxBodyBytes: number): McpHttpHandler {
  return createMcpHandler(() => modernServer(agent), { legacy: 'reject', maxRequestBodySize: maxBodyBytes });
}

/**
 * A transport over `base` for an MCP server: it hands on `queued` (what `base` received before
 * the era was known) when started, then what `base` receives; until started it queues. With
 * `screen`, a request the guard refuses (bridge/server.ts `refusal`) is answered here.
 */
function handoff(base: Transport, queued: JSONRPCMessage[], screen: boolean, outer: Pick<Transport, 'onclose' | 'onerror'>): Transport {
  let started = false;
  const deliver = (m: JSONRPCMessage): void => {
    const no = screen ? refusal(m) : undefined;
    if (no === undefined) t.onmessage?.(m);
    else void base.send({ jsonrpc: '2.0', id: (m as { id: string | number }).id, error: no }).catch(() => undefined);
  };
  const t: Transport = {
    start: async () => {
      started = true;
      for (let m = queued.shift(); m !== undefined; m = queued.shift()) deliver(m);
    },
    send: (m: JSONRPCMessage) => base.send(m),
    close: () => base.close(),
  };
  base.onmessage = (m) => {
    if (started) deliver(m);
    else queued.push(m);
  };
  base.onclose = () => {
    t.onclose?.();
    outer.onclose?.();
  };
  base.onerror = (e) => {
    t.onerror?.(e);
    outer.onerror?.(e);
  };
  return t;
}

/**
 * Serves `agent` on a stdio `transport` (bridge/stdio.ts, not yet started) in the era of the
 * connection's first message: with the 2026-07-28 envelope claim ({@link isModernMessage}) the
 * SDK v2 stdio entry serves it with {@link modernServer} (a 2025-era `initialize` after that is
 * refused with the revision's unsupported-protocol-version error); otherwise the 2025-era v1
 * server (bridgeServer) does, as before. The transport's own `onclose`/`onerror`, set before the
 * call, are still called. Resolves once the transport is started. Requests bridgeServer's guard
 * refuses are refused in both eras, with the same codes.
 */
export async function serveBridgeStdio(
  agent: BridgeAgent,
  transport: Transport,
): Promise<{ readonly era: () => 'legacy' | 'modern' | undefined; readonly close: () => Promise<void> }> {
  const outer = { onclose: transport.onclose, onerror: transport.onerror };
  const queued: JSONRPCMessage[] = [];
  let era: 'legacy' | 'modern' | undefined;
  let close: () => Promise<void> = () => transport.close();
  transport.onmessage = (m) => {
    queued.push(m);
    if (era !== undefined) return;
    era = isModernMessage(m) ? 'modern' : 'legacy';
    const t = handoff(transport, queued, era === 'modern', outer);
    if (era === 'legacy') {
      const server = bridgeServer(agent);
      void server.connect(t).catch((e: unknown) => outer.onerror?.(e as Error));
      close = () => server.close();
    } else {
      const handle = serveStdio(() => modernServer(agent), {
        transport: t as never,
        legacy: 'reject',
        ...(outer.onerror !== undefined ? { onerror: outer.onerror } : {}),
      });
      close = () => handle.close();
    }
  };
  await transport.start();
  return { era: () => era, close: () => close() };
}
