/**
 * Endpoints: the real tools a node stands in front of. A resource maps to an MCP server the node
 * reaches with the SDK's v2 client (`@modelcontextprotocol/client`): a child process over stdio
 * ({@link McpStdioEndpoint}) or a remote server over Streamable HTTP ({@link McpHttpEndpoint}).
 * The client negotiates per server and per connection (its `auto` mode): the 2026-07-28 revision
 * where the server answers `server/discover` (stateless: no handshake, no session, per-request
 * `_meta`), else the 2025 `initialize` handshake ({@link Endpoint.protocol} says which). The frame's action is the
 * tool name; the request's payload holds the tool's arguments (a JSON object, UTF-8). The tool is
 * invoked only on allow, and what it returns goes back to the caller as data (§6: never as
 * control): the UTF-8 JSON of the upstream's `CallToolResult`, exactly as it sent it (content,
 * structuredContent, isError, _meta).
 *
 * The node knows each upstream's tools (`tools/list`, every page, fetched on connect; in the 2025
 * era again on `notifications/tools/list_changed`; in the 2026-07-28 era again once the list's
 * `ttlMs` has run out), so the enforcer can refuse an unknown tool before any debit. Each call
 * tells the upstream who made it: the caller's did:key, the grant id and the receipt id in the
 * request's `_meta` ({@link CALLER_META_KEY}, {@link GRANT_META_KEY}, {@link RECEIPT_META_KEY}).
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
 * since a server that hangs once may be wedged for everyone. A stdio server lost before its tool
 * list was read (it exited, hung, or sent a message past the read cap) is not started again
 * before a back-off ({@link RESPAWN_BACKOFF_MS}), and each loss is logged with its reason,
 * rate-limited ({@link RESPAWN_LOG_EVERY_MS}); so is one lost after its list was read when such
 * losses repeat ({@link LOST_AFTER_LIST_COUNT} within {@link LOST_AFTER_LIST_WINDOW_MS}). A
 * stdio server's result past the read cap ({@link STDIO_READ_CAP_BYTES}) fails that call only
 * (`endpoint-failed`; node/stdioreader.ts) once its tool list was read. A stdio server starts
 * once per connection: the `server/discover` probe runs on the connection's own process.
 */
import type { Client, JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import type { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import type { Logger } from 'pino';
import { bindCloseOnExec, markCloseOnExec } from '../io/index.ts';
import { readSecretFile } from './keyfile.ts';
import type { HeaderSource, McpHttpEndpointConfig, McpStdioEndpointConfig } from './config.ts';
import { type OversizedLine, StdioReader } from './stdioreader.ts';

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
  /**
   * The tool asked for input (an MCP `input_required` result) and the node could not keep the call
   * waiting for its continuation: the caller's or the node's pending calls at their bound
   * (`abuse.input_pending_per_caller`, `abuse.input_pending_total`), or an upstream `requestState`
   * above the node's bound. Charged (the tool ran a round); docs/node.md "Multi round-trip calls".
   */
  INPUT_LIMIT: 'input-limit',
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

/**
 * `e`'s message followed by its causes' (up to 4 levels down, e.g. `fetch failed` and then
 * `connect ECONNREFUSED 127.0.0.1:9`), each once: what {@link Endpoint.lastFailure} says.
 */
export function messageWithCauses(e: unknown): string {
  const parts: string[] = [];
  let x: unknown = e;
  for (let i = 0; i < 5 && x !== null && typeof x === 'object'; i++) {
    const o = x as { message?: unknown; code?: unknown; cause?: unknown };
    const m = typeof o.message === 'string' && o.message !== '' ? o.message : typeof o.code === 'string' ? o.code : undefined;
    if (m !== undefined && !parts.some((p) => p.includes(m))) parts.push(m);
    x = o.cause;
  }
  return parts.length > 0 ? parts.join(': ') : String(e);
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
   * Who asks, set by the enforcer for every allowed call: the caller's did:key (verified by its
   * signature), the frame's leaf grant id and resource, the peer address, and the allow receipt's id.
   * MCP endpoints send `did`, `grantId` and `receipt` to the upstream in the request's `_meta`
   * (never in the arguments): {@link CALLER_META_KEY}, {@link GRANT_META_KEY}, {@link RECEIPT_META_KEY}.
   * A2A endpoints (node/a2a.ts) send `did` as `jcp/caller` in the message metadata, bind a task
   * started to `did` + `grantId` + `resource`, and bound streams per `did` and per `peer`.
   */
  readonly caller?: {
    readonly did: string;
    readonly grantId: string;
    readonly resource: string;
    readonly peer: string;
    readonly receipt?: string;
  };
  /**
   * MCP multi round-trip material for this call (MCP 2026-07-28, SEP-2322; docs/node.md
   * "Multi round-trip calls"), used on a 2026-07-28 connection only: `capabilities` (the MCP
   * client's declared `sampling` / `elicitation` / `roots`) go in the request's envelope as the
   * client capabilities; on a continuation, `responses` (the client's `inputResponses`) and
   * `state` (the upstream's own `requestState`, byte for byte) go in the retry's params, on a
   * fresh request id. A continuation on a 2025-era connection throws `endpoint-failed`.
   */
  readonly input?: McpInput;
}

/** The MCP client's multi round-trip material for one upstream call ({@link InvokeOptions.input}). */
export interface McpInput {
  /** The client capabilities to declare for this call (only `sampling`, `elicitation`, `roots` are kept by the node). */
  readonly capabilities?: Record<string, unknown>;
  /** The client's `inputResponses` (keyed as the upstream's `inputRequests`). */
  readonly responses?: Record<string, unknown>;
  /** The upstream's `requestState`, echoed exactly as it sent it. */
  readonly state?: string;
}

/** The `_meta` key of the 2026-07-28 request envelope that carries the client's capabilities. */
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** The `_meta` key of a tool call that carries the calling agent's did:key (set by the node, verified by its signature). */
export const CALLER_META_KEY = 'jcp/caller';
/** The `_meta` key of a tool call that carries the id of the grant the call was decided on (64 hex). */
export const GRANT_META_KEY = 'jcp/grant';
/** The `_meta` key of a tool call that carries the id of the node's allow receipt for it (64 hex). */
export const RECEIPT_META_KEY = 'jcp/receipt';

/** Which MCP era an upstream speaks on its current connection: `modern` (2026-07-28, `server/discover`) or `legacy` (2025, `initialize`). */
export type McpEra = 'modern' | 'legacy';

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
  /** Whether `tool` is in the last known list ({@link ToolStatus}), stale or not. Synchronous. */
  toolStatus(tool: string): ToolStatus;
  /**
   * True when the known list is past its lifetime (a 2026-07-28 list whose `ttlMs` ran out, or
   * sent without one): the enforcer then calls {@link ensureTools} before {@link toolStatus}.
   */
  toolsStale?(): boolean;
  /**
   * Connects (once) if no list is known yet, or reads the list again if it is stale (its
   * `ttlMs` ran out, 2026-07-28 era), so {@link tools} has a current one; never rejects.
   */
  ensureTools(): Promise<void>;
  /**
   * The era and protocol version of the last connection (`{era, version}`, e.g. `modern`,
   * `2026-07-28`), or undefined before any connection succeeded.
   */
  protocol?(): { readonly era: McpEra; readonly version: string } | undefined;
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

/** How long a server may take to start and answer `server/discover`, and again `initialize` after a probe with no answer (at least; more if `timeout_ms` is larger). */
const START_TIMEOUT_MS = 15_000;
/** Connect attempts per call, and the delay before the second (doubled after each failure). */
const CONNECT_ATTEMPTS = 3;
const CONNECT_BACKOFF_MS = 50;
/** After a failed connect for the tool list, no new one for this long (ms), doubled per failure. */
export const TOOLS_BACKOFF_MS = 1_000;
/** The longest back-off between connects for the tool list (ms). */
export const TOOLS_BACKOFF_MAX_MS = 60_000;
/**
 * After a stdio upstream was started and lost before its tool list was read (it exited, hung past
 * the start budget, or sent a message past the read cap), no new start for this long (ms),
 * doubled per such loss up to {@link RESPAWN_BACKOFF_MAX_MS}, reset once a list is read (unless
 * losses after the list are being backed off: {@link LOST_AFTER_LIST_COUNT}).
 */
export const RESPAWN_BACKOFF_MS = 1_000;
/** The longest back-off between starts of a stdio upstream that keeps failing (ms). */
export const RESPAWN_BACKOFF_MAX_MS = 60_000;
/** At most one "lost before its tool list" warning per upstream per this long (ms); the others are counted in the next. */
export const RESPAWN_LOG_EVERY_MS = 10_000;
/**
 * The largest message read from a stdio upstream (bytes, one line; the SDK's default, set
 * explicitly so the log can name it). A response past it, once the upstream's tool list was read,
 * fails its own call as the server's error (`endpoint-failed`, charged: the tool ran) and the
 * connection stays up (node/stdioreader.ts); any other message past it ends the connection.
 */
export const STDIO_READ_CAP_BYTES = 10 * 1024 * 1024;
/**
 * A stdio upstream lost after its tool list was read (it exited, or sent a message that could not
 * be read) this many times within {@link LOST_AFTER_LIST_WINDOW_MS} gets the respawn back-off
 * ({@link RESPAWN_BACKOFF_MS}, doubling) from that loss on, as one lost before its list: a tool
 * input that crashes the server cannot make the node start processes at will.
 */
export const LOST_AFTER_LIST_COUNT = 3;
/** The window of {@link LOST_AFTER_LIST_COUNT} (ms). */
export const LOST_AFTER_LIST_WINDOW_MS = 10_000;
/**
 * A stdio upstream that stayed up this long after its tool list was read (ms) is lost afresh:
 * its back-off goes back to {@link RESPAWN_BACKOFF_MS} and its losses after the list are counted
 * from zero. Until then each loss after the list, once backed off, is backed off again (doubled).
 */
export const RESPAWN_STABLE_MS = 60_000;

/** Back-off knobs of a stdio endpoint (tests; the node uses the defaults). Milliseconds. */
export interface RespawnOptions {
  /** First back-off after a failed start ({@link RESPAWN_BACKOFF_MS}); 0: none. */
  readonly respawnBackoffMs?: number;
  /** Rate limit of the failed-start warning and of the oversized-result warning ({@link RESPAWN_LOG_EVERY_MS}). */
  readonly respawnLogEveryMs?: number;
  /** The window of repeated losses after the tool list ({@link LOST_AFTER_LIST_WINDOW_MS}). */
  readonly lostAfterListWindowMs?: number;
  /** How long an upstream must stay up for its back-off to reset ({@link RESPAWN_STABLE_MS}). */
  readonly respawnStableMs?: number;
}

/** Pages of `tools/list` read at most (a server that pages forever is cut off there). */
const MAX_TOOL_PAGES = 100;
/** The `_meta` key that marks the node's own requests on their way out (stripped before sending). */
const MARK = 'jcp.node/call';

/** One start of the upstream: whether its tool list was read, and whether its end was already counted (or was ours). */
interface Attempt {
  /** Set once connected: a close before it is counted by the failed connect instead. */
  connected: boolean;
  listed: boolean;
  /** When its tool list was first read (ms since the epoch). */
  listedAt?: number;
  counted: boolean;
  /** Why the transport gave up on the server (the read cap), when it said so. */
  reason?: { readonly text: string; readonly detail: Record<string, unknown> };
}

interface Live {
  readonly attempt: Attempt;
  readonly client: Client;
  readonly transport: Transport;
  /** Aborted (with an `endpoint-unavailable` EndpointError) once the transport gives up on the server. */
  readonly lost: AbortController;
  /** The connection's era (`modern`: 2026-07-28 via `server/discover`; `legacy`: the 2025 handshake). */
  readonly era: McpEra;
}

/** A request of ours in flight: its raw JSON-RPC result, and who gets its notifications. */
interface Slot {
  raw?: unknown;
  /** Every raw result of this slot's requests, in order (the pages of a `tools/list` walk). */
  pages?: unknown[];
  /** Set when the server answered this request with a JSON-RPC error (its answer, not a lost connection). */
  answeredError?: boolean;
  readonly emit: ((n: McpNotificationMessage) => void) | undefined;
}

type Msg = Record<string, unknown>;

/** The longest a 2026-07-28 tool list is trusted without reading it again, whatever `ttlMs` says (24 h, as the SDK caps it). */
const MAX_LIST_TTL_MS = 86_400_000;

/** The MCP client side shared by both transports: connect, tool list, calls, notifications. */
abstract class McpEndpoint implements Endpoint {
  readonly name: string;
  protected readonly log: Logger;
  readonly #timeoutMs: number;
  #conn: Promise<Live> | undefined;
  #live: Live | undefined;
  #tools: readonly Record<string, unknown>[] | undefined;
  #toolNames: ReadonlySet<string> = new Set();
  /** When the known list goes stale (ms since the epoch; 2026-07-28 `ttlMs`), or undefined: fresh until list_changed. */
  #toolsStaleAt: number | undefined;
  /** The list's `cacheScope` as the server sent it (2026-07-28), for logs and tests. */
  #toolsScope: string | undefined;
  /** A re-read of a stale list in flight (one at a time). */
  #relist: Promise<void> | undefined;
  #protocol: { era: McpEra; version: string } | undefined;
  #seq = 0;
  #calls = 0;
  readonly #slots = new Map<string, Slot>();
  readonly #byId = new Map<string | number, Slot>();
  readonly #byToken = new Map<string | number, Slot>();

  /**
   * The respawn back-off ({@link RESPAWN_BACKOFF_MS}): when the next start may happen, the next
   * wait, the last reason, the warning's rate limit; the recent losses after a tool list was read
   * (ms since the epoch) and whether they are being backed off (`streak`).
   */
  readonly #respawn: {
    at: number;
    waitMs: number;
    failures: number;
    reason: string;
    loggedAt: number;
    suppressed: number;
    recent: number[];
    streak: boolean;
    readonly baseMs: number;
    readonly logEveryMs: number;
    readonly windowMs: number;
    readonly stableMs: number;
  };

  protected constructor(name: string, timeoutMs: number, log: Logger, opts: RespawnOptions = {}) {
    this.name = name;
    this.#timeoutMs = timeoutMs;
    this.log = log.child({ endpoint: name });
    const baseMs = opts.respawnBackoffMs ?? RESPAWN_BACKOFF_MS;
    this.#respawn = {
      at: 0,
      waitMs: baseMs,
      failures: 0,
      reason: '',
      loggedAt: -Infinity,
      suppressed: 0,
      recent: [],
      streak: false,
      baseMs,
      logEveryMs: opts.respawnLogEveryMs ?? RESPAWN_LOG_EVERY_MS,
      windowMs: opts.lostAfterListWindowMs ?? LOST_AFTER_LIST_WINDOW_MS,
      stableMs: opts.respawnStableMs ?? RESPAWN_STABLE_MS,
    };
  }

  /** Whether failed starts are backed off (a stdio upstream: each start is a process). */
  protected respawnGated(): boolean {
    return false;
  }

  /**
   * Counts a lost start (once per start; not one we closed). Lost before its tool list was read:
   * backs the next start off. Lost after: noted, and backed off once {@link LOST_AFTER_LIST_COUNT}
   * such losses fell within {@link LOST_AFTER_LIST_WINDOW_MS}, and at each one after that until
   * the upstream stays up {@link RESPAWN_STABLE_MS} (which resets the back-off).
   */
  #lostStart(attempt: Attempt, reason: string, detail: Record<string, unknown> = {}): void {
    if (attempt.counted || !this.respawnGated()) return;
    attempt.counted = true;
    const r = this.#respawn;
    const now = Date.now();
    if (attempt.listedAt === undefined) {
      this.#backOff(now, reason, detail, 'upstream lost before its tool list was read; its next start is backed off');
      return;
    }
    if (now - attempt.listedAt >= r.stableMs) Object.assign(r, { failures: 0, waitMs: r.baseMs, recent: [], streak: false });
    r.recent = r.recent.filter((t) => now - t < r.windowMs);
    r.recent.push(now);
    if (!r.streak && r.recent.length < LOST_AFTER_LIST_COUNT) return;
    r.streak = true;
    this.#backOff(
      now,
      reason,
      { ...detail, lost_within_window: r.recent.length, window_ms: r.windowMs },
      'upstream lost repeatedly after its tool list was read; its next start is backed off',
    );
  }

  /**
   * Backs the next start off (the current wait, then doubled up to {@link RESPAWN_BACKOFF_MAX_MS})
   * and logs `msg` with the reason, at most once per {@link RESPAWN_LOG_EVERY_MS} (the warnings
   * left out are counted in the next one, `suppressed`).
   */
  #backOff(now: number, reason: string, detail: Record<string, unknown>, msg: string): void {
    const r = this.#respawn;
    r.failures++;
    r.reason = reason;
    r.at = now + r.waitMs;
    const wait = r.waitMs;
    r.waitMs = Math.min(Math.max(r.waitMs * 2, r.baseMs), RESPAWN_BACKOFF_MAX_MS);
    if (now - r.loggedAt < r.logEveryMs) {
      r.suppressed++;
      return;
    }
    const stderr = this.failureDetail();
    this.log.warn(
      { reason, ...detail, failures: r.failures, respawn_in_ms: wait, suppressed: r.suppressed, ...(stderr ? { stderr } : {}) },
      msg,
    );
    r.loggedAt = now;
    r.suppressed = 0;
  }

  /** Why no start is allowed now (an error naming the last loss), or undefined. */
  #respawnGate(): EndpointError | undefined {
    const r = this.#respawn;
    const left = r.at - Date.now();
    if (left <= 0) return undefined;
    return new EndpointUnavailable(`${r.reason}; not started again for ${left} ms (back-off after ${r.failures} lost start(s))`, 'start');
  }

  /** A new, unstarted transport to the server. */
  protected abstract openTransport(): Promise<Transport>;
  /** Told once a connection's tool list was read (a stdio transport's reader then spares oversized results). */
  protected listed(_transport: Transport): void {}
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

  toolsStale(): boolean {
    return this.#stale();
  }

  protocol(): { readonly era: McpEra; readonly version: string } | undefined {
    return this.#protocol;
  }

  /** The last list's `cacheScope` and the ms left before it is stale (undefined: until list_changed). */
  listFreshness(): { scope: string | undefined; staleInMs: number | undefined } {
    return { scope: this.#toolsScope, staleInMs: this.#toolsStaleAt === undefined ? undefined : this.#toolsStaleAt - Date.now() };
  }

  #stale(): boolean {
    return this.#toolsStaleAt !== undefined && Date.now() >= this.#toolsStaleAt;
  }

  /**
   * Connects for the tool list unless the last such attempt failed less than the back-off ago
   * ({@link TOOLS_BACKOFF_MS}, doubled after each failure up to {@link TOOLS_BACKOFF_MAX_MS}, reset
   * on success): a `list_tools` from any peer does not re-spawn a down stdio upstream each time.
   * A stale 2026-07-28 list is read again on the live connection (one read at a time); if that
   * fails, the old list stands until the back-off ends.
   */
  async ensureTools(): Promise<void> {
    if (this.#tools !== undefined && !this.#stale()) return;
    if (Date.now() < this.#toolsRetryAt) return;
    try {
      if (this.#tools !== undefined && this.#live !== undefined) await this.#relistOnce(this.#live);
      else await this.connection();
      this.#toolsBackoffMs = TOOLS_BACKOFF_MS;
      this.#lastFailure = undefined;
    } catch (e) {
      // unreachable now: the list stays as it was, and is not asked again before the back-off
      const tail = this.failureDetail();
      this.#lastFailure = `${messageWithCauses(e)}${tail ? `; stderr: ${tail}` : ''}`;
      this.#toolsRetryAt = Date.now() + this.#toolsBackoffMs;
      if (this.#toolsStaleAt !== undefined) this.#toolsStaleAt = this.#toolsRetryAt;
      this.#toolsBackoffMs = Math.min(this.#toolsBackoffMs * 2, TOOLS_BACKOFF_MAX_MS);
    }
  }

  #relistOnce(live: Live): Promise<void> {
    this.#relist ??= withTimeout(this.#listTools(live), Math.max(this.#timeoutMs, START_TIMEOUT_MS), 'tools/list').finally(() => {
      this.#relist = undefined;
    });
    return this.#relist;
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
    const gated = this.#respawnGate();
    if (gated !== undefined) return Promise.reject(gated);
    const conn: Promise<Live> = this.#open(() => this.#conn === conn);
    this.#conn = conn;
    conn.catch(() => {
      if (this.#conn === conn) this.#conn = undefined;
    });
    return conn;
  }

  /** Drops the connection `live` if it is still the current one (the next call reconnects). */
  #forget(current: () => boolean): void {
    if (!current()) return;
    this.#conn = undefined;
    this.#live = undefined;
  }

  /**
   * Hooks a new transport: our requests marked and tapped, its close and (HTTP) give-up dropping
   * the connection, a stdio read past the cap remembered as the reason its start was lost.
   * Returns the signal aborted (with an `endpoint-unavailable` EndpointError) once it is gone.
   */
  #watch(transport: Transport, client: Client, current: () => boolean, attempt: Attempt): AbortController {
    // Set before connect: the SDK's own handler runs after ours, for every message.
    transport.onmessage = (m) => this.#tap(m as unknown as Msg);
    const send = transport.send.bind(transport);
    transport.send = (m, o) => send(this.#outgoing(m as unknown as Msg) as unknown as JSONRPCMessage, o);
    const lost = new AbortController();
    transport.onclose = () => {
      this.#forget(current);
      const why = attempt.reason?.text ?? 'the connection closed';
      lost.abort(new EndpointError(EndpointErrorCodes.UNAVAILABLE, `${this.name}: ${why}`));
      this.log.info({ reason: why }, 'endpoint connection closed');
      if (attempt.connected) this.#lostStart(attempt, why, attempt.reason?.detail);
    };
    transport.onerror = (e) => {
      // stdio: a message past the read buffer; the SDK closes the transport next (onclose above).
      const cap = /ReadBuffer exceeded maximum size of (\d+) bytes/.exec(e.message);
      if (cap !== null) {
        const capBytes = Number(cap[1]);
        attempt.reason ??= {
          text: `the server sent a message longer than the stdio read cap of ${capBytes} bytes`,
          detail: { cap: 'stdio-read-buffer', cap_bytes: capBytes },
        };
        return;
      }
      // Streamable HTTP: a server that died mid-call may leave the call's stream open-ended; the
      // transport's failed reconnects (its GET stream, or a resumable POST stream) say it is gone.
      if (!/Maximum reconnection attempts|Failed to reconnect/.test(e.message) || lost.signal.aborted) return;
      this.log.warn({ err: e.message }, 'endpoint unreachable; calls in flight fail, the next call reconnects');
      this.#forget(current);
      lost.abort(new EndpointError(EndpointErrorCodes.UNAVAILABLE, `${this.name}: the server went away: ${e.message}`));
      void client.close().catch(() => undefined);
    };
    return lost;
  }

  /**
   * The upstream's era as learnt from a connection whose `server/discover` probe ended it (a
   * 2025-only stdio server that exits on any request before `initialize`): later connections skip
   * the probe and run the 2025 handshake (`connect({prior: {kind: 'legacy'}})`) for the life of
   * this process. Undefined: probe each connection (in place, on the connection's own process).
   */
  #prior: { kind: 'legacy' } | undefined;

  async #open(current: () => boolean): Promise<Live> {
    for (let attempt = 0; ; attempt++) {
      const prior = this.#prior;
      try {
        return await this.#openOnce(current, prior);
      } catch (e) {
        // The in-place probe ended the server: it is a 2025-only server that exits before
        // `initialize`. Say so once and connect again with the handshake alone.
        if (attempt > 0 || prior !== undefined || !probeKilled(e)) throw e;
        this.#prior = { kind: 'legacy' };
        this.log.info(
          { err: (e as Error).message },
          'the server/discover probe ended the server: connecting with the 2025 handshake from now on',
        );
      }
    }
  }

  async #openOnce(current: () => boolean, prior: { kind: 'legacy' } | undefined): Promise<Live> {
    // Loaded on first use: a node without endpoints never pays for the MCP SDK.
    const { Client } = await import('@modelcontextprotocol/client');
    const transport = await this.openTransport();
    const startMs = Math.max(this.#timeoutMs, START_TIMEOUT_MS);
    const client = new Client(
      { name: 'jcp-node', version: '0.1.0' },
      {
        // server/discover first; the 2025 handshake for a server that does not answer it as a
        // 2026-07-28 server would. The whole start budget for the probe (a stdio server slow to
        // start is not taken for a 2025 one), and as much again for the handshake after it.
        versionNegotiation: { mode: 'auto', probe: { timeoutMs: startMs } },
        // No person behind the node: an input-required result is the server's answer, not a question for us.
        inputRequired: { autoFulfill: false },
        listMaxPages: MAX_TOOL_PAGES,
      },
    );
    const attempt: Attempt = { connected: false, listed: false, counted: false };
    const lost = this.#watch(transport, client, current, attempt);
    try {
      await withTimeout(client.connect(transport, prior !== undefined ? { prior } : undefined), 2 * startMs, 'connect');
      attempt.connected = true;
    } catch (e) {
      // A server the probe ended is started again at once with the handshake (#open): not a lost start.
      if (prior !== undefined || !probeKilled(e))
        this.#lostStart(attempt, attempt.reason?.text ?? (e as Error).message, attempt.reason?.detail ?? timeoutDetail(e, 2 * startMs));
      void client.close().catch(() => undefined);
      throw e;
    }
    const era: McpEra = client.getProtocolEra() === 'modern' ? 'modern' : 'legacy';
    const live: Live = { attempt, client, transport, lost, era };
    this.#protocol = { era, version: client.getNegotiatedProtocolVersion() ?? (era === 'modern' ? '2026-07-28' : 'unknown') };
    client.setNotificationHandler('notifications/tools/list_changed', () => {
      void this.#listTools(live).catch((e: Error) => this.log.warn({ err: e.message }, 'tools/list after list_changed failed'));
    });
    try {
      await withTimeout(this.#listTools(live), startMs, 'tools/list');
      attempt.listed = true;
      attempt.listedAt = Date.now();
      this.listed(transport);
      // Losses before the list are forgotten; repeated losses after it only once the upstream stays up.
      if (!this.#respawn.streak) Object.assign(this.#respawn, { at: 0, waitMs: this.#respawn.baseMs, failures: 0 });
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        'tools/list failed; tool names are not checked until a list succeeds (next connection, or list_changed)',
      );
      // The server went away while listing (the list past the read cap, a crash): this start is lost.
      if (lost.signal.aborted) throw lost.signal.reason;
    }
    this.log.info({ tools: this.#tools?.length ?? null, era, version: this.#protocol.version }, 'endpoint connected');
    if (current()) this.#live = live;
    return live;
  }

  /**
   * Reads every page of `tools/list` (the SDK's walk, at most {@link MAX_TOOL_PAGES}) and makes it
   * the known list (the raw `Tool` objects). On a
   * 2026-07-28 connection the first page's `ttlMs` says when the list goes stale (absent or 0:
   * at once, so it is read again before the next tool check; at most {@link MAX_LIST_TTL_MS});
   * `cacheScope` is kept for logs: the node lists as itself, one authorization context, so a
   * `private` list is never shown to another context than the one that read it.
   */
  async #listTools(live: Live): Promise<void> {
    const readAt = Date.now();
    const { parsed, pages } = await this.#request(live, 'tools/list', {}, this.#timeoutMs, undefined);
    // The SDK's aggregate (every page) is the list the client may use: on a 2026-07-28 HTTP
    // connection it leaves out tools whose x-mcp-header declarations are invalid (SEP-2243 MUST).
    // The node keeps each kept tool as the server sent it (the raw page objects).
    const kept = new Set(((parsed as { tools?: { name?: unknown }[] }).tools ?? []).map((t) => t.name));
    const all: Record<string, unknown>[] = [];
    for (const page of pages as { tools?: unknown }[]) {
      if (Array.isArray(page?.tools)) all.push(...(page.tools as Record<string, unknown>[]).filter((t) => kept.has(t['name'])));
    }
    const first = pages[0] as { ttlMs?: unknown; cacheScope?: unknown } | undefined;
    this.#tools = all;
    this.#toolNames = new Set(all.map((t) => t['name']).filter((n): n is string => typeof n === 'string'));
    if (live.era === 'modern') {
      const ttl = typeof first?.ttlMs === 'number' && Number.isFinite(first.ttlMs) && first.ttlMs > 0 ? first.ttlMs : 0;
      this.#toolsStaleAt = readAt + Math.min(ttl, MAX_LIST_TTL_MS);
      this.#toolsScope = typeof first?.cacheScope === 'string' ? first.cacheScope : undefined;
    } else {
      this.#toolsStaleAt = undefined;
      this.#toolsScope = undefined;
    }
  }

  /**
   * Sends one request of ours, marked so that {@link #outgoing} learns its JSON-RPC id (and
   * progress token) and {@link #tap} keeps its raw result; resolves to that raw result (`value`),
   * the SDK's parsed copy, and every raw page (`tools/list` is the SDK's walk over all pages,
   * each page request carrying the same mark).
   * `tools/call` goes through the client's `callTool` with the listed definition (so a 2026-07-28
   * HTTP call mirrors the tool's `x-mcp-header` arguments into `Mcp-Param-*` headers); the result
   * is not validated against the tool's `outputSchema` here: it goes back exactly as sent.
   */
  async #request(
    live: Live,
    method: 'tools/list' | 'tools/call',
    params: Record<string, unknown>,
    timeoutMs: number,
    emit: ((n: McpNotificationMessage) => void) | undefined,
    meta: Record<string, unknown> = {},
  ): Promise<{ value: unknown; parsed: unknown; pages: readonly unknown[] }> {
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
      const options = {
        timeout: timeoutMs + 1000,
        signal: call.signal,
        ...(emit !== undefined ? { onprogress: () => undefined } : {}),
        // An input_required result is the call's answer, handed back as it came (the caller's
        // MCP client answers it; docs/node.md "Multi round-trip calls").
        ...(method === 'tools/call' ? { allowInputRequired: true } : {}),
      };
      const marked = { ...params, _meta: { ...meta, [MARK]: key } };
      const sent: Promise<unknown> =
        method === 'tools/call'
          ? live.client.callTool(marked as never, { ...options, ...this.#definition(String(params['name'])) })
          : live.client.listTools(marked as never, { ...options, cacheMode: 'refresh' });
      const parsed = await withTimeout(sent, timeoutMs, method === 'tools/call' ? String(params['name']) : method);
      return { value: slot.raw ?? parsed, parsed, pages: slot.pages ?? [] };
    } catch (e) {
      // The SDK reports an aborted request as a timeout: say what happened.
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

  /** The listed definition of `tool` without its `outputSchema` (for header mirroring only), or nothing. */
  #definition(tool: string): { toolDefinition?: never } {
    const t = this.#tools?.find((x) => x['name'] === tool);
    if (t === undefined) return {};
    const { outputSchema: _out, ...rest } = t;
    return { toolDefinition: rest as never };
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
      if (slot !== undefined && 'result' in m) {
        slot.raw = m['result'];
        slot.pages ??= [];
        slot.pages.push(m['result']);
      } else if (slot !== undefined) slot.answeredError = true;
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
    this.#calls++;
    try {
      for (let attempt = 0; ; attempt++) {
        const c = await this.#reach();
        try {
          const input = opts.input;
          const resuming = input?.responses !== undefined || input?.state !== undefined;
          if (resuming && c.era !== 'modern') {
            throw new EndpointError(
              EndpointErrorCodes.FAILED,
              `${this.name}: ${tool}: the upstream no longer speaks 2026-07-28; the continuation cannot be sent`,
            );
          }
          const r = await this.#request(
            c,
            'tools/call',
            {
              name: tool,
              arguments: args,
              ...(input?.responses !== undefined ? { inputResponses: input.responses } : {}),
              ...(input?.state !== undefined ? { requestState: input.state } : {}),
            },
            this.#timeoutMs,
            opts.onNotification,
            {
              ...callerMeta(opts.caller),
              ...(c.era === 'modern' && input?.capabilities !== undefined ? { [CLIENT_CAPABILITIES_KEY]: input.capabilities } : {}),
            },
          );
          return enc.encode(JSON.stringify(r.value));
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

  /** Forgets a connection after a failure (the next call reconnects) and frees it (our own close: not a lost start). */
  #drop(c: Live): void {
    c.attempt.counted = true;
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
      c.attempt.counted = true; // closed by us: not a lost start
      await c.client.close();
    } catch {
      // never started, or already gone
    }
  }
}

/** The `_meta` entries that tell the upstream who made a call ({@link InvokeOptions.caller}). */
function callerMeta(caller: InvokeOptions['caller']): Record<string, string> {
  if (caller === undefined) return {};
  return {
    [CALLER_META_KEY]: caller.did,
    [GRANT_META_KEY]: caller.grantId,
    ...(caller.receipt !== undefined ? { [RECEIPT_META_KEY]: caller.receipt } : {}),
  };
}

/** The log fields of a start that timed out (`timeout_ms`), or none. */
function timeoutDetail(e: unknown, ms: number): Record<string, unknown> {
  return e instanceof TimeoutError ? { cap: 'start-timeout', timeout_ms: ms } : {};
}

/**
 * True when a connect failed because the server closed the connection during the in-place
 * `server/discover` probe (SDK `ERA_NEGOTIATION_FAILED`, "the connection closed during the
 * server/discover probe"): a 2025-only server that exits on any request before `initialize`.
 */
function probeKilled(e: unknown): boolean {
  const x = e as { name?: unknown; code?: unknown; message?: unknown };
  return x?.code === 'ERA_NEGOTIATION_FAILED' && /closed during the server\/discover probe/.test(String(x.message));
}

/** SDK error codes (v2 `SdkErrorCode`) that mean the request had no answer: the connection is gone. */
const SDK_UNAVAILABLE = new Set(['CONNECTION_CLOSED', 'NOT_CONNECTED', 'SEND_FAILED']);

/**
 * The endpoint code of a failed request: the server's own error (a JSON-RPC error, a result that
 * is not a CallToolResult, an input-required result the node cannot answer), a timeout, or a lost
 * transport (an HTTP failure, a closed connection).
 */
function classify(e: unknown): EndpointErrorCode {
  if (e instanceof TimeoutError) return EndpointErrorCodes.TIMEOUT;
  if (e instanceof EndpointError) return e.code;
  const name = (e as Error)?.name;
  // The server answered, but not with a CallToolResult: its failure, the connection is fine.
  if (name === 'ZodError' || name === '$ZodError') return EndpointErrorCodes.FAILED;
  const code = (e as { code?: unknown })?.code;
  if (name === 'ProtocolError' && typeof code === 'number') return EndpointErrorCodes.FAILED;
  if (name === 'SdkError' && typeof code === 'string') {
    if (code === 'REQUEST_TIMEOUT') return EndpointErrorCodes.TIMEOUT;
    if (SDK_UNAVAILABLE.has(code)) return EndpointErrorCodes.UNAVAILABLE;
    return EndpointErrorCodes.FAILED; // INVALID_RESULT, UNSUPPORTED_RESULT_TYPE (input_required)…
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
  const status = (e as { data?: { status?: unknown } })?.data?.status;
  return (e as Error)?.name === 'SdkHttpError' && (status === 404 || status === 400);
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

/** Where a stdio transport holds the node's {@link StdioReader} when it took the SDK's place (absent: the SDK's reader). */
const READER = Symbol('jcp.stdioReader');
type ReaderHolder = { [READER]?: StdioReader };

/** An MCP server over stdio (a child process), started on demand and restarted after a crash or hang. */
export class McpStdioEndpoint extends McpEndpoint {
  readonly #cfg: McpStdioEndpointConfig;
  /** The oversized-result warning's rate limit ({@link RESPAWN_LOG_EVERY_MS}): last logged (ms since the epoch), left out since. */
  readonly #oversized: { loggedAt: number; suppressed: number; readonly everyMs: number };

  /** `opts`: the respawn back-off's knobs (tests). */
  constructor(name: string, cfg: McpStdioEndpointConfig, log: Logger, opts: RespawnOptions = {}) {
    super(name, cfg.timeoutMs, log, opts);
    this.#cfg = cfg;
    this.#oversized = { loggedAt: -Infinity, suppressed: 0, everyMs: opts.respawnLogEveryMs ?? RESPAWN_LOG_EVERY_MS };
  }

  /**
   * Whether the transport of the current connection reads with the node's {@link StdioReader}
   * (false: the SDK's own reader, whose cap ends the connection); undefined with no connection.
   */
  async readsWithStdioReader(): Promise<boolean | undefined> {
    try {
      return ((await this.connection()).transport as ReaderHolder)[READER] !== undefined;
    } catch {
      return undefined;
    }
  }

  protected override listed(transport: Transport): void {
    const reader = (transport as ReaderHolder)[READER];
    if (reader !== undefined) reader.spare = true;
  }

  /** Logs a result replaced for going past the read cap, at most once per {@link RESPAWN_LOG_EVERY_MS} (the rest counted in `suppressed`). */
  #oversizedResult(line: OversizedLine): void {
    const o = this.#oversized;
    const now = Date.now();
    if (now - o.loggedAt < o.everyMs) {
      o.suppressed++;
      return;
    }
    this.log.warn(
      { cap: 'stdio-read-buffer', cap_bytes: line.capBytes, bytes: line.bytes, suppressed: o.suppressed },
      'upstream result larger than the stdio read cap: that call failed (endpoint-failed), the connection stays up',
    );
    o.loggedAt = now;
    o.suppressed = 0;
  }

  protected override respawnGated(): boolean {
    return true;
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
    const { StdioClientTransport, getDefaultEnvironment } = await import('@modelcontextprotocol/client/stdio');
    const { deserializeMessage } = await import('@modelcontextprotocol/client');
    // A subclass, so the SDK probes `server/discover` in place, on this connection's own process:
    // for its base class it spawns a disposable sibling process for the probe and then the
    // connection's (client `_connectNegotiated` → `negotiateStdioViaSibling`), two processes per
    // connection. A server that the probe ends is then connected with the handshake alone ({@link McpEndpoint}).
    // Marks the node's own descriptors close-on-exec just before the spawn (io/cloexec.ts): the
    // receipt log's LevelDB files are opened without it, and the server must not inherit them.
    // Its stdout is read by the node's StdioReader in place of the SDK's ReadBuffer (its
    // `_readBuffer`, same interface), so that one result past the read cap fails its own call
    // instead of the connection (node/stdioreader.ts). Should the SDK no longer have that field,
    // its own reader stays (the whole connection is lost past the cap) and a warning says so.
    class OneProcess extends StdioClientTransport implements ReaderHolder {
      readonly [READER]: StdioReader | undefined;
      constructor(params: ConstructorParameters<typeof StdioClientTransport>[0], reader: StdioReader) {
        super(params);
        const self = this as unknown as { _readBuffer?: Partial<Record<'append' | 'readMessage' | 'clear', unknown>> };
        const sdk = self._readBuffer;
        if (
          sdk !== undefined &&
          typeof sdk.append === 'function' &&
          typeof sdk.readMessage === 'function' &&
          typeof sdk.clear === 'function'
        ) {
          (self as { _readBuffer: unknown })._readBuffer = reader;
          this[READER] = reader;
        }
      }
      override async start(): Promise<void> {
        markCloseOnExec();
        return super.start();
      }
    }
    if (!(await bindCloseOnExec()) && !closeOnExecWarned) {
      closeOnExecWarned = true;
      this.log.warn(
        { endpoint: this.name },
        "stdio servers may inherit the node's open files (the receipt log's included): fcntl(2) could not be bound to mark them close-on-exec",
      );
    }
    const reader = new StdioReader({
      capBytes: STDIO_READ_CAP_BYTES,
      parse: deserializeMessage,
      onOversized: (line) => this.#oversizedResult(line),
    });
    const transport = new OneProcess(
      {
        command: this.#cfg.command,
        args: [...this.#cfg.args],
        env: stdioEnvironment(getDefaultEnvironment(), this.#cfg.env),
        ...(this.#cfg.cwd !== undefined ? { cwd: this.#cfg.cwd } : {}),
        stderr: 'pipe',
        maxBufferSize: STDIO_READ_CAP_BYTES,
      },
      reader,
    );
    if (transport[READER] === undefined && !readerWarned) {
      readerWarned = true;
      this.log.warn(
        { cap_bytes: STDIO_READ_CAP_BYTES },
        "the MCP SDK's stdio transport has no _readBuffer to replace: a result past the stdio read cap ends the whole connection",
      );
    }
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

/** The close-on-exec warning was logged (once per process). */
let closeOnExecWarned = false;
/** The warning that the SDK's stdio reader could not be replaced was logged (once per process). */
let readerWarned = false;

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

/** An MCP server over Streamable HTTP (MCP 2025-06-18 and later, 2026-07-28 without a session), its headers read from env or files. */
export class McpHttpEndpoint extends McpEndpoint {
  readonly #cfg: McpHttpEndpointConfig;

  constructor(name: string, cfg: McpHttpEndpointConfig, log: Logger) {
    super(name, cfg.timeoutMs, log);
    this.#cfg = cfg;
  }

  protected async openTransport(): Promise<Transport> {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
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
