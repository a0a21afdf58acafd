// A stdio MCP server for the bridge's refund test: `echo` answers; `vanish` exits the process
// mid-call, so the node gets no answer (`endpoint-unavailable`, phase `call`) and reverses the
// call's debit. The node starts the server again for the next call.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const tools = ['echo', 'vanish'].map((name) => ({ name, inputSchema: { type: 'object' } }));
const server = new Server({ name: 'vanishing', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, (req) => {
  if (req.params.name === 'vanish') process.exit(0);
  return { content: [{ type: 'text', text: `echo ${JSON.stringify(req.params.arguments ?? {})}` }] };
});
await server.connect(new StdioServerTransport());
