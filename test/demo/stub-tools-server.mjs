// A stdio MCP server for the demo's worker tests: lists the tools the demo's workers call
// (server-filesystem's and server-memory's names, any object as arguments) and answers every
// call with one text item naming the tool, so a node can front it without the real servers.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const names = [
  'read_text_file',
  'search_files',
  'directory_tree',
  'get_file_info',
  'create_entities',
  'add_observations',
  'search_nodes',
  'open_nodes',
];
const tools = names.map((name) => ({ name, inputSchema: { type: 'object' } }));
const server = new Server({ name: 'demo-stub', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, (req) => ({ content: [{ type: 'text', text: `${req.params.name} done` }] }));
await server.connect(new StdioServerTransport());
