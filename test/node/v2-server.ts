/**
 * An MCP server on the SDK v2 server (`@modelcontextprotocol/server`) for the upstream tests: it
 * serves both eras (the 2026-07-28 revision to a client that sends `server/discover`, the 2025
 * handshake otherwise), over stdio (`--stdio`) or Streamable HTTP (`--http`: prints
 * `JCP-LISTENING <port>` on stderr once listening on 127.0.0.1). `V2_TTL_MS` and `V2_SCOPE` set
 * the caching hints of its `tools/list` (absent: no `ttlMs`, i.e. stale at once).
 *
 * Tools: `whoami` returns the request's `_meta` as the server got it (structuredContent `meta`),
 * the era it was answered in, and over HTTP the request's MCP headers; `echo` {text}; `doomed`
 * answers `still here`; `drop_doomed` stops listing `doomed` (it is still answered if called);
 * `stats` returns how many `tools/list` requests the server answered.
 */
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createMcpHandler, Server } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

// `COUNT_FILE`: a line appended per start, so a test counts spawns (test/node/upstream-spawns.test.ts).
if (process.env['COUNT_FILE'] !== undefined) appendFileSync(process.env['COUNT_FILE'], `${process.pid}\n`);
const ttl = process.env['V2_TTL_MS'];
const scope = process.env['V2_SCOPE'];
const hints = { ...(ttl !== undefined ? { ttlMs: Number(ttl) } : {}), ...(scope !== undefined ? { cacheScope: scope } : {}) };
const obj = { type: 'object' as const };
let listed = ['whoami', 'echo', 'doomed', 'drop_doomed', 'stats'];
let lists = 0;
/** The MCP headers of the HTTP request being answered (HTTP only; one request at a time in the tests). */
let headers: Record<string, string> = {};

function server(): Server {
  const s = new Server({ name: 'v2-test', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  s.setRequestHandler('tools/list', () => {
    lists++;
    return { tools: listed.map((name) => ({ name, inputSchema: obj })), ...hints } as never;
  });
  s.setRequestHandler('tools/call', async (req, ctx) => {
    const name = req.params.name;
    const text = (t: string, structured?: Record<string, unknown>) => ({
      content: [{ type: 'text' as const, text: t }],
      ...(structured !== undefined ? { structuredContent: structured } : {}),
    });
    if (name === 'whoami') {
      const meta = { ...((req.params._meta ?? {}) as Record<string, unknown>) };
      const envelope = (ctx.mcpReq as { envelope?: unknown }).envelope;
      return text(JSON.stringify(meta), { meta, envelope: envelope ?? null, headers });
    }
    if (name === 'echo') return text(String((req.params.arguments as { text?: unknown })?.text ?? ''));
    if (name === 'doomed') return text('still here');
    if (name === 'drop_doomed') {
      listed = listed.filter((n) => n !== 'doomed');
      await s.notification({ method: 'notifications/tools/list_changed' }).catch(() => undefined);
      return text('dropped');
    }
    if (name === 'stats') return text(String(lists), { lists });
    return { content: [{ type: 'text', text: `unknown tool ${name}` }], isError: true };
  });
  return s;
}

if (process.argv.includes('--stdio')) {
  serveStdio(server);
} else {
  const handler = createMcpHandler(server, { legacy: 'stateless' });
  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    headers = {};
    for (const [k, v] of Object.entries(req.headers)) if (k.startsWith('mcp-') && typeof v === 'string') headers[k] = v;
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE';
    const web = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method ?? 'POST',
      headers: req.headers as Record<string, string>,
      ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
    });
    const r = await handler.fetch(web);
    res.writeHead(r.status, Object.fromEntries(r.headers));
    if (r.body !== null) for await (const c of r.body) res.write(c);
    res.end();
  });
  http.listen(0, '127.0.0.1', () => {
    process.stderr.write(`JCP-LISTENING ${(http.address() as AddressInfo).port}\n`);
  });
}
