/**
 * The bridge's MCP server for one agent, on the SDK's low-level `Server` (the tool list is the
 * agent's catalogue, fetched from the node on every `tools/list`). One `Server` per MCP session;
 * sessions of one agent share its {@link BridgeAgent} (node connection, journal, budgets).
 *
 * Notifications: the `notifications/progress` and `notifications/message` an upstream sends during
 * an allowed call (the node's `notice` messages, docs/wire.md) reach the client in order, before
 * the result: progress only when the client gave a `progressToken` (the node's token is replaced
 * by the client's), log messages at or above the level the client set (`logging/setLevel`; all
 * until it sets one).
 *
 * Capabilities: `tools`, `resources`, `logging`. The one resource is `jcp://budget` (JSON): each leaf
 * grant's budget and the remaining budget the last receipt reported, so a client can read its
 * budget without calling a tool (no request is sent to the node, nothing is logged or debited).
 *
 * Input an upstream tool asks for mid-call (a 2026-07-28 upstream's `input_required` result:
 * sampling, elicitation, roots) reaches a 2025-era client as server requests on its call, only
 * those it declared the capability for, at most {@link MAX_INPUT_ROUNDS} rounds ({@link legacyAsk});
 * the answers go back to the node as the call's continuation (docs/bridge.md "Multi round-trip
 * calls"). A 2025-era upstream never asks: the node's 2025 handshake declares no
 * client capabilities. The bridge itself asks nothing of its own.
 */
// v1 SDK: the 2025 face's server (docs/bridge.md, why the 2025 face stays on it).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  ListRootsResultSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type LoggingLevel,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpNotification } from '../client/index.ts';
import { type BridgeAgent, BridgeErrorCodes, type CallInput, mcpError } from './agent.ts';
import { DELEGATE_KEY, DELEGATION_KEY, DelegationErrorCodes } from './delegation.ts';

/** The URI of the budget resource. */
export const BUDGET_URI = 'jcp://budget';

/** The budget resource as `resources/list` lists it (both MCP eras). */
export const BUDGET_RESOURCE = {
  uri: BUDGET_URI,
  name: 'budget',
  title: 'JCP budget',
  description: "Each grant's budget and the remaining budget its last receipt reported (µJ)",
  mimeType: 'application/json',
} as const;

/**
 * The `resources/read` result for `uri` (both MCP eras): the agent's did and each grant's budget
 * and last reported remainder (µJ), as JSON text.
 * @throws McpError InvalidParams `unknown-resource` for any URI but {@link BUDGET_URI}.
 */
export async function readBudgetResource(agent: BridgeAgent, uri: string) {
  if (uri !== BUDGET_URI) throw mcpError(ErrorCode.InvalidParams, 'unknown-resource', uri);
  const body = { agent: agent.did, grants: await agent.budgets() };
  return { contents: [{ uri: BUDGET_URI, mimeType: 'application/json', text: JSON.stringify(body, null, 2) }] };
}

/**
 * The `delegation` of a tools/call's context from its `_meta` (`jcp/delegation`: a delegated chain
 * handed to this agent, docs/a2a.md). A `jcp/delegate` there is refused `delegate-unsupported`: a
 * tool call's `_meta` does not reach the tool, so a chain minted for it would go nowhere; delegation
 * travels in A2A messages (bridge/a2a.ts).
 * @throws McpError InvalidParams `delegate-unsupported`.
 */
export function delegationOf(meta: unknown): { delegation?: unknown } {
  if (typeof meta !== 'object' || meta === null) return {};
  const m = meta as Record<string, unknown>;
  if (m[DELEGATE_KEY] !== undefined)
    throw mcpError(
      ErrorCode.InvalidParams,
      DelegationErrorCodes.UNSUPPORTED,
      `${DELEGATE_KEY} in a tool call's _meta: the tool never sees _meta; delegate in an A2A message (docs/a2a.md)`,
    );
  return m[DELEGATION_KEY] !== undefined ? { delegation: m[DELEGATION_KEY] } : {};
}

/** MCP logging levels, least severe first (RFC 5424 severities). */
const LEVELS: readonly LoggingLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** The bridge's implementation info (MCP `initialize`). */
export const BRIDGE_INFO = { name: 'jcp-bridge', version: '0.1.0' } as const;

/**
 * Why a client request is refused before the SDK reads it, or undefined: any request whose
 * `_meta.progressToken` is neither a string nor a number (`progress-token-invalid`, MCP
 * "Progress"; the SDK's transports would drop it unanswered over stdio, or answer 400 -32700
 * over Streamable HTTP), `tools/call` whose `params` is not an object or whose `name` is not a
 * string (`params-invalid`; the SDK would answer -32603 with a schema dump), and `tools/call`
 * whose `arguments` is present and not a JSON object or nests deeper than
 * {@link MAX_ARGUMENTS_DEPTH} levels (`arguments-invalid`). All are -32602
 * (invalid params), the stable code in `data.code`. `message` is any parsed JSON value.
 */
export function refusal(message: unknown): { code: number; message: string; data: { code: string } } | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
  if (!('method' in message) || !('id' in message) || typeof message.method !== 'string') return undefined;
  const raw = (message as { params?: unknown }).params;
  const params = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : undefined;
  const invalid = (stable: string, why: string) => ({
    code: ErrorCode.InvalidParams,
    message: `${stable}: ${why}`,
    data: { code: stable },
  });
  const meta = params?.['_meta'];
  const token = typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>)['progressToken'] : undefined;
  if (token !== undefined && typeof token !== 'string' && typeof token !== 'number') {
    return invalid(
      BridgeErrorCodes.PROGRESS_TOKEN_INVALID,
      `${message.method} _meta.progressToken must be a string or a number, not ${describe(token)}`,
    );
  }
  if (message.method !== 'tools/call') return undefined;
  if (params === undefined) return invalid(BridgeErrorCodes.PARAMS_INVALID, `tools/call params must be an object, not ${describe(raw)}`);
  if (typeof params['name'] !== 'string') {
    return invalid(BridgeErrorCodes.PARAMS_INVALID, `tools/call params.name must be a string, not ${describe(params['name'])}`);
  }
  const args = params?.['arguments'];
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    return invalid(BridgeErrorCodes.ARGUMENTS_INVALID, `tools/call arguments must be a JSON object, not ${describe(args)}`);
  }
  if (args !== undefined && deeperThan(args, MAX_ARGUMENTS_DEPTH)) {
    return invalid(BridgeErrorCodes.ARGUMENTS_INVALID, `tools/call arguments are nested deeper than ${MAX_ARGUMENTS_DEPTH} levels`);
  }
  return undefined;
}

/**
 * The deepest nesting of objects and arrays `arguments` may have (the arguments object is level
 * 1). Deeper, the SDK's schema check and `JSON.stringify` run out of stack (about 5,000 levels
 * here) and the client got -32603 `Maximum call stack size exceeded` without a code.
 */
const MAX_ARGUMENTS_DEPTH = 2000;

/** Whether `v` nests objects/arrays deeper than `max` levels (iterative: no stack for deep input). */
function deeperThan(v: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[v, 1]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [x, depth] = top;
    if (typeof x !== 'object' || x === null) continue;
    if (depth > max) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x)) if (typeof c === 'object' && c !== null) stack.push([c, depth + 1]);
  }
  return false;
}

/** `null`, `an array`, `undefined` or the JSON type of `v` (`a string`, `an object`), for refusal messages. */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return 'an array';
  const t = typeof v;
  return t === 'object' ? 'an object' : `a ${t}`;
}

/** A -32600 answer for a request the SDK cannot read, `'drop'` for another unreadable message, or undefined. */
function unreadable(message: JSONRPCMessage): { code: number; message: string; data: { code: string } } | 'drop' | undefined {
  if (JSONRPCMessageSchema.safeParse(message).success) return undefined;
  const id = (message as { id?: unknown }).id;
  if (typeof id !== 'string' && typeof id !== 'number') return 'drop';
  const stable = BridgeErrorCodes.REQUEST_INVALID;
  return { code: ErrorCode.InvalidRequest, message: `${stable}: not a JSON-RPC request the bridge can read`, data: { code: stable } };
}

/**
 * Puts {@link refusal} in front of the SDK on `transport`. The SDK sets the transport's
 * `onmessage` when it connects and then calls `start`, so `start` is wrapped: it wraps the
 * handler the SDK set (through the transport's own setter, as Streamable HTTP forwards it)
 * before any message can arrive (an in-memory transport delivers queued ones during `start`).
 * A refused request is answered here and never reaches the SDK; so is a request (it has a
 * string or number `id`) that is not a JSON-RPC message the SDK reads (`request-invalid`, -32600:
 * the SDK would drop it unanswered). Other unreadable messages go to `onerror` and are dropped.
 */
function guard(transport: Transport): void {
  const start = transport.start.bind(transport);
  transport.start = () => {
    const sdk = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const no = refusal(message) ?? unreadable(message);
      if (no === undefined) sdk?.(message, extra);
      else if (no !== 'drop')
        void transport.send({ jsonrpc: '2.0', id: (message as { id: string | number }).id, error: no }).catch(() => undefined);
      else transport.onerror?.(new Error('Invalid JSON-RPC message'));
    };
    return start();
  };
}

/** Most input rounds one 2025-era call may take through the bridge (as the SDK's client driver's `maxRounds`). */
export const MAX_INPUT_ROUNDS = 10;

/** What an upstream may ask of a client mid-call, by method: the client capability each needs. */
const INPUT_METHODS: Readonly<Record<string, string>> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/**
 * The input requests of an input_required result to send to a 2025-era client (as server
 * requests), or the failed tool result to answer instead: `input-unsupported` for a request the
 * client did not declare the capability for (or an unknown method), `input-rounds-exceeded` past
 * {@link MAX_INPUT_ROUNDS}. The result's `_meta` (receipt, budget) is kept on a refusal.
 */
export function legacyAsk(
  result: Record<string, unknown>,
  capabilities: Record<string, unknown>,
  round: number,
): { requests: [string, { method: string; params?: unknown }][] } | { refused: Record<string, unknown> } {
  const refuse = (code: string, why: string) => ({
    refused: { isError: true, content: [{ type: 'text', text: `${code}: ${why}` }], _meta: result['_meta'] ?? {} },
  });
  if (round > MAX_INPUT_ROUNDS) return refuse('input-rounds-exceeded', `the tool asked for input more than ${MAX_INPUT_ROUNDS} times`);
  const asked = result['inputRequests'];
  const requests: [string, { method: string; params?: unknown }][] = [];
  for (const [k, r] of Object.entries(typeof asked === 'object' && asked !== null ? asked : {})) {
    const method = (r as { method?: unknown })?.method;
    const cap = typeof method === 'string' ? INPUT_METHODS[method] : undefined;
    if (cap === undefined || capabilities[cap] === undefined) {
      return refuse(
        'input-unsupported',
        `the tool asked for ${String(method)}, which this client did not declare (capability ${cap ?? 'none'})`,
      );
    }
    requests.push([k, r as { method: string; params?: unknown }]);
  }
  return { requests };
}

/**
 * A new MCP `Server` answering for `agent`; connect it to a transport (`server.connect(t)`).
 * Errors it returns: see BridgeAgent.call (tool calls); `-32602` `arguments-invalid` for
 * `arguments` that are not a JSON object and `progress-token-invalid` for a `progressToken` that
 * is not a string or number (answered before the SDK reads the request); `-32602`
 * `unknown-resource` for a resource other than {@link BUDGET_URI}.
 */
export function bridgeServer(agent: BridgeAgent): Server {
  const server = new Server(BRIDGE_INFO, {
    capabilities: { tools: {}, resources: {}, logging: {} },
    instructions:
      'Every tool call is a signed JCP request decided by an enforcement node. A denied call is a tool result with isError and the deny reason; _meta["jcp/receipt"] names its receipt. Read jcp://budget for the budget left.',
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: (await agent.tools()).map((t) => t.definition) as never,
  }));
  let minLevel = 0;
  server.setRequestHandler(SetLevelRequestSchema, async (req) => {
    minLevel = Math.max(0, LEVELS.indexOf(req.params.level));
    return {};
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const key = req.params._meta?.['jcp/idempotency_key'];
    const progressToken = req.params._meta?.progressToken;
    let sent: Promise<void> = Promise.resolve();
    const relay = (n: McpNotification) => {
      const params = (n.params ?? {}) as Record<string, unknown>;
      let out: { method: 'notifications/progress' | 'notifications/message'; params: Record<string, unknown> } | undefined;
      if (n.method === 'notifications/progress' && progressToken !== undefined)
        out = { method: n.method, params: { ...params, progressToken } };
      if (n.method === 'notifications/message' && LEVELS.indexOf(params['level'] as LoggingLevel) >= minLevel)
        out = { method: n.method, params };
      if (out === undefined) return;
      const send = out;
      sent = sent.then(() => extra.sendNotification(send as never)).catch(() => undefined);
    };
    // The session's capabilities go to the node with every call, so a 2026-07-28 upstream asks only
    // for what this client can answer (docs/bridge.md "Multi round-trip calls").
    const capabilities = (server.getClientCapabilities() ?? {}) as Record<string, unknown>;
    const call = (input: CallInput) =>
      agent.call(req.params.name, req.params.arguments, {
        ...delegationOf(req.params._meta),
        mcpRequestId: extra.requestId,
        ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
        ...(extra.sessionId !== undefined ? { sessionId: extra.sessionId } : {}),
        signal: extra.signal,
        onNotice: relay,
        input,
      });
    let result = await call({ capabilities });
    // The tool needs input (the node's input_required result): this era has no such result, so each
    // input request goes to the client as a server request on this call, and the answers go back
    // to the node as the call's continuation (no second decision, no second debit), round by round.
    for (let round = 1; result['resultType'] === 'input_required'; round++) {
      await sent;
      const asked = legacyAsk(result, capabilities, round);
      if ('refused' in asked) return asked.refused as never;
      const responses: Record<string, unknown> = {};
      for (const [k, r] of asked.requests) {
        const schema =
          r.method === 'elicitation/create'
            ? ElicitResultSchema
            : r.method === 'sampling/createMessage'
              ? CreateMessageResultSchema
              : ListRootsResultSchema;
        responses[k] = await extra.sendRequest({ method: r.method, params: r.params } as never, schema as never, { signal: extra.signal });
      }
      const state = result['requestState'];
      result = await call({ capabilities, responses, ...(typeof state === 'string' ? { state } : {}) });
    }
    await sent;
    return result as never;
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [BUDGET_RESOURCE] }));
  server.setRequestHandler(ReadResourceRequestSchema, (req) => readBudgetResource(agent, req.params.uri));
  const connect = server.connect.bind(server);
  server.connect = (transport: Transport) => {
    guard(transport);
    return connect(transport);
  };
  return server;
}
