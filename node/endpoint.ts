/**
 * Endpoints: the real tools a node stands in front of (DESIGN "The way data flows"). A resource
 * maps to an MCP server the node starts and talks to over stdio with `@modelcontextprotocol/sdk`.
 * The frame's action is the tool name; the request's payload holds the tool's arguments (a JSON
 * object, UTF-8). The tool is invoked only on allow, and what it returns goes back to the caller
 * as data (§6: never as control): the bytes of the tool's JSON result.
 *
 * An endpoint that hangs gets a timeout and a clear error in the result (`jcp_error: {code,
 * message}`); the decision and its receipt stand, and the node stays up. An endpoint that cannot
 * start or dies before it answers rejects with {@link EndpointUnavailable}: the node charges
 * nothing for that call (its debit is reversed, `outcome.ts`). After
 * a timeout the server process is recycled (killed, restarted on the next call), since a server
 * that hangs once may be wedged for everyone.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Logger } from 'pino';
import type { McpStdioEndpointConfig } from './config.ts';

/** Codes an endpoint failure carries in the result's `jcp_error` (stable). */
export const EndpointErrorCodes = {
  /** The tool did not answer within the endpoint's `timeout_ms`. */
  TIMEOUT: 'endpoint-timeout',
  /** The server process could not be started, or died during the call. */
  UNAVAILABLE: 'endpoint-unavailable',
  /** The server answered the call with a protocol error (unknown tool, bad arguments…). */
  FAILED: 'endpoint-failed',
  /** An idempotent replay of an allow whose result was not kept (the node stopped in between). */
  RESULT_LOST: 'result-lost',
} as const;

/** One endpoint error code. */
export type EndpointErrorCode = (typeof EndpointErrorCodes)[keyof typeof EndpointErrorCodes];

/**
 * The one way an endpoint says "this call did not happen, so charge nothing for it" (issue 12
 * §3): invoke rejects with an error whose `code` is `endpoint-unavailable`. The endpoint could not
 * be started or reached (`phase: 'start'`: the call was never sent), or the server went away before
 * it answered (`phase: 'call'`). The enforcer then reverses the call's debit with a steward-signed
 * reversal record (`outcome.ts`). Any transport (stdio, Streamable HTTP, …) plugs in by
 * rejecting with this class, or any error carrying that `code`, typically a refused connection.
 */
export class EndpointUnavailable extends Error {
  override readonly name = 'EndpointUnavailable';
  readonly code = EndpointErrorCodes.UNAVAILABLE;
  /** Where it failed: before the call was sent (`start`) or before it was answered (`call`). */
  readonly phase: 'start' | 'call';

  constructor(message: string, phase: 'start' | 'call', options?: ErrorOptions) {
    super(message, options);
    this.phase = phase;
  }
}

/**
 * The endpoint-unavailable failure inside `e` (itself, or a cause up to 4 levels down, e.g. inside
 * the meter's `MeteredError`), or undefined. Duck-typed on `code`, so another transport's error
 * class works too. A failure without a `phase` counts as `call`, the weaker claim.
 */
export function endpointUnavailableIn(e: unknown): { message: string; phase: 'start' | 'call' } | undefined {
  let x: unknown = e;
  for (let i = 0; i < 5 && x !== null && typeof x === 'object'; i++) {
    const o = x as { code?: unknown; phase?: unknown; message?: unknown; cause?: unknown };
    if (o.code === EndpointErrorCodes.UNAVAILABLE) {
      return { message: String(o.message ?? 'endpoint unavailable'), phase: o.phase === 'start' ? 'start' : 'call' };
    }
    x = o.cause;
  }
  return undefined;
}

/** A tool endpoint behind a resource. */
export interface Endpoint {
  /** For logs. */
  readonly name: string;
  /**
   * Calls tool `tool` with `args` and resolves to the result bytes (UTF-8 JSON). A failure after
   * the tool may have acted (a timeout, a protocol error) still resolves, to a result with
   * `isError: true` and `jcp_error: {code, message}`. It rejects only with
   * {@link EndpointUnavailable} (or any error whose `code` is `endpoint-unavailable`), when the
   * node got no answer from the tool; the node then charges nothing for the call.
   */
  invoke(tool: string, args: Record<string, unknown>): Promise<Uint8Array>;
  /** Starts the endpoint ahead of the first call (failures are logged, retried on the next call). */
  start(): Promise<void>;
  /** Stops the endpoint. */
  close(): Promise<void>;
}

const enc = new TextEncoder();

/**
 * The result bytes of an endpoint failure (a CallToolResult with `isError` and
 * `jcp_error: {code, message, ...extra}`); `extra` adds fields to `jcp_error` (text values, e.g.
 * `refunded_uj` on a reversed call).
 */
export function errorResult(code: EndpointErrorCode, message: string, extra: Readonly<Record<string, string>> = {}): Uint8Array {
  return enc.encode(
    JSON.stringify({ isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], jcp_error: { ...extra, code, message } }),
  );
}

class TimeoutError extends Error {}

/** How long a server may take to start and answer `initialize` (at least; more if `timeout_ms` is larger). */
const START_TIMEOUT_MS = 15_000;

/** An MCP server over stdio (a child process), started on demand and restarted after a crash or hang. */
export class McpStdioEndpoint implements Endpoint {
  readonly name: string;
  readonly #cfg: McpStdioEndpointConfig;
  readonly #log: Logger;
  #conn: Promise<{ client: Client; transport: StdioClientTransport }> | undefined;
  #live: { client: Client; transport: StdioClientTransport } | undefined;

  constructor(name: string, cfg: McpStdioEndpointConfig, log: Logger) {
    this.name = name;
    this.#cfg = cfg;
    this.#log = log.child({ endpoint: name });
  }

  /** The server's process id while it runs (for tests and operators). */
  async pid(): Promise<number | null> {
    try {
      return (await this.#connect()).transport.pid;
    } catch {
      return null;
    }
  }

  async start(): Promise<void> {
    try {
      await this.#connect();
    } catch (e) {
      this.#log.warn({ err: (e as Error).message }, 'endpoint did not start; will retry on the next call');
    }
  }

  #connect(): Promise<{ client: Client; transport: StdioClientTransport }> {
    if (this.#conn) return this.#conn;
    let conn: Promise<{ client: Client; transport: StdioClientTransport }> | undefined;
    conn = (async () => {
      // Loaded on first use: a node without endpoints never pays for the MCP SDK.
      const [{ Client }, { StdioClientTransport }] = await Promise.all([
        import('@modelcontextprotocol/sdk/client/index.js'),
        import('@modelcontextprotocol/sdk/client/stdio.js'),
      ]);
      const transport = new StdioClientTransport({
        command: this.#cfg.command,
        args: [...this.#cfg.args],
        env: { ...process.env, ...this.#cfg.env } as Record<string, string>,
        ...(this.#cfg.cwd !== undefined ? { cwd: this.#cfg.cwd } : {}),
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (d: Buffer) => this.#log.debug({ stderr: d.toString('utf8').trimEnd() }, 'endpoint stderr'));
      const client = new Client({ name: 'jcp-node', version: '0.1.0' });
      transport.onclose = () => {
        if (this.#conn === conn) {
          this.#conn = undefined;
          this.#live = undefined;
        }
        this.#log.info('endpoint process exited');
      };
      await withTimeout(client.connect(transport), Math.max(this.#cfg.timeoutMs, START_TIMEOUT_MS), 'connect');
      this.#log.info({ pid: transport.pid }, 'endpoint started');
      const live = { client, transport };
      if (this.#conn === conn) this.#live = live;
      return live;
    })();
    this.#conn = conn;
    conn.catch(() => {
      if (this.#conn === conn) this.#conn = undefined;
    });
    return conn;
  }

  async invoke(tool: string, args: Record<string, unknown>): Promise<Uint8Array> {
    let c: { client: Client; transport: StdioClientTransport };
    try {
      c = await this.#connect();
    } catch (e) {
      throw new EndpointUnavailable(`cannot start ${this.name}: ${(e as Error).message}`, 'start', { cause: e });
    }
    try {
      const r = await withTimeout(
        c.client.callTool({ name: tool, arguments: args }, undefined, { timeout: this.#cfg.timeoutMs + 1000 }),
        this.#cfg.timeoutMs,
        tool,
      );
      return enc.encode(JSON.stringify(r));
    } catch (e) {
      if (e instanceof TimeoutError) {
        this.#log.warn({ tool, timeoutMs: this.#cfg.timeoutMs }, 'endpoint call timed out; recycling the server');
        this.#recycle(c);
        return errorResult(EndpointErrorCodes.TIMEOUT, `${this.name}: tool ${tool} gave no answer within ${this.#cfg.timeoutMs} ms`);
      }
      const msg = (e as Error).message ?? String(e);
      if (this.#live !== c || /closed|EPIPE|ECONNRESET|not connected/i.test(msg)) {
        throw new EndpointUnavailable(`${this.name}: the server went away during ${tool}: ${msg}`, 'call', { cause: e });
      }
      return errorResult(EndpointErrorCodes.FAILED, `${this.name}: ${tool}: ${msg}`);
    }
  }

  #recycle(c: { client: Client; transport: StdioClientTransport }): void {
    if (this.#live === c) {
      this.#conn = undefined;
      this.#live = undefined;
    }
    const pid = c.transport.pid;
    if (pid !== null) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    void c.client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    const conn = this.#conn;
    this.#conn = undefined;
    this.#live = undefined;
    if (!conn) return;
    try {
      const c = await conn;
      await c.client.close();
    } catch {
      // never started, or already gone
    }
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new TimeoutError(`${what}: no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
