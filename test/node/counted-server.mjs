// A 2025-only stdio MCP server (the v1 SDK: it answers `server/discover` with method-not-found)
// that appends one line to the file `COUNT_FILE` each time it starts, so a test counts spawns.
// `TOOLS=n` lists n tools, each with a long description: 100,000 of them make one `tools/list`
// answer of some 26 MB on a single line, past the v2 client's 10 MiB stdio read buffer.
// `EXIT_BEFORE_INIT=1`: the server exits on any request before `initialize` (as servers on SDKs
// that refuse pre-initialize traffic do), so a `server/discover` probe ends it.
// `CRASH_ON_LIST=1`: the server exits when asked for its tools.
// `FDS_FILE=path`: the server writes there, one per line, what each descriptor it was started
// with (/proc/self/fd) points at, so a test sees what the node let it inherit.
// `EXTRA_TOOLS=1`: it also lists `big` (`{bytes}`: a text result of that many bytes, on one
// line of some bytes + 90) and `exit` (the process exits, as a server an input crashes).
// Any call's `sleep_ms` argument makes it answer that much later (calls in flight together).
import { appendFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

appendFileSync(process.env.COUNT_FILE, `${process.pid}\n`);
if (process.env.FDS_FILE) {
  const fds = readdirSync('/proc/self/fd').map((fd) => {
    try {
      return `${fd} ${readlinkSync(`/proc/self/fd/${fd}`)}`;
    } catch {
      return `${fd} ?`;
    }
  });
  writeFileSync(process.env.FDS_FILE, `${fds.join('\n')}\n`);
}
const n = Number(process.env.TOOLS ?? 1);
const pad = 'x'.repeat(n > 1 ? 200 : 0);
const tools = Array.from({ length: n }, (_, i) => ({ name: `t${i}`, description: pad, inputSchema: { type: 'object' } }));
if (process.env.EXTRA_TOOLS === '1') tools.push(...['big', 'exit'].map((name) => ({ name, inputSchema: { type: 'object' } })));
const server = new Server({ name: 'counted', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => {
  if (process.env.CRASH_ON_LIST === '1') process.exit(3);
  return { tools };
});
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const args = req.params.arguments ?? {};
  if (typeof args.sleep_ms === 'number') await new Promise((r) => setTimeout(r, args.sleep_ms));
  if (req.params.name === 'exit') process.exit(4);
  if (req.params.name === 'big') return { content: [{ type: 'text', text: 'a'.repeat(Number(args.bytes)) }] };
  return { content: [{ type: 'text', text: `ran ${req.params.name}` }] };
});
const transport = new StdioServerTransport();
await server.connect(transport);
if (process.env.EXIT_BEFORE_INIT === '1') {
  let initialized = false;
  const sdk = transport.onmessage;
  transport.onmessage = (m, extra) => {
    if (m.method === 'initialize') initialized = true;
    else if (!initialized && m.id !== undefined) process.exit(0);
    sdk?.(m, extra);
  };
}
