// A stdio MCP server for the upstream tests, built on the SDK's low-level Server: `tools/list`
// pages two tools at a time; `add-tool` registers one more tool and sends
// `notifications/tools/list_changed`; `chatty` sends a logging message and two progress
// notifications (when the call has a progress token) before it answers; `odd` returns ODD; `malformed` a result that is not a CallToolResult;
// `server-error` answers with the JSON-RPC error -32000 (a server-defined error; the server stays up);
// `whoami` returns the request's `_meta` as the server got it (structuredContent `meta`).
// On the v1 SDK on purpose: a 2025-only peer (it answers `server/discover` with method-not-found).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { ODD } from './odd-result.mjs';

const tools = ['t1', 't2', 't3', 'add-tool', 'chatty', 'odd', 'malformed', 'server-error', 'whoami'].map((name) => ({
  name,
  inputSchema: { type: 'object' },
}));
const server = new Server({ name: 'paged', version: '1.0.0' }, { capabilities: { tools: { listChanged: true }, logging: {} } });

server.setRequestHandler(ListToolsRequestSchema, (req) => {
  const at = Number(req.params?.cursor ?? 0);
  const next = at + 2;
  return { tools: tools.slice(at, next), ...(next < tools.length ? { nextCursor: String(next) } : {}) };
});

server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
  const name = req.params.name;
  if (name === 'add-tool') {
    tools.push({ name: 'late', inputSchema: { type: 'object' } });
    await server.notification({ method: 'notifications/tools/list_changed' });
    return { content: [{ type: 'text', text: 'added late' }] };
  }
  if (name === 'chatty') {
    await server.sendLoggingMessage({ level: 'info', data: 'working on it' });
    const token = req.params._meta?.progressToken;
    if (token !== undefined) {
      for (const progress of [1, 2]) {
        await server.notification(
          { method: 'notifications/progress', params: { progressToken: token, progress, total: 2 } },
          { relatedRequestId: extra.requestId },
        );
      }
    }
    return { content: [{ type: 'text', text: 'done' }], structuredContent: { ok: true, ratio: 0.5 } };
  }
  if (name === 'odd') return ODD;
  if (name === 'whoami') {
    const meta = req.params._meta ?? {};
    return { content: [{ type: 'text', text: JSON.stringify(meta) }], structuredContent: { meta } };
  }
  if (name === 'server-error') throw new McpError(-32000, 'kaput');
  if (name === 'malformed') return { content: [{ type: 'text', text: MALFORMED }] };
  return { content: [{ type: 'text', text: `called ${name}` }] };
});

// `malformed`'s answer is corrupted on its way out, past the SDK server's own result check.
const MALFORMED = 'corrupt me on the wire';
const transport = new StdioServerTransport();
const send = transport.send.bind(transport);
transport.send = (m, o) => send(m.result?.content?.[0]?.text === MALFORMED ? { ...m, result: { content: 'not an array' } } : m, o);
await server.connect(transport);
