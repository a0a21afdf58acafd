/**
 * An MCP server implementing the contract of the official MCP conformance suite's server scenarios
 * (`@modelcontextprotocol/conformance` 0.2.0-alpha.12; each scenario's description states the tool,
 * prompt or resource it uses and what it checks), on the SDK v2 server (`@modelcontextprotocol/server`),
 * serving both eras from one definition: the 2025 handshake (sessionful Streamable HTTP, or a stdio
 * connection opened with `initialize`) and the stateless 2026-07-28 revision (`server/discover`, the
 * per-request `_meta` envelope, `resultType`, caching hints). The suite's own reference server is not
 * published to npm, so this one is written here, to the scenario descriptions; `scripts/mcp-conformance.ts`
 * runs it directly and behind a node.
 *
 * Run: `node --import tsx testkit/mcp-tools-server.ts --stdio` or `… --http 127.0.0.1:0` (prints
 * `{"url"}` on stdout once listening).
 *
 * Tools (scenarios `tools-*`): test_simple_text, test_image_content (1×1 PNG), test_audio_content
 * (WAV), test_embedded_resource, test_multiple_content_types, test_tool_with_logging (3 info log
 * messages, 50 ms apart), test_error_handling (`isError`), test_tool_with_progress (0, 50, 100 of 100
 * when a progress token is given), test_sampling and test_elicitation (an input request: in the 2025
 * era the SDK's legacy shim sends it as `sampling/createMessage` / `elicitation/create`).
 * Multi round-trip (scenarios `input-required-result-*`, 2026-07-28): the
 * `test_input_required_result_*` tools and the `test_input_required_result_prompt` prompt; their
 * `requestState` is HMAC-sealed (SDK `createRequestStateCodec`, a key per process), so a tampered one
 * is refused `-32602`. Stateless diagnostics (`server-stateless`): test_missing_capability (needs the
 * client's `sampling`, else `-32021`), test_logging_tool (logs only at a requested `logLevel`),
 * test_streaming_elicitation. Caching (`caching`): every cacheable list and read carries
 * `ttlMs`/`cacheScope`. Over HTTP, `Host` and `Origin` must name loopback (`dns-rebinding-protection`,
 * 403 otherwise).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deflateSync } from 'node:zlib';
import {
  type McpRequestContext,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type ServerContext,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  createRequestStateCodec,
  hostHeaderValidationResponse,
  inputRequired,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { TOOLS } from './mcp-tools-list.ts';

export { CONFORMANCE_TOOL_NAMES } from './mcp-tools-list.ts';

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
const ENVELOPE_CAPS = 'io.modelcontextprotocol/clientCapabilities';
const ENVELOPE_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
/** Lifetime vouched for of the fixed lists and the static resource, ms (scenario `caching`). */
export const TOOLS_SERVER_TTL_MS = 60_000;

/** The sealed multi round-trip state: the round the flow is in. */
type FlowState = { round: number; tool: string };
const codec = createRequestStateCodec<FlowState>({ key: randomBytes(32) });

const nameSchema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } as const;
const askName = (message: string) => inputRequired.elicit({ message, requestedSchema: nameSchema as never });

/** The accepted content of an elicitation response under `key`, or undefined. */
function accepted(ctx: ServerContext, key: string): Record<string, unknown> | undefined {
  const r = ctx.mcpReq.inputResponses?.[key] as { action?: string; content?: Record<string, unknown> } | undefined;
  return r?.action === 'accept' && typeof r.content === 'object' && r.content !== null ? r.content : undefined;
}

/** The text of a sampling response under `key`, or undefined. */
function sampled(ctx: ServerContext, key: string): string | undefined {
  const r = ctx.mcpReq.inputResponses?.[key] as { content?: { type?: string; text?: string } } | undefined;
  return r?.content?.type === 'text' ? r.content.text : r === undefined ? undefined : JSON.stringify(r.content);
}

const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

/** The client capabilities of this request: the 2026-07-28 envelope's, else the 2025 handshake's. */
function clientCaps(server: Server, ctx: ServerContext): Record<string, unknown> {
  const env = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return (env?.[ENVELOPE_CAPS] as Record<string, unknown> | undefined) ?? (server.getClientCapabilities() as Record<string, unknown>) ?? {};
}

/** Multi round-trip tools (scenarios `input-required-result-*`): a result, or the input still required. */
async function multiRound(name: string, server: Server, ctx: ServerContext): Promise<unknown> {
  const state = ctx.mcpReq.requestState<FlowState>();
  switch (name) {
    case 'test_input_required_result_elicitation': {
      const c = accepted(ctx, 'user_name');
      if (typeof c?.['name'] === 'string') return text(`Hello, ${c['name']}!`);
      return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    }
    case 'test_input_required_result_sampling': {
      const t = sampled(ctx, 'capital_question');
      if (t !== undefined) return text(`The model said: ${t}`);
      const messages = [{ role: 'user' as const, content: { type: 'text' as const, text: 'What is the capital of France?' } }];
      return inputRequired({ inputRequests: { capital_question: inputRequired.createMessage({ messages, maxTokens: 100 }) } });
    }
    case 'test_input_required_result_list_roots': {
      const r = ctx.mcpReq.inputResponses?.['client_roots'] as { roots?: Array<{ uri: string }> } | undefined;
      if (Array.isArray(r?.roots)) return text(`Roots: ${r.roots.map((x) => x.uri).join(', ')}`);
      return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    }
    case 'test_input_required_result_request_state':
    case 'test_input_required_result_tampered_state': {
      const ok = accepted(ctx, 'confirm');
      if (ok !== undefined && state?.tool === name) return text(`state-ok: confirmed ${JSON.stringify(ok['ok'])}`);
      const confirm = inputRequired.elicit({
        message: 'Please confirm',
        requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } as never,
      });
      return inputRequired({ inputRequests: { confirm }, requestState: await codec.mint({ round: 1, tool: name }) });
    }
    case 'test_input_required_result_multiple_inputs': {
      const r = ctx.mcpReq.inputResponses ?? {};
      if (state?.tool === name && ['user_name', 'greeting', 'client_roots'].every((k) => k in r))
        return text(`All inputs received: ${JSON.stringify(accepted(ctx, 'user_name'))}, ${sampled(ctx, 'greeting')}`);
      const messages = [{ role: 'user' as const, content: { type: 'text' as const, text: 'Generate a greeting' } }];
      return inputRequired({
        inputRequests: {
          user_name: askName('What is your name?'),
          greeting: inputRequired.createMessage({ messages, maxTokens: 50 }),
          client_roots: inputRequired.listRoots(),
        },
        requestState: await codec.mint({ round: 1, tool: name }),
      });
    }
    case 'test_input_required_result_multi_round': {
      if (state?.tool === name && state.round === 2 && accepted(ctx, 'step2') !== undefined)
        return text(`Done: ${JSON.stringify(accepted(ctx, 'step2'))}`);
      if (state?.tool === name && state.round === 1 && accepted(ctx, 'step1') !== undefined) {
        const step2 = inputRequired.elicit({
          message: 'Step 2: What is your favorite color?',
          requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } as never,
        });
        return inputRequired({ inputRequests: { step2 }, requestState: await codec.mint({ round: 2, tool: name }) });
      }
      return inputRequired({
        inputRequests: { step1: askName('Step 1: What is your name?') },
        requestState: await codec.mint({ round: 1, tool: name }),
      });
    }
    case 'test_input_required_result_capabilities': {
      const caps = clientCaps(server, ctx);
      if (ctx.mcpReq.inputResponses !== undefined) return text('Inputs received');
      const asks: Record<string, ReturnType<typeof askName>> = {};
      if (caps['sampling'] !== undefined)
        asks['completion'] = inputRequired.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }],
          maxTokens: 20,
        });
      if (caps['elicitation'] !== undefined) asks['user_name'] = askName('What is your name?');
      return Object.keys(asks).length === 0 ? text('Nothing to ask') : inputRequired({ inputRequests: asks });
    }
    default:
      return undefined;
  }
}

/** The tools of the `tools-*` scenarios (both eras). */
async function toolsScenario(
  name: string,
  args: Record<string, unknown>,
  ctx: ServerContext,
  meta: Record<string, unknown>,
): Promise<unknown> {
  switch (name) {
    case 'test_simple_text':
      return text('This is a simple text response for testing.');
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
      for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i > 0) await sleep(50);
        await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data } } as never);
      }
      return text('Tool with logging executed successfully');
    }
    case 'test_error_handling':
      return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] };
    case 'test_tool_with_progress': {
      const token = meta['progressToken'] as string | number | undefined;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined)
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } } as never);
        if (progress < 100) await sleep(50);
      }
      return text(String(token ?? 'no progress token'));
    }
    case 'test_sampling': {
      const t = sampled(ctx, 'completion');
      if (t !== undefined) return text(`LLM response: ${t}`);
      const messages = [{ role: 'user' as const, content: { type: 'text' as const, text: String(args['prompt'] ?? '') } }];
      return inputRequired({ inputRequests: { completion: inputRequired.createMessage({ messages, maxTokens: 100 }) } });
    }
    case 'test_elicitation': {
      const r = ctx.mcpReq.inputResponses?.['user_input'] as { action?: string; content?: unknown } | undefined;
      if (r !== undefined) return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
      const requestedSchema = {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      };
      return inputRequired({
        inputRequests: {
          user_input: inputRequired.elicit({ message: String(args['message'] ?? ''), requestedSchema: requestedSchema as never }),
        },
      });
    }
    default:
      return undefined;
  }
}

/** The diagnostics of scenario `server-stateless` (2026-07-28). */
async function statelessScenario(name: string, server: Server, ctx: ServerContext): Promise<unknown> {
  switch (name) {
    case 'test_missing_capability':
      if (clientCaps(server, ctx)['sampling'] === undefined)
        throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { sampling: {} } });
      return text('The client declared sampling');
    case 'test_logging_tool': {
      const env = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
      if (env === undefined || env[ENVELOPE_LOG_LEVEL] !== undefined)
        await ctx.mcpReq.notify({
          method: 'notifications/message',
          params: { level: 'info', data: 'logged at the requested level' },
        } as never);
      return text('Logging tool done');
    }
    case 'test_streaming_elicitation': {
      const c = accepted(ctx, 'user_name');
      if (c !== undefined) return text(`Thanks, ${JSON.stringify(c)}`);
      return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    }
    default:
      return undefined;
  }
}

const PROMPT = 'test_input_required_result_prompt';
const RESOURCE = { uri: 'test://static-text', name: 'static-text', mimeType: 'text/plain' };

/**
 * A new SDK v2 server (one per 2025 session or stdio connection, one per 2026-07-28 request),
 * answering both eras from the same handlers. Unknown tool, prompt or resource: `-32602`.
 */
export function toolsServer(_ctx?: McpRequestContext): Server {
  const hint = { ttlMs: TOOLS_SERVER_TTL_MS, cacheScope: 'public' as const };
  const server = new Server({ name: 'jcp-conformance-tools', version: '2.0.0' }, {
    capabilities: { tools: {}, logging: {}, prompts: {}, resources: {} },
    cacheHints: {
      'tools/list': hint,
      'prompts/list': hint,
      'resources/list': hint,
      'resources/templates/list': hint,
      'resources/read': hint,
      'server/discover': hint,
    },
    requestState: { verify: codec.verify },
  } as never);
  server.setRequestHandler('logging/setLevel' as never, async () => ({}) as never);
  server.setRequestHandler('tools/list', async () => ({ tools: TOOLS as never }));
  server.setRequestHandler('tools/call', async (req, ctx) => {
    const name = req.params.name;
    const args = (req.params.arguments ?? {}) as Record<string, unknown>;
    const meta = (req.params._meta ?? {}) as Record<string, unknown>;
    const r =
      (await toolsScenario(name, args, ctx, meta)) ?? (await multiRound(name, server, ctx)) ?? (await statelessScenario(name, server, ctx));
    if (r === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool ${name}`);
    return r as never;
  });
  server.setRequestHandler('prompts/list', async () => ({
    prompts: [{ name: PROMPT, description: 'A prompt that asks for context first (input_required)' }],
  }));
  server.setRequestHandler('prompts/get', async (req, ctx) => {
    if (req.params.name !== PROMPT) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown prompt ${req.params.name}`);
    const c = accepted(ctx, 'user_context');
    if (c === undefined && ctx.mcpReq.inputResponses === undefined) {
      const ask = inputRequired.elicit({
        message: 'What context should the prompt use?',
        requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] } as never,
      });
      return inputRequired({ inputRequests: { user_context: ask } }) as never;
    }
    return {
      messages: [{ role: 'user', content: { type: 'text', text: `Use this context: ${JSON.stringify(c?.['context'] ?? '')}` } }],
    } as never;
  });
  server.setRequestHandler('resources/list', async () => ({ resources: [RESOURCE] }));
  server.setRequestHandler('resources/templates/list', async () => ({ resourceTemplates: [] }));
  server.setRequestHandler('resources/read', async (req) => {
    if (req.params.uri !== RESOURCE.uri) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown resource ${req.params.uri}`);
    return { contents: [{ uri: RESOURCE.uri, mimeType: 'text/plain', text: 'This is a static text resource.' }] } as never;
  });
  return server;
}

/** `req` (body read in full) as a web `Request`, aborted when the client goes away. */
async function webRequest(req: IncomingMessage, res: ServerResponse): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const hasBody = req.method === 'POST' || req.method === 'PUT';
  return new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/mcp'}`, {
    method: req.method ?? 'GET',
    headers,
    ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
    signal: gone.signal,
  });
}

/** Writes a web `Response` (JSON or an SSE stream) to `res`. */
async function sendWeb(res: ServerResponse, r: Response): Promise<void> {
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    headers[k] = v;
  });
  res.writeHead(r.status, headers);
  res.flushHeaders();
  if (r.body !== null) for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
  res.end();
}

/**
 * Serves {@link toolsServer} over Streamable HTTP at `/mcp` on loopback, both eras on one URL: a
 * request the SDK's classifier calls 2026-07-28 (`isLegacyRequest` false) is answered statelessly
 * (`createMcpHandler`, strict); the rest is the 2025 era, sessionful (an `Mcp-Session-Id` per
 * `initialize`; an unknown one 404). `Host` and `Origin` must name loopback (403 otherwise, SDK
 * `hostHeaderValidationResponse`/`originValidationResponse`). Resolves to its URL and a closer.
 */
export async function serveToolsHttp(host = '127.0.0.1', port = 0): Promise<{ url: string; close: () => Promise<void> }> {
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const modern = createMcpHandler((ctx) => toolsServer(ctx), { legacy: 'reject' });
  const legacy = async (web: Request): Promise<Response> => {
    const sid = web.headers.get('mcp-session-id');
    if (sid !== null) return sessions.get(sid)?.handleRequest(web) ?? new Response('session not found', { status: 404 });
    const t: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, t);
      },
    });
    t.onclose = () => {
      if (t.sessionId !== undefined) sessions.delete(t.sessionId);
    };
    await toolsServer({ era: 'legacy' }).connect(t);
    return t.handleRequest(web);
  };
  const http = createServer((req, res) => {
    void (async () => {
      const web = await webRequest(req, res);
      const refused =
        hostHeaderValidationResponse(web, localhostAllowedHostnames()) ?? originValidationResponse(web, localhostAllowedOrigins());
      if (refused !== undefined) return sendWeb(res, refused);
      const isModern = web.method === 'POST' && !web.headers.has('mcp-session-id') && !(await isLegacyRequest(web));
      return sendWeb(res, isModern ? await modern.fetch(web) : await legacy(web));
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
      await modern.close().catch(() => undefined);
      for (const t of sessions.values()) await t.close().catch(() => undefined);
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const mode = process.argv[2];
  if (mode === '--stdio') {
    serveStdio((ctx) => toolsServer(ctx));
  } else if (mode === '--http') {
    const [h, p] = (process.argv[3] ?? '127.0.0.1:0').split(':');
    const s = await serveToolsHttp(h, Number(p));
    process.stdout.write(`${JSON.stringify({ url: s.url })}\n`);
  } else {
    process.stderr.write('usage: mcp-tools-server.ts --stdio | --http host:port\n');
    process.exit(2);
  }
}
