/**
 * MCP servers for the upstream tests, on loopback only: `@modelcontextprotocol/server-everything`
 * over Streamable HTTP as a child process (bound to 127.0.0.1 by a preload, on a free port or a
 * given one for a restart), the SDK v2 test server (v2-server.ts, both eras) over stdio or HTTP,
 * and a tiny in-process Streamable HTTP server (the SDK v2 server) that reports the `Authorization` header it received.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createMcpHandler, Server as McpServer } from '@modelcontextprotocol/server';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const EVERYTHING = path.join(ROOT, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const PRELOAD = path.join(HERE, 'loopback-listen.mjs');
/** tsx's ESM loader as a file URL (so `--import` finds it from any working directory). */
const TSX = pathToFileURL(path.join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

/** A running server-everything (Streamable HTTP at `url`). */
export interface Everything {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGKILLs the server and waits for it to exit. */
  kill(): Promise<void>;
}

/** Starts server-everything over Streamable HTTP on 127.0.0.1 (`port` 0 = a free one). */
export function startEverything(port = 0): Promise<Everything> {
  return listening('server-everything', ['--import', PRELOAD, EVERYTHING, 'streamableHttp'], { PORT: String(port) });
}

/** The SDK v2 test server (test/node/v2-server.ts, both eras) as a stdio command for a resource's endpoint. */
export const V2_SERVER_STDIO = { command: process.execPath, args: ['--import', TSX, path.join(HERE, 'v2-server.ts'), '--stdio'] };

/**
 * Starts the SDK v2 test server (test/node/v2-server.ts: both eras, stateless HTTP) on
 * 127.0.0.1, a free port; `env` sets its caching hints (`V2_TTL_MS`, `V2_SCOPE`).
 */
export function startV2Http(env: Record<string, string> = {}): Promise<Everything> {
  return listening('v2-server', ['--import', TSX, path.join(HERE, 'v2-server.ts'), '--http'], env);
}

/** Spawns `node args` with `env` added and resolves once it printed `JCP-LISTENING <port>` on stderr (20 s at most). */
function listening(what: string, args: string[], env: Record<string, string>): Promise<Everything> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return new Promise<Everything>((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not listen within 20 s: ${err}`));
    }, 20_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString('utf8');
      const m = /JCP-LISTENING (\d+)/.exec(err);
      if (m && timer.hasRef()) {
        clearTimeout(timer);
        timer.unref();
        const p = Number(m[1]);
        resolve({
          port: p,
          url: `http://127.0.0.1:${p}/mcp`,
          child,
          kill: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
            await exited;
          },
        });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before listening: ${err}`));
    });
  });
}

/** A Streamable HTTP MCP server that answers 401 without `Bearer <token>` and reports the header. */
export interface BearerServer {
  readonly url: string;
  /** Every `Authorization` header value received, in order. */
  readonly seen: string[];
  close(): Promise<void>;
}

/**
 * Starts {@link BearerServer} on 127.0.0.1, a free port; tool `whoami` returns the header it saw.
 * The SDK v2 server, stateless (both eras: the node negotiates 2026-07-28 with it).
 */
export async function startBearerServer(token: string): Promise<BearerServer> {
  const seen: string[] = [];
  /** Stateless, as the SDK's pattern is: a fresh handler (and server) per request, answering with that request's header. */
  const handlerFor = (auth: string) =>
    createMcpHandler(
      () => {
        const mcp = new McpServer({ name: 'bearer-check', version: '1.0.0' }, { capabilities: { tools: {} } });
        mcp.setRequestHandler('tools/list', () => ({
          tools: [
            { name: 'whoami', description: 'returns the Authorization header it received', inputSchema: { type: 'object' as const } },
          ],
        }));
        mcp.setRequestHandler('tools/call', () => ({ content: [{ type: 'text' as const, text: auth }] }));
        return mcp;
      },
      { legacy: 'stateless' },
    );
  const server: Server = createServer(async (req, res) => {
    const auth = req.headers.authorization ?? '';
    seen.push(auth);
    if (auth !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE';
    const r = await handlerFor(auth).fetch(
      new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method ?? 'POST',
        headers: req.headers as Record<string, string>,
        ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
      }),
    );
    res.writeHead(r.status, Object.fromEntries(r.headers));
    if (r.body !== null) for await (const c of r.body) res.write(c);
    res.end();
  });
  await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1' }, () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
