/**
 * Endpoints: the real tools a node stands in front of. A resource maps to an MCP server the node
 * reaches with `@modelcontextprotocol/sdk`: a child process over stdio ({@link McpStdioEndpoint})
 * or a remote server over Streamable HTTP ({@link McpHttpEndpoint}). The frame's action is the
 * tool name; the request's payload holds the tool's arguments (a JSON object, UTF-8). The tool is
 * invoked only on allow, and what it returns goes back to the caller as data (§6: never as
 * control): the UTF-8 JSON of the upstream's `CallToolResult`, exactly as it sent it (content,
 * structuredContent, isError, _meta).
 *
 * The node knows each upstream's tools (`tools/list`, every page, fetched on connect and again on
 * `notifications/tools/list_changed`), so the enforcer can refuse an unknown tool before any debit.
 *
 * A call that cannot be made throws an {@link EndpointError} with a stable code; the enforcer turns
 * it into a result carrying `jcp_error: {code, message}` while the decision and its receipt stand.
 * `endpoint-unavailable` means the node got no answer: the server could not be reached or started
 * (`phase: 'start'`, the call was never sent) or went away before it answered (`phase: 'call'`).
 * The node charges nothing for such a call: its debit is reversed by a steward-signed reversal
 * record (`outcome.ts`). A timeout or a protocol error is charged, because the tool
 * may have acted.
 * After a transport failure the connection is dropped and the next call reconnects (a few
 * attempts, 50 → 200 ms apart); after a timeout the server is recycled (a stdio process killed),
 * since a server that hangs once may be wedged for everyone.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { readSecretFile } from './keyfile.ts';
import type { HeaderSource, McpHttpEndpointConfig, McpStdioEndpointConfig } from './config.ts';

/** Codes an endpoint failure carries (in {@link EndpointError} and the result's `jcp_error`; stable). */
export const EndpointErrorCodes = {
  /** The tool did not answer within the endpoint's `timeout_ms`. */
  TIMEOUT: 'endpoint-timeout',
  /** The server could not be reached or started, or went away during the call. */
  UNAVAILABLE: 'endpoint-unavailable',
  /** The server answered the call with a protocol error (bad arguments…) or a reply that is not a CallToolResult. */
  FAILED: 'endpoint-failed',
  /** An idempotent replay of an allow whose result was not kept (the node stopped in between). */
  RESULT_LOST: 'result-lost',
  /**
   * The caller went away during a stream (A2A `SendStreamingMessage`/`SubscribeToTask`): the node
   * closed the upstream stream; the call is charged (the agent had the task).
   */
  CALLER_GONE: 'caller-gone',
} as const;

/** One endpoint error code. */
export type EndpointErrorCode = (typeof EndpointErrorCodes)[keyof typeof EndpointErrorCodes];

/** Where an `endpoint-unavailable` call failed: before the call was sent (`start`), or before it was answered (`call`). */
export type UnavailablePhase = 'start' | 'call';

/**
 * A tool call that did not produce the upstream's result, with a stable {@link EndpointErrorCode}.
 * For `endpoint-unavailable`, `phase` says where it failed (absent = `call`, the weaker claim).
 */
export class EndpointError extends Error {
  override readonly name: string = 'EndpointError';
  readonly code: EndpointErrorCode;
  readonly phase: UnavailablePhase | undefined;
  constructor(code: EndpointErrorCode, message: string, options?: ErrorOptions & { readonly phase?: UnavailablePhase }) {
    super(message, options);
    this.code = code;
    this.phase = options?.phase;
  }
}

/**
 * The one way an endpoint says "this call did not happen, so charge nothing for it": an {@link EndpointError} with code `endpoint-unavailable` and its phase. Any transport
 * plugs in by rejecting `invoke` with this, or with any error whose `code` is
 * `endpoint-unavailable`.
 */
export class EndpointUnavailable extends EndpointError {
  override readonly name = 'EndpointUnavailable';
  constructor(message: string, phase: UnavailablePhase, options?: ErrorOptions) {
    super(EndpointErrorCodes.UNAVAILABLE, message, { ...options, phase });
  }
}

/**
 * The endpoint-unavailable failure inside `e` (itself, or a cause up to 4 levels down, e.g. inside
 * the meter's `MeteredError`), or undefined. Duck-typed on `code`, so another transport's error
 * class works too. A failure without a `phase` counts as `call`, the weaker claim.
 */
export function endpointUnavailableIn(e: unknown): { message: string; phase: UnavailablePhase } | undefined {
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

/** A JSON-RPC notification the upstream sent (`{jsonrpc: "2.0", method, params?}`). */
export type McpNotificationMessage = { readonly method: string; readonly params?: Record<string, unknown> } & Record<string, unknown>;

/** Per-call options of {@link Endpoint.invoke}. */
export interface InvokeOptions {
  /**
   * Receives the upstream's `notifications/progress` (for this call's progress token, which the
   * endpoint then sets) and `notifications/message` (only while this is the endpoint's only call
   * in flight, so one caller never sees another's logs), in arrival order, before invoke resolves.
   */
  readonly onNotification?: (n: McpNotificationMessage) => void;
  /** Aborted when the caller's connection closes (an A2A stream is then closed upstream). */
  readonly signal?: AbortSignal;
  /**
   * Who asks (A2A endpoints, node/a2a.ts): the caller's did:key (sent upstream as `jcp/caller`),
   * the frame's leaf grant id and resource (a task started is bound to them), and the peer address
   * (streams are bounded per peer).
   */
  readonly caller?: { readonly did: string; readonly grantId: string; readonly resource: string; readonly peer: string };
}

/** What the endpoint knows of a tool name: listed by the upstream, not listed, or no list yet. */
export type ToolStatus = 'known' | 'unknown' | 'unlisted';

/**
 * What a request-path check before the decision says (an A2A endpoint's {@link Endpoint.precheck}):
 * the arguments to invoke with, or a refusal with a stable node error code.
 */
export type Precheck = { readonly args: Record<string, unknown> } | { readonly code: string; readonly message: string };

/** A tool endpoint behind a resource. */
export interface Endpoint {
  /** For logs. */
  readonly name: string;
  /** `a2a` for an A2A agent (node/a2a.ts); absent for an MCP server. */
  readonly kind?: 'a2a';
  /**
   * A2A only: checks a request before the decision (frame kind, payload, skill, task binding,
   * stream bounds; docs/a2a.md). `leafActions` are the leaf grant's actions.
   */
  precheck?(
    frame: { readonly kind: string; readonly action: string; readonly grant_id: string; readonly resource: string },
    caller: string,
    payload: Uint8Array | undefined,
    notify: boolean,
    leafActions: readonly string[],
    peer: string,
  ): Precheck;
  /** A2A only: the agent card's `skills` (last read), or undefined before any card. */
  skills?(): readonly Record<string, unknown>[] | undefined;
  /**
   * Calls tool `tool` with `args`; resolves to the result bytes (UTF-8 JSON of the upstream's
   * `CallToolResult`; a tool's own failure is a result with `isError: true`).
   * @throws EndpointError `endpoint-unavailable` (with its phase; the node then charges nothing
   *   for the call) | `endpoint-timeout` | `endpoint-failed`.
   */
  invoke(tool: string, args: Record<string, unknown>, opts?: InvokeOptions): Promise<Uint8Array>;
  /** The upstream's last known `tools/list` `tools` (all pages), or undefined before any list. */
  tools(): readonly Record<string, unknown>[] | undefined;
  /** Whether `tool` is in the last known list ({@link ToolStatus}). Synchronous. */
  toolStatus(tool: string): ToolStatus;
  /** Connects (once) if no list is known yet, so {@link tools} has one; never rejects. */
  ensureTools(): Promise<void>;
  /**
   * Why the last connect for the tool list failed (the error, and for a stdio server the tail of
   * its stderr, at most {@link STDERR_TAIL_CHARS} characters); undefined once a list is known.
   */
  lastFailure?(): string | undefined;
  /** Starts the endpoint ahead of the first call (failures are logged, retried on the next call). */
  start(): Promise<void>;
  /** Stops the endpoint. */
  close(): Promise<void>;
}

const enc = new TextEncoder();

/** Most characters of a stdio server's stderr kept to explain a failed start ({@link Endpoint.lastFailure}). */
const STDERR_TAIL_CHARS = 512;

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

let typesModule: Promise<typeof import('@modelcontextprotocol/sdk/types.js')> | undefined;
/** The SDK's schemas, loaded once on first use (a node without endpoints never loads them). */
function sdkTypes(): Promise<typeof import('@modelcontextprotocol/sdk/types.js')> {
  typesModule ??= import('@modelcontextprotocol/sdk/types.js');
  return typesModule;
}

/** How long a server may take to start and answer `initialize` (at least; more if `timeout_ms` is larger). */
const START_TIMEOUT_MS = 15_000;
/** Connect attempts per call, and the delay before the second (doubled after each failure). */
const CONNECT_ATTEMPTS = 3;
const CONNECT_BACKOFF_MS = 50;
/** After a failed connect for the tool list, no new one for this long (ms), doubled per failure. */
export const TOOLS_BACKOFF_MS = 1_000;
/** The longest back-off between connects for the tool list (ms). */
export const TOOLS_BACKOFF_MAX_MS = 60_000;
/** Pages of `tools/list` read at most (a server that pages forever is cut off there). */
const MAX_TOOL_PAGES = 100;
/** The `_meta` key that marks the node's own requests on their way out (stripped before sending). */
const MARK = 'jcp.node/call';

interface Live {
  readonly client: Client;
  readonly transport: Transport;
  /** Aborted (with an `endpoint-unavailable` EndpointError) once the transport gives up on the server. */
  readonly lost: AbortController;
}

/** A request of ours in flight: its raw JSON-RPC result, and who gets its notifications. */
interface Slot {
  raw?: unknown;
  /** Set when the server answered this request with a JSON-RPC error (its answer, not a lost connection). */
  answeredError?: boolean;
  readonly emit: ((n: McpNotificationMessage) => void) | undefined;
}

type Msg = Record<string, unknown>;

/** The MCP client side shared by both transports: connect, tool list, calls, notifications. */
abstract class McpEndpoint implements Endpoint {
  readonly name: string;
  protected readonly log: Logger;
  readonly #timeoutMs: number;
  #conn: Promise<Live> | undefined;
  #live: Live | undefined;
  #tools: readonly Record<string, unknown>[] | undefined;
  #toolNames: ReadonlySet<string> = new Set();
  #seq = 0;
  #calls = 0;
  readonly #slots = new Map<string, Slot>();
  readonly #byId = new Map<string | number, Slot>();
  readonly #byToken = new Map<string | number, Slot>();

  protected constructor(name: string, timeoutMs: number, log: Logger) {
    this.name = name;
    this.#timeoutMs = timeoutMs;
    this.log = log.child({ endpoint: name });
  }

  /** A new, unstarted transport to the server. */
  protected abstract openTransport(): Promise<Transport>;
  /** Frees what a dropped connection holds (a stdio process is killed). */
  protected abstract dispose(live: Live): void;

  async start(): Promise<void> {
    try {
      await this.connection();
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'endpoint did not start; will retry on the next call');
    }
  }

  tools(): readonly Record<string, unknown>[] | undefined {
    return this.#tools;
  }

  toolStatus(tool: string): ToolStatus {
    if (this.#tools === undefined) return 'unlisted';
    return this.#toolNames.has(tool) ? 'known' : 'unknown';
  }

  /**
   * Connects for the tool list unless the last such attempt failed less than the back-off ago
   * ({@link TOOLS_BACKOFF_MS}, doubled after each failure up to {@link TOOLS_BACKOFF_MAX_MS}, reset
   * on success): a `list_tools` from any peer does not re-spawn a down stdio upstream each time.
   */
  async ensureTools(): Promise<void> {
    if (this.#tools !== undefined) return;
    if (Date.now() < this.#toolsRetryAt) return;
    try {
      await this.connection();
      this.#toolsBackoffMs = TOOLS_BACKOFF_MS;
      this.#lastFailure = undefined;
    } catch (e) {
      // unreachable now: the list stays unknown, and is not asked again before the back-off
      const tail = this.failureDetail();
      this.#lastFailure = `${(e as Error).message}${tail ? `; stderr: ${tail}` : ''}`;
      this.#toolsRetryAt = Date.now() + this.#toolsBackoffMs;
      this.#toolsBackoffMs = Math.min(this.#toolsBackoffMs * 2, TOOLS_BACKOFF_MAX_MS);
    }
  }

  #lastFailure: string | undefined;

  lastFailure(): string | undefined {
    return this.#tools === undefined ? this.#lastFailure : undefined;
  }

  /** What the upstream said on its way down (a stdio server's stderr tail); '' when nothing. */
  protected failureDetail(): string {
    return '';
  }

  /** When {@link ensureTools} may connect again after a failure (ms since the epoch), and the next back-off. */
  #toolsRetryAt = 0;
  #toolsBackoffMs = TOOLS_BACKOFF_MS;

  /** The live connection, made on first use; one in flight at a time. */
  protected connection(): Promise<Live> {
    if (this.#conn) return this.#conn;
    const conn: Promise<Live> = this.#open(() => this.#conn === conn);
    this.#conn = conn;
    conn.catch(() => {
      if (this.#conn === conn) this.#conn = undefined;
    });
    return conn;
  }

  async #open(current: () => boolean): Promise<Live> {
    // Loaded on first use: a node without endpoints never pays for the MCP SDK.
    const [{ Client }, { ToolListChangedNotificationSchema }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/types.js'),
    ]);
    const transport = await this.openTransport();
    const client = new Client({ name: 'jcp-node', version: '0.1.0' });
    // Set before connect: the SDK's own handler runs after ours, for every message.
    transport.onmessage = (m) => this.#tap(m as unknown as Msg);
    const send = transport.send.bind(transport);
    transport.send = (m, o) => send(this.#outgoing(m as unknown as Msg) as unknown as JSONRPCMessage, o);
    const lost = new AbortController();
    transport.onclose = () => {
      if (current()) {
        this.#conn = undefined;
        this.#live = undefined;
      }
      lost.abort(new EndpointError(EndpointErrorCodes.UNAVAILABLE, `${this.name}: the connection closed`));
      this.log.info('endpoint connection closed');
    };
    // Streamable HTTP: a server that died mid-call may leave the call's stream open-ended; the
    // transport's failed reconnects (its GET stream, or a resumable POST stream) say it is gone.
    transport.onerror = (e) => {
      if (!/Maximum reconnection attempts|Failed to reconnect/.test(e.message) || lost.signal.aborted) return;
      this.log.warn({ err: e.message }, 'endpoint unreachable; calls in flight fail, the next call reconnects');
      if (current()) {
        this.#conn = undefined;
        this.#live = undefined;
      }
      lost.abort(new EndpointError(EndpointErrorCodes.UNAVAILABLE, `${this.name}: the server went away: ${e.message}`));
      void client.close().catch(() => undefined);
    };
    try {
      await withTimeout(client.connect(transport), Math.max(this.#timeoutMs, START_TIMEOUT_MS), 'connect');
    } catch (e) {
      void client.close().catch(() => undefined);
      throw e;
    }
    const live: Live = { client, transport, lost };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      void this.#listTools(live).catch((e: Error) => this.log.warn({ err: e.message }, 'tools/list after list_changed failed'));
    });
    try {
      await withTimeout(this.#listTools(live), Math.max(this.#timeoutMs, START_TIMEOUT_MS), 'tools/list');
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        'tools/list failed; tool names are not checked until a list succeeds (next connection, or list_changed)',
      );
    }
    this.log.info({ tools: this.#tools?.length ?? null }, 'endpoint connected');
    if (current()) this.#live = live;
    return live;
  }

  /** Reads every page of `tools/list` and makes it the known list (the raw `Tool` objects). */
  async #listTools(live: Live): Promise<void> {
    const { ListToolsResultSchema } = await sdkTypes();
    const all: Record<string, unknown>[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const raw = (await this.#request(
        live,
        'tools/list',
        cursor === undefined ? {} : { cursor },
        ListToolsResultSchema,
        this.#timeoutMs,
        undefined,
      )) as { tools?: unknown; nextCursor?: unknown };
      if (Array.isArray(raw.tools)) all.push(...(raw.tools as Record<string, unknown>[]));
      if (typeof raw.nextCursor !== 'string' || raw.nextCursor === '') break;
      cursor = raw.nextCursor;
    }
    this.#tools = all;
    this.#toolNames = new Set(all.map((t) => t['name']).filter((n): n is string => typeof n === 'string'));
  }

  /**
   * Sends one request of ours, marked so that {@link #outgoing} learns its JSON-RPC id (and
   * progress token) and {@link #tap} keeps its raw result; resolves to that raw result.
   */
  async #request(
    live: Live,
    method: 'tools/list' | 'tools/call',
    params: Record<string, unknown>,
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's schema type is generic over zod versions
    schema: any,
    timeoutMs: number,
    emit: ((n: McpNotificationMessage) => void) | undefined,
  ): Promise<unknown> {
    const key = `${++this.#seq}`;
    const slot: Slot = { emit };
    this.#slots.set(key, slot);
    // One signal per call, aborted when the connection is lost: the SDK adds an `abort` listener
    // to the signal of every request and never removes it, so the connection's own long-lived
    // signal would collect one per call (MaxListenersExceededWarning, and a slower add each time).
    const call = new AbortController();
    const onLost = () => call.abort(live.lost.signal.reason);
    if (live.lost.signal.aborted) onLost();
    else live.lost.signal.addEventListener('abort', onLost, { once: true });
    try {
      const parsed = await withTimeout(
        live.client.request({ method, params: { ...params, _meta: { [MARK]: key } } } as never, schema, {
          timeout: timeoutMs + 1000,
          signal: call.signal,
          ...(emit !== undefined ? { onprogress: () => undefined } : {}),
        }),
        timeoutMs,
        method === 'tools/call' ? String(params['name']) : method,
      );
      return slot.raw ?? parsed;
    } catch (e) {
      // The SDK reports an aborted request as a RequestTimeout McpError: say what happened.
      if (live.lost.signal.aborted && live.lost.signal.reason instanceof EndpointError) throw live.lost.signal.reason;
      // The server's own JSON-RPC error (even -32000, which the SDK also uses for a closed
      // connection): it answered, so the call happened and is charged (endpoint-failed).
      if (slot.answeredError === true && !(e instanceof EndpointError) && !(e instanceof TimeoutError)) {
        throw new EndpointError(EndpointErrorCodes.FAILED, (e as Error)?.message ?? String(e), { cause: e });
      }
      throw e;
    } finally {
      live.lost.signal.removeEventListener('abort', onLost);
      this.#slots.delete(key);
      for (const [k, s] of this.#byId) if (s === slot) this.#byId.delete(k);
      for (const [k, s] of this.#byToken) if (s === slot) this.#byToken.delete(k);
    }
  }

  /** A message on its way to the server: our marked requests are noted and the mark removed. */
  #outgoing(m: Msg): Msg {
    const params = m['params'] as Msg | undefined;
    const meta = params?.['_meta'] as Msg | undefined;
    const key = meta?.[MARK];
    if (typeof key !== 'string' || m['id'] === undefined) return m;
    const slot = this.#slots.get(key);
    const { [MARK]: _mark, ...rest } = meta!;
    if (slot !== undefined) {
      this.#byId.set(m['id'] as string | number, slot);
      const token = rest['progressToken'];
      if (slot.emit !== undefined && (typeof token === 'string' || typeof token === 'number')) this.#byToken.set(token, slot);
    }
    const { _meta: _old, ...p } = params!;
    return { ...m, params: Object.keys(rest).length > 0 ? { ...p, _meta: rest } : p };
  }

  /** A message from the server, seen before the SDK handles it. */
  #tap(m: Msg): void {
    const id = m['id'];
    if (id !== undefined && ('result' in m || 'error' in m)) {
      const slot = this.#byId.get(id as string | number);
      if (slot !== undefined && 'result' in m) slot.raw = m['result'];
      else if (slot !== undefined) slot.answeredError = true;
      return;
    }
    if (id !== undefined || typeof m['method'] !== 'string') return;
    const n = m as McpNotificationMessage;
    if (n.method === 'notifications/progress') {
      const token = n.params?.['progressToken'];
      const slot = typeof token === 'string' || typeof token === 'number' ? this.#byToken.get(token) : undefined;
      slot?.emit?.(n);
    } else if (n.method === 'notifications/message' && this.#calls === 1) {
      // Logging is not tied to a request: it is forwarded only when one call is in flight.
      for (const s of this.#byToken.values()) s.emit?.(n);
    }
  }

  /** The connection, with a few attempts when the server is not reachable. @throws EndpointError `endpoint-unavailable` */
  async #reach(): Promise<Live> {
    let delay = CONNECT_BACKOFF_MS;
    let last: unknown;
    for (let i = 0; i < CONNECT_ATTEMPTS; i++) {
      try {
        return await this.connection();
      } catch (e) {
        last = e;
        if (e instanceof TimeoutError) break; // a server that hangs on connect is not retried in this call
        if (i + 1 < CONNECT_ATTEMPTS) await new Promise((r) => setTimeout(r, delay));
        delay *= 2;
      }
    }
    throw new EndpointError(EndpointErrorCodes.UNAVAILABLE, `cannot reach ${this.name}: ${(last as Error)?.message ?? String(last)}`, {
      cause: last,
      phase: 'start',
    });
  }

  async invoke(tool: string, args: Record<string, unknown>, opts: InvokeOptions = {}): Promise<Uint8Array> {
    const { CallToolResultSchema } = await sdkTypes();
    this.#calls++;
    try {
      for (let attempt = 0; ; attempt++) {
        const c = await this.#reach();
        try {
          const r = await this.#request(
            c,
            'tools/call',
            { name: tool, arguments: args },
            CallToolResultSchema,
            this.#timeoutMs,
            opts.onNotification,
          );
          return enc.encode(JSON.stringify(r));
        } catch (e) {
          const code = classify(e);
          if (code === EndpointErrorCodes.FAILED)
            throw new EndpointError(code, `${this.name}: ${tool}: ${(e as Error).message}`, { cause: e });
          this.#drop(c);
          if (code === EndpointErrorCodes.TIMEOUT) {
            this.log.warn({ tool, timeoutMs: this.#timeoutMs }, 'endpoint call timed out; recycling the connection');
            throw new EndpointError(code, `${this.name}: tool ${tool} gave no answer within ${this.#timeoutMs} ms`, { cause: e });
          }
          // A server that no longer knows our session (it restarted) never ran this call: one retry.
          if (attempt === 0 && sessionLost(e)) continue;
          throw new EndpointError(code, `${this.name}: the server went away during ${tool}: ${(e as Error).message}`, {
            cause: e,
            phase: 'call',
          });
        }
      }
    } finally {
      this.#calls--;
    }
  }

  /** Forgets a connection after a failure (the next call reconnects) and frees it. */
  #drop(c: Live): void {
    if (this.#live === c) {
      this.#conn = undefined;
      this.#live = undefined;
    }
    this.dispose(c);
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

/** The endpoint code of a failed request: the server's own error, a timeout, or a lost transport. */
function classify(e: unknown): EndpointErrorCode {
  if (e instanceof TimeoutError) return EndpointErrorCodes.TIMEOUT;
  if (e instanceof EndpointError) return e.code;
  // The server answered, but not with a CallToolResult: its failure, the connection is fine.
  const name = (e as Error)?.name;
  if (name === 'ZodError' || name === '$ZodError') return EndpointErrorCodes.FAILED;
  const code = (e as { code?: unknown })?.code;
  if ((e as Error)?.name === 'McpError' && typeof code === 'number') {
    if (code === -32001) return EndpointErrorCodes.TIMEOUT; // RequestTimeout
    if (code === -32000) return EndpointErrorCodes.UNAVAILABLE; // ConnectionClosed
    return EndpointErrorCodes.FAILED;
  }
  return EndpointErrorCodes.UNAVAILABLE;
}

/**
 * True when a Streamable HTTP server refused the POST for its session: 404 (MCP 2025-06-18
 * §Session Management: the session is unknown, e.g. the server restarted) or 400 (what some
 * servers, server-everything among them, answer for an unknown session id). Either way the
 * request was refused at the HTTP level, so no tool ran and a new session may send it again.
 */
function sessionLost(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return (e as object)?.constructor?.name === 'StreamableHTTPError' && (code === 404 || code === 400);
}

/** Locale variables a stdio upstream inherits beside the SDK's default list. */
const INHERITED_LOCALE_VARS = ['LANG', 'LC_ALL', 'LC_CTYPE', 'TZ'] as const;

/**
 * The environment of a stdio upstream: the SDK's minimal inherited set (`getDefaultEnvironment()`:
 * HOME, LOGNAME, PATH, SHELL, TERM, USER on POSIX), the locale (LANG, LC_ALL, LC_CTYPE, TZ), and
 * the resource's own configured `env`, which wins. Nothing else of the node's environment (the
 * bearer tokens of other upstreams, cloud credentials…) reaches a third-party server.
 */
export function stdioEnvironment(defaults: Record<string, string>, configured: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = { ...defaults };
  for (const k of INHERITED_LOCALE_VARS) {
    const v = process.env[k];
    if (v !== undefined && v !== '') env[k] = v;
  }
  return { ...env, ...configured };
}

/** An MCP server over stdio (a child process), started on demand and restarted after a crash or hang. */
export class McpStdioEndpoint extends McpEndpoint {
  readonly #cfg: McpStdioEndpointConfig;

  constructor(name: string, cfg: McpStdioEndpointConfig, log: Logger) {
    super(name, cfg.timeoutMs, log);
    this.#cfg = cfg;
  }

  /** The server's process id while it runs (for tests and operators). */
  async pid(): Promise<number | null> {
    try {
      return ((await this.connection()).transport as StdioClientTransport).pid;
    } catch {
      return null;
    }
  }

  protected async openTransport(): Promise<Transport> {
    const { StdioClientTransport, getDefaultEnvironment } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const transport = new StdioClientTransport({
      command: this.#cfg.command,
      args: [...this.#cfg.args],
      env: stdioEnvironment(getDefaultEnvironment(), this.#cfg.env),
      ...(this.#cfg.cwd !== undefined ? { cwd: this.#cfg.cwd } : {}),
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (d: Buffer) => {
      const text = d.toString('utf8');
      this.#stderrTail = (this.#stderrTail + text).slice(-STDERR_TAIL_CHARS);
      this.log.debug({ stderr: text.trimEnd() }, 'endpoint stderr');
    });
    this.#stderrTail = '';
    return transport;
  }

  /** The last {@link STDERR_TAIL_CHARS} characters the server wrote on stderr (its last run). */
  #stderrTail = '';

  protected override failureDetail(): string {
    return this.#stderrTail.trim().replace(/\s+/g, ' ');
  }

  protected dispose(live: Live): void {
    const pid = (live.transport as StdioClientTransport).pid;
    if (pid === null) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/**
 * The value of a configured header: read from its environment variable or file at each connect
 * (so a rotated token is picked up by the next connection), with its `prefix`.
 * @throws EndpointError `endpoint-unavailable` when the variable is unset, the file unreadable,
 *   empty or readable by group or others (as key files are refused, node/keyfile.ts), or the value is not an HTTP header value (the message names its source, never the value).
 */
export function headerValue(name: string, src: HeaderSource): string {
  let v: string | undefined;
  if ('env' in src) {
    v = process.env[src.env];
    if (v === undefined || v === '') {
      throw new EndpointError(EndpointErrorCodes.UNAVAILABLE, `header ${name}: environment variable ${src.env} is not set`, {
        phase: 'start',
      });
    }
  } else {
    try {
      v = readSecretFile(src.file);
    } catch (e) {
      throw new EndpointError(EndpointErrorCodes.UNAVAILABLE, `header ${name}: cannot read ${src.file}: ${(e as Error).message}`, {
        cause: e,
        phase: 'start',
      });
    }
  }
  const value = `${src.prefix ?? ''}${v}`;
  // An HTTP field value (RFC 9110 §5.5): visible Latin-1 text, spaces and tabs. Anything else
  // would be refused by fetch with the value quoted in its message, and that message becomes the
  // caller's result: the secret is never quoted, only where it came from.
  const bad = value.search(/[^\t\x20-\x7e\x80-\xff]/);
  if (bad >= 0) {
    const from = 'env' in src ? `environment variable ${src.env}` : src.file;
    throw new EndpointError(
      EndpointErrorCodes.UNAVAILABLE,
      `header ${name}: the value read from ${from} is not a valid HTTP header value (a control character or a character past U+00FF at index ${bad}); not sent`,
      { phase: 'start' },
    );
  }
  return value;
}

/** An MCP server over Streamable HTTP (MCP 2025-06-18), its headers read from env or files. */
export class McpHttpEndpoint extends McpEndpoint {
  readonly #cfg: McpHttpEndpointConfig;

  constructor(name: string, cfg: McpHttpEndpointConfig, log: Logger) {
    super(name, cfg.timeoutMs, log);
    this.#cfg = cfg;
  }

  protected async openTransport(): Promise<Transport> {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const headers: Record<string, string> = {};
    for (const [k, src] of Object.entries(this.#cfg.headers)) headers[k] = headerValue(k, src);
    return new StreamableHTTPClientTransport(new URL(this.#cfg.url), {
      requestInit: { headers },
      reconnectionOptions: { maxRetries: 2, initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 2 },
    });
  }

  protected dispose(): void {
    // closing the client aborts the transport's requests and streams
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
