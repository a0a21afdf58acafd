// A stdio MCP server for the bridge's refund test (the SDK v2 server, both eras): `echo` answers;
// `vanish` exits the process mid-call, so the node gets no answer (`endpoint-unavailable`, phase
// `call`) and reverses the call's debit. The node starts the server again for the next call.
import { Server } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const tools = ['echo', 'vanish'].map((name) => ({ name, inputSchema: { type: 'object' } }));
serveStdio(() => {
  const server = new Server({ name: 'vanishing', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/list', () => ({ tools }));
  server.setRequestHandler('tools/call', (req) => {
    if (req.params.name === 'vanish') process.exit(0);
    return { content: [{ type: 'text', text: `echo ${JSON.stringify(req.params.arguments ?? {})}` }] };
  });
  return server;
});
