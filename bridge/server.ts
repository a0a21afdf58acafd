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
 * Server-to-client requests (sampling, elicitation, roots) that an upstream makes during a call
 * never reach the MCP client: the node's MCP client declares none of those capabilities, so the
 * upstream gets the SDK's JSON-RPC error (-32601, method not found) and decides what its tool
 * returns. The bridge itself sends none.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  type LoggingLevel,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpNotification } from '../client/index.ts';
import { type BridgeAgent, mcpError } from './agent.ts';

/** The URI of the budget resource. */
export const BUDGET_URI = 'jcp://budget';

/** MCP logging levels, least severe first (RFC 5424 severities). */
const LEVELS: readonly LoggingLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** The bridge's implementation info (MCP `initialize`). */
export const BRIDGE_INFO = { name: 'jcp-bridge', version: '0.1.0' } as const;

/**
 * A new MCP `Server` answering for `agent`; connect it to a transport (`server.connect(t)`).
 * Errors it returns: see BridgeAgent.call (tool calls) and `-32602` `unknown-resource` for a
 * resource other than {@link BUDGET_URI}.
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
    const result = await agent.call(req.params.name, req.params.arguments, {
      mcpRequestId: extra.requestId,
      ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
      ...(extra.sessionId !== undefined ? { sessionId: extra.sessionId } : {}),
      signal: extra.signal,
      onNotice: relay,
    });
    await sent;
    return result as never;
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [
      {
        uri: BUDGET_URI,
        name: 'budget',
        title: 'JCP budget',
        description: "Each grant's budget and the remaining budget its last receipt reported (µJ)",
        mimeType: 'application/json',
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    if (req.params.uri !== BUDGET_URI) {
      throw mcpError(ErrorCode.InvalidParams, 'unknown-resource', req.params.uri);
    }
    const body = { agent: agent.did, grants: await agent.budgets() };
    return { contents: [{ uri: BUDGET_URI, mimeType: 'application/json', text: JSON.stringify(body, null, 2) }] };
  });
  return server;
}
