// A stdio MCP server for the demo's worker tests (the SDK v2 server, both eras): lists the tools
// the demo's workers call (server-filesystem's and server-memory's names, any object as arguments)
// and answers every call with one text item naming the tool, so a node can front it without the
// real servers.
import { Server } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

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
serveStdio(() => {
  const server = new Server({ name: 'demo-stub', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({ tools }));
  server.setRequestHandler('tools/call', (req) => ({ content: [{ type: 'text', text: `${req.params.name} done` }] }));
  return server;
});
