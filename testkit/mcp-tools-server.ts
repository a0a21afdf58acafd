/**
 * An MCP server implementing the tools contract of the official MCP conformance suite's server
 * scenarios (`@modelcontextprotocol/conformance`, scenarios `tools-*`; each scenario's description
 * states the tool it calls and what it checks). The suite's own reference server lives in its
 * repository's examples and is not published to npm, so this one is written here, to the
 * scenario descriptions, and is what `scripts/mcp-conformance.ts` runs directly and behind a node.
 *
 * Run: `node --import tsx testkit/mcp-tools-server.ts --stdio` or `… --http 127.0.0.1:0` (prints
 * `{"url"}` on stdout once listening).
 *
 * Tools: test_simple_text, test_image_content (1×1 PNG), test_audio_content (WAV),
 * test_embedded_resource, test_multiple_content_types, test_tool_with_logging (3 info log
 * messages, 50 ms apart), test_error_handling (`isError`), test_tool_with_progress (0, 50, 100 of
 * 100 when a progress token is given), test_sampling (`sampling/createMessage`),
 * test_elicitation (`elicitation/create`).
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deflateSync } from 'node:zlib';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  SetLevelRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CRC-32 (ISO 3309), as PNG chunks need. */
function crc32(bytes: Uint8Array): number {
  let c = ~0;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

/** A 1×1 red PNG (RFC 2083), built here. */
function redPixelPng(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(1, 0);
  ihdr.writeUInt32BE(1, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolour
  const raw = Buffer.from([0, 255, 0, 0]); // filter 0, then R G B
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** 10 ms of silence as 8 kHz 8-bit mono PCM in a RIFF/WAVE container. */
function silenceWav(): Buffer {
  const samples = 80;
  const b = Buffer.alloc(44 + samples, 128);
  b.write('RIFF', 0, 'latin1');
  b.writeUInt32LE(36 + samples, 4);
  b.write('WAVEfmt ', 8, 'latin1');
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(8000, 28);
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36, 'latin1');
  b.writeUInt32LE(samples, 40);
  return b;
}

const PNG = redPixelPng().toString('base64');
const WAV = silenceWav().toString('base64');
const NO_ARGS = { type: 'object', properties: {} } as const;

const TOOLS = [
  { name: 'test_simple_text', description: 'Returns simple text content', inputSchema: NO_ARGS },
  { name: 'test_image_content', description: 'Returns image content (a 1x1 PNG)', inputSchema: NO_ARGS },
  { name: 'test_audio_content', description: 'Returns audio content (WAV)', inputSchema: NO_ARGS },
  { name: 'test_embedded_resource', description: 'Returns an embedded resource', inputSchema: NO_ARGS },
  { name: 'test_multiple_content_types', description: 'Returns text, image and resource content', inputSchema: NO_ARGS },
  { name: 'test_tool_with_logging', description: 'Sends three log messages while it runs', inputSchema: NO_ARGS },
  { name: 'test_error_handling', description: 'Always fails (isError)', inputSchema: NO_ARGS },
  { name: 'test_tool_with_progress', description: 'Reports progress 0, 50, 100 of 100', inputSchema: NO_ARGS },
  {
    name: 'test_sampling',
    description: 'Asks the client for an LLM completion',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
  },
  {
    name: 'test_elicitation',
    description: 'Asks the client for user input',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  },
];

/** A new server instance (one per session). */
export function toolsServer(): Server {
  const server = new Server({ name: 'jcp-conformance-tools', version: '1.0.0' }, { capabilities: { tools: {}, logging: {} } });
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const args = (req.params.arguments ?? {}) as Record<string, unknown>;
    switch (req.params.name) {
      case 'test_simple_text':
        return { content: [{ type: 'text', text: 'This is a simple text response for testing.' }] };
      case 'test_image_content':
        return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
      case 'test_audio_content':
        return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
      case 'test_embedded_resource':
        return {
          content: [
            {
              type: 'resource',
              resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
            },
          ],
        };
      case 'test_multiple_content_types':
        return {
          content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: PNG, mimeType: 'image/png' },
            {
              type: 'resource',
              resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' },
            },
          ],
        };
      case 'test_tool_with_logging': {
        const log = (data: string) => extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
        await log('Tool execution started');
        await sleep(50);
        await log('Tool processing data');
        await sleep(50);
        await log('Tool execution completed');
        return { content: [{ type: 'text', text: 'Tool with logging executed successfully' }] };
      }
      case 'test_error_handling':
        return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] };
      case 'test_tool_with_progress': {
        const token = req.params._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
          if (token !== undefined)
            await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
          if (progress < 100) await sleep(50);
        }
        return { content: [{ type: 'text', text: String(token ?? 'no progress token') }] };
      }
      case 'test_sampling': {
        const r = await server.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: String(args['prompt'] ?? '') } }],
          maxTokens: 100,
        });
        const c = r.content as { type: string; text?: string };
        return { content: [{ type: 'text', text: `LLM response: ${c.type === 'text' ? c.text : JSON.stringify(c)}` }] };
      }
      case 'test_elicitation': {
        const r = await server.elicitInput({
          message: String(args['message'] ?? ''),
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        });
        return { content: [{ type: 'text', text: `User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}` }] };
      }
      default:
        throw new McpError(ErrorCode.InvalidParams, `unknown tool ${req.params.name}`);
    }
  });
  return server;
}

/** Serves {@link toolsServer} over Streamable HTTP at `/mcp` on loopback; resolves to its URL and a closer. */
export async function serveToolsHttp(host = '127.0.0.1', port = 0): Promise<{ url: string; close: () => Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req, res) => {
    void (async () => {
      const sid = req.headers['mcp-session-id'];
      const known = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (typeof sid === 'string' && known === undefined) {
        res.writeHead(404).end();
        return;
      }
      if (known !== undefined) return known.handleRequest(req, res);
      const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, t);
        },
      });
      t.onclose = () => {
        if (t.sessionId !== undefined) sessions.delete(t.sessionId);
      };
      await toolsServer().connect(t);
      await t.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(port, host, resolve));
  const url = `http://${host}:${(http.address() as AddressInfo).port}/mcp`;
  return {
    url,
    async close() {
      for (const t of sessions.values()) await t.close().catch(() => undefined);
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const mode = process.argv[2];
  if (mode === '--stdio') {
    await toolsServer().connect(new StdioServerTransport());
  } else if (mode === '--http') {
    const [h, p] = (process.argv[3] ?? '127.0.0.1:0').split(':');
    const s = await serveToolsHttp(h, Number(p));
    process.stdout.write(`${JSON.stringify({ url: s.url })}\n`);
  } else {
    process.stderr.write('usage: mcp-tools-server.ts --stdio | --http host:port\n');
    process.exit(2);
  }
}
