/**
 * The MCP pass-through floor of the gateway bench (`bench/gateway.ts`): an MCP server over stdio
 * that hands every `tools/list` and `tools/call` to an MCP client of its own connected to the real
 * server (stdio), on the same SDKs as the enforcing path — the bridge's 2025 face
 * (`@modelcontextprotocol/sdk` v1 `Server`) in front, the node's upstream client
 * (`@modelcontextprotocol/client` v2) behind — and nothing else: no signature, no decision, no
 * log, no second process hop. What it adds to a direct call is what the two extra MCP endpoints
 * and one extra stdio hop cost on this machine, before any enforcement.
 *
 * Usage: `node --import tsx bench/sdkproxy.ts <command> [args…]` (the upstream server's command).
 * Exits when its stdin closes.
 */
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
// The v1 SDK server, as the bridge's 2025 face uses it (bridge/server.ts).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('usage: sdkproxy.ts <command> [args…]\n');
  process.exit(2);
}
const upstream = new Client({ name: 'jcp-bench-sdkproxy', version: '1' });
await upstream.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
const server = new Server({ name: 'jcp-bench-sdkproxy', version: '1' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => (await upstream.listTools()) as never);
server.setRequestHandler(CallToolRequestSchema, async (r) => (await upstream.callTool(r.params)) as never);
const transport = new StdioServerTransport();
// The client closing the pipe ends stdin (the SDK's transport does not close itself on it).
process.stdin.on('end', () => void upstream.close().finally(() => process.exit(0)));
await server.connect(transport);
