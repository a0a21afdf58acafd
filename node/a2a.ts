/**
 * A2A v1.0 agents behind a node (docs/a2a.md; spec §6: one frame for the tool layer and the agent
 * layer). A resource whose endpoint is `{"kind": "a2a", "url"}` fronts an agent the node reaches with
 * `@a2a-js/sdk`'s client (JSON-RPC or HTTP+JSON, as its agent card offers). A request for it is an
 * `agent-task` frame whose action is a skill id of the card and whose payload is the UTF-8 JSON
 * `{"method", "params"}` (an A2A v1.0 method and its request object, JSON form).
 *
 * Before the decision ({@link A2aEndpoint.precheck}; refusals are error replies, no receipt, no
 * debit): the frame kind (`frame-kind-mismatch`), the payload (`payload-invalid`), the skill
 * against the card (`unknown-skill`), the message's `metadata.skill` against the action
 * (`skill-required`, `skill-mismatch`; a grant that allows exactly one skill of the agent lets the
 * message leave it out), the task a follow-up names against the caller and leaf grant it started
 * under (`task-not-found`, the same answer as for an unknown task), and the stream bounds, per
 * caller, per address and in all (`stream-limit`; {@link a2aStreamBounds}). The decision, its receipt and the debit then happen in the enforcer, as for a
 * tool call, before anything reaches the agent.
 *
 * On allow ({@link A2aEndpoint.invoke}): the message goes out with `metadata.skill` and
 * `metadata["jcp/caller"]` (the caller's did:key) set; the agent's answer comes back as
 * `{"agent-reply": <JSON>}` (§6: data). Streams forward each event as an `a2a/event` notification,
 * in order, and are closed upstream when the caller's connection closes. A failure that says the
 * agent did not take the request (unreachable: connection refused, DNS, connect timeout; an HTTP
 * error, a JSON-RPC error, a redirect, a card that cannot be read) is `endpoint-unavailable` phase
 * `start`: the enforcer reverses the debit. A timeout, a connection that broke after the request
 * was sent (the agent failed mid-task; {@link brokeMidTask}), a reply past its cap, or a stream
 * that broke after its first event, is charged (`endpoint-timeout`, `endpoint-failed`).
 */
import type { Logger } from 'pino';
import { type ContentId, decode, decodeJcrSign1, type ReceiptCore, readReceiptCore } from '../core/index.ts';
import type { A2aEndpointConfig } from './config.ts';
import { NodeErrorCodes } from './codes.ts';
import {
  type Endpoint,
  EndpointError,
  EndpointErrorCodes,
  EndpointUnavailable,
  headerValue,
  type InvokeOptions,
  messageWithCauses,
  type Precheck,
  type ToolStatus,
  TOOLS_BACKOFF_MAX_MS,
  TOOLS_BACKOFF_MS,
} from './endpoint.ts';

/** The A2A v1.0 methods an `agent-task` payload may name (docs/a2a.md). */
export const A2A_METHODS = ['SendMessage', 'SendStreamingMessage', 'GetTask', 'CancelTask', 'SubscribeToTask', 'ListTasks'] as const;
/** One of {@link A2A_METHODS}. */
export type A2aMethod = (typeof A2A_METHODS)[number];
/** The methods that stream (need `notify: 1`; each event is a notice). */
const STREAMING: ReadonlySet<string> = new Set(['SendStreamingMessage', 'SubscribeToTask']);
/** The methods that name one task by `params.id`. */
const TASK_BOUND: ReadonlySet<string> = new Set(['GetTask', 'CancelTask', 'SubscribeToTask']);

/** The JSON-RPC method of the notice that carries one stream event (docs/a2a.md). */
export const A2A_EVENT_METHOD = 'a2a/event';
/** The key of the result object: `{"agent-reply": …}`. */
export const AGENT_REPLY_KEY = 'agent-reply';
/** The message metadata key naming the skill. */
export const SKILL_META = 'skill';
/** The message metadata key the node sets to the caller's did:key. */
export const CALLER_META = 'jcp/caller';

/** Most tasks one A2A endpoint remembers the owner of (oldest forgotten first). */
export const MAX_TASKS = 65_536;
/** Most tasks remembered per caller (its oldest forgotten first). */
export const MAX_TASKS_PER_CALLER = 4096;

/** Who a task belongs to: the caller and leaf grant it started under, and its skill. */
export interface TaskOwner {
  readonly caller: string;
  readonly grantId: string;
  readonly skill: string;
}

/**
 * The bounded table task id → owner of one A2A endpoint: at most `max` tasks, `perCaller` per
 * caller; past either the oldest (of all, or of that caller) is forgotten, and a follow-up on a
 * forgotten task is answered `task-not-found`. Kept in memory, and rebuilt at boot from the newest
 * receipts and their kept results ({@link rebuildTaskTables}; docs/a2a.md "Follow-ups").
 */
export class TaskTable {
  readonly #max: number;
  readonly #perCaller: number;
  readonly #owners = new Map<string, TaskOwner>();
  readonly #byCaller = new Map<string, Set<string>>();

  constructor(max = MAX_TASKS, perCaller = MAX_TASKS_PER_CALLER) {
    this.#max = max;
    this.#perCaller = perCaller;
  }

  get size(): number {
    return this.#owners.size;
  }

  get(taskId: string): TaskOwner | undefined {
    return this.#owners.get(taskId);
  }

  /** Binds `taskId` to `owner` unless it is bound already (the first binding stands). */
  bind(taskId: string, owner: TaskOwner): void {
    if (taskId === '' || this.#owners.has(taskId)) return;
    let mine = this.#byCaller.get(owner.caller);
    if (mine === undefined) {
      mine = new Set();
      this.#byCaller.set(owner.caller, mine);
    }
    if (mine.size >= this.#perCaller) this.#forget(mine.values().next().value as string);
    if (this.#owners.size >= this.#max) this.#forget(this.#owners.keys().next().value as string);
    this.#owners.set(taskId, owner);
    mine.add(taskId);
  }

  #forget(taskId: string): void {
    const o = this.#owners.get(taskId);
    if (o === undefined) return;
    this.#owners.delete(taskId);
    const mine = this.#byCaller.get(o.caller);
    mine?.delete(taskId);
    if (mine?.size === 0) this.#byCaller.delete(o.caller);
  }
}

/** Most receipts, newest first, read at boot to rebuild the task tables ({@link rebuildTaskTables}). */
export const TASK_REBUILD_RECEIPTS = 4 * MAX_TASKS;

/** What {@link rebuildTaskTables} reads: the newest receipts and the kept results (node/receiptlog.ts). */
export interface TaskLog {
  lastSeq(): Promise<number>;
  receiptChunks(chunk?: number, fromSeq?: number): AsyncGenerator<Array<[number, Uint8Array]>>;
  getResult(requestId: ContentId): Promise<Uint8Array | undefined>;
}

/**
 * Rebuilds the task tables of the A2A endpoints in `endpoints` (resource id → endpoint) from the
 * log at boot: every allowed `agent-task` receipt of the newest {@link TASK_REBUILD_RECEIPTS},
 * whose kept result names a task, binds it to the receipt's subject (the caller of an allow, §7),
 * leaf grant and action (the skill), oldest first, so the first binding stands as it did. The log
 * was verified by boot replay, so receipts are read, not verified again. Resolves to the number
 * of tasks bound. @throws NodeFault `log-corrupt` when the log cannot be read.
 */
export async function rebuildTaskTables(log: TaskLog, endpoints: ReadonlyMap<string, { readonly endpoint: unknown }>): Promise<number> {
  const tables = new Map<string, TaskTable>();
  for (const [id, b] of endpoints) if (b.endpoint instanceof A2aEndpoint) tables.set(id, b.endpoint.tasks);
  if (tables.size === 0) return 0;
  const from = Math.max(0, (await log.lastSeq()) - TASK_REBUILD_RECEIPTS + 1);
  let bound = 0;
  for await (const chunk of log.receiptChunks(4096, from)) {
    for (const [, bytes] of chunk) {
      let core: ReceiptCore;
      try {
        core = readReceiptCore(decode(decodeJcrSign1(bytes).msg.payload));
      } catch {
        continue; // counted and reported by boot replay
      }
      const table = tables.get(core.resource);
      if (table === undefined || core.verdict !== 'allow' || core.frame_kind !== 'agent-task' || core.request_id === undefined) continue;
      const taskId = replyTaskId(await log.getResult(core.request_id));
      if (taskId === '' || table.get(taskId) !== undefined) continue;
      table.bind(taskId, { caller: core.subject, grantId: core.grant_id, skill: core.action });
      bound++;
    }
  }
  return bound;
}

/** The task id a kept `{"agent-reply": …}` result names ('' when none, or not an agent reply). */
function replyTaskId(result: Uint8Array | undefined): string {
  if (result === undefined) return '';
  try {
    const v: unknown = JSON.parse(dec.decode(result));
    const reply = isObj(v) ? v[AGENT_REPLY_KEY] : undefined;
    return isObj(reply) ? taskIdOf(reply) : '';
  } catch {
    return '';
  }
}

type Sdk = typeof import('@a2a-js/sdk');
type SdkClient = typeof import('@a2a-js/sdk/client');
type A2aClient = import('@a2a-js/sdk/client').Client;
type Json = Record<string, unknown>;

let sdkModules: Promise<[Sdk, SdkClient]> | undefined;
/** The SDK, loaded on first use (a node without A2A agents never loads it). */
function loadSdk(): Promise<[Sdk, SdkClient]> {
  sdkModules ??= Promise.all([import('@a2a-js/sdk'), import('@a2a-js/sdk/client')]);
  return sdkModules;
}

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The `{method, params}` of an agent-task payload, or why not (payload-invalid). */
export function parseAgentTask(payload: Uint8Array | undefined): { method: A2aMethod; params: Json } | string {
  let v: unknown;
  try {
    v = JSON.parse(dec.decode(payload ?? new Uint8Array()));
  } catch {
    return 'request.payload: an agent-task takes the UTF-8 JSON {"method", "params"} (docs/a2a.md)';
  }
  if (!isObj(v) || !(A2A_METHODS as readonly unknown[]).includes(v['method'])) {
    return `request.payload.method: expected one of ${A2A_METHODS.join(', ')}`;
  }
  const params = v['params'] ?? {};
  if (!isObj(params)) return 'request.payload.params: expected the A2A request object (JSON)';
  return { method: v['method'] as A2aMethod, params };
}

/**
 * The key the node prices an agent-task at (its estimate, `meter.estimates_uj`, else
 * `default_estimate_uj`; docs/a2a.md "What a task costs"): the skill for a send, like a tool call;
 * `a2a:<Method>` for a follow-up (`a2a:GetTask`, `a2a:CancelTask`, `a2a:SubscribeToTask`,
 * `a2a:ListTasks`), a read of the agent's state priced by its own estimate.
 */
export function a2aPriceKey(skill: string, args: Record<string, unknown> | undefined): string {
  const m = args?.['method'];
  return m === 'SendMessage' || m === 'SendStreamingMessage' || typeof m !== 'string' ? skill : `a2a:${m}`;
}

/** The outcome code of an agent reply: `ok`, or the task's end (`task-failed`, `task-canceled`, …). */
export function agentOutcome(reply: unknown): string {
  if (!isObj(reply)) return 'ok';
  const r = reply;
  const status = (isObj(r['task']) ? r['task']['status'] : isObj(r['statusUpdate']) ? r['statusUpdate']['status'] : r['status']) as unknown;
  const state = isObj(status) ? status['state'] : undefined;
  switch (state) {
    case 'TASK_STATE_FAILED':
      return 'task-failed';
    case 'TASK_STATE_CANCELED':
      return 'task-canceled';
    case 'TASK_STATE_REJECTED':
      return 'task-rejected';
    case 'TASK_STATE_INPUT_REQUIRED':
      return 'input-required';
    case 'TASK_STATE_AUTH_REQUIRED':
      return 'auth-required';
    case 'TASK_STATE_SUBMITTED':
    case 'TASK_STATE_WORKING':
      return 'task-working';
    default:
      return 'ok';
  }
}

/** The task id an answer or stream event names ('' when none). */
function taskIdOf(v: Json): string {
  for (const k of ['task', 'statusUpdate', 'artifactUpdate', 'message']) {
    const x = v[k];
    if (isObj(x)) return String(x[k === 'task' ? 'id' : 'taskId'] ?? '');
  }
  return '';
}

class StreamTimeout extends Error {}
class CallerGone extends Error {}

/**
 * Error codes (Node's `err.code`, undici's in `e.cause.code`) that say the request never reached
 * the agent: nothing listened, the name did not resolve, no route, the connect timed out.
 */
const NEVER_REACHED: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** System calls whose failure means the connection was never open (any code: `connect ETIMEDOUT`, `connect ECONNRESET`). */
const CONNECTING_SYSCALLS: ReadonlySet<string> = new Set(['connect', 'getaddrinfo']);
/** Error codes that say an open connection to the agent broke (reset, or closed by the agent). */
const CONNECTION_BROKE: ReadonlySet<string> = new Set(['ECONNRESET', 'UND_ERR_SOCKET']);
/** Messages of the same (undici: `other side closed`, a body cut: `terminated`; node:http: `socket hang up`). */
const CONNECTION_BROKE_MESSAGE = /other side closed|socket hang up|^terminated$/;

/**
 * True when `e` (a failed A2A call; its `cause` chain, up to 5 levels, is read) says the agent was
 * reached and failed mid-task: the connection broke after it was open and the request sent
 * (`ECONNRESET`, undici `UND_ERR_SOCKET` / `other side closed`, a body cut: `terminated`,
 * `socket hang up`), or its reply passed the node's cap ({@link A2A_REPLY_TOO_LARGE}). Such a
 * call is charged (`endpoint-failed`), like a timeout: the agent had the task and may have worked
 * on it. False when any level names a failure to reach it (`ECONNREFUSED`, `ENOTFOUND`,
 * `EHOSTUNREACH`, a connect timeout, any failed `connect` or `getaddrinfo`) and for everything else (HTTP or JSON-RPC
 * errors, redirects, unknown failures): those stay `endpoint-unavailable` and are reversed, so a
 * caller is charged for a broken connection only on positive evidence that one was open.
 * Known limits: an agent that closes a connection as it accepts it, before reading the request
 * (at its connection limit), looks the same to the node as one that died working, and is charged;
 * so is a connection reset during a TLS handshake.
 */
export function brokeMidTask(e: unknown): boolean {
  let broke = false;
  let x: unknown = e;
  for (let i = 0; i < 5 && x !== null && typeof x === 'object'; i++) {
    const o = x as { code?: unknown; message?: unknown; syscall?: unknown; cause?: unknown };
    const code = typeof o.code === 'string' ? o.code : '';
    const message = typeof o.message === 'string' ? o.message : '';
    if (NEVER_REACHED.has(code) || (typeof o.syscall === 'string' && CONNECTING_SYSCALLS.has(o.syscall))) return false;
    if (CONNECTION_BROKE.has(code) || CONNECTION_BROKE_MESSAGE.test(message) || message.startsWith(A2A_REPLY_TOO_LARGE)) broke = true;
    x = o.cause;
  }
  return broke;
}

/** Most bytes of one reply body from an agent (a JSON answer): the node's result cap (8 MiB) plus 64 KiB of envelope. */
export const A2A_REPLY_MAX_BYTES = (8 << 20) + (64 << 10);
/** Most bytes of one event stream from an agent (SSE), all events together. */
export const A2A_STREAM_MAX_BYTES = 64 << 20;
/** The code of a reply or stream that passed its cap (the call is `endpoint-failed`, charged: the agent ran). */
export const A2A_REPLY_TOO_LARGE = 'agent-reply-too-large';

/**
 * `res` with its body counted as it arrives: past {@link A2A_STREAM_MAX_BYTES} for an event stream,
 * else {@link A2A_REPLY_MAX_BYTES} (a larger declared `content-length` at once), the body errors
 * `agent-reply-too-large` and the connection is dropped, so no agent can make the node hold more.
 */
function capReply(res: Response): Response {
  if (res.body === null) return res;
  const sse = (res.headers.get('content-type') ?? '').includes('text/event-stream');
  const max = sse ? A2A_STREAM_MAX_BYTES : A2A_REPLY_MAX_BYTES;
  const declared = Number(res.headers.get('content-length') ?? '0');
  const tooLarge = (n: string) => new Error(`${A2A_REPLY_TOO_LARGE}: the agent's ${sse ? 'stream' : 'reply'} passed ${max} bytes (${n})`);
  if (declared > max) {
    void res.body.cancel().catch(() => undefined);
    throw tooLarge(`${declared} declared`);
  }
  let seen = 0;
  const counted = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        seen += chunk.byteLength;
        if (seen > max) ctl.error(tooLarge(`${seen} read`));
        else ctl.enqueue(chunk);
      },
    }),
  );
  return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** The bounds on open streams of one A2A endpoint ({@link a2aStreamBounds}); counts of streams. */
export interface A2aStreamBounds {
  /** Most streams open to the agent in all (`max_streams`). */
  readonly total: number;
  /** Most streams open for one caller did:key (`max_streams_per_peer`). */
  readonly perCaller: number;
  /** Most streams open from one peer address: `max(max_streams_per_peer, ⌊max_streams / 2⌋)`. */
  readonly perAddress: number;
}

/**
 * The stream bounds of an A2A endpoint (docs/a2a.md "Streams"; refusal `stream-limit`):
 *
 * - per caller, `max_streams_per_peer` (default 16): the primary bound. A stream is opened only by
 *   an allowed request, signed by its caller and debited from its chain, so the caller (the party
 *   that pays) is who is bounded. The config key keeps its name (an interface); its "peer" is the
 *   calling party. An address is not a party: every `jcp bridge --a2a` on a host reaches the node
 *   from 127.0.0.1, so a per-address bound this small let one bridge's callers block every other
 *   agent on the host.
 * - per address, `max(max_streams_per_peer, ⌊max_streams / 2⌋)` (default 128): kept, and much
 *   larger, because did:keys cost nothing and a delegable grant lets one party spread its streams
 *   over many keys; this caps what one host can hold, so other hosts always keep half the node's
 *   streams, while a host of many bridges serves ⌊max_streams / 2⌋ / max_streams_per_peer callers
 *   at their bound (8 by default) before it bites.
 * - in all, `max_streams` (default 256): what the node holds open to the agent.
 */
export function a2aStreamBounds(cfg: Pick<A2aEndpointConfig, 'maxStreams' | 'maxStreamsPerPeer'>): A2aStreamBounds {
  return {
    total: cfg.maxStreams,
    perCaller: cfg.maxStreamsPerPeer,
    perAddress: Math.max(cfg.maxStreamsPerPeer, Math.floor(cfg.maxStreams / 2)),
  };
}

/** Adds `d` to `key`'s count in `m` (a count of 0 is deleted). */
function count(m: Map<string, number>, key: string, d: number): void {
  const n = (m.get(key) ?? 0) + d;
  if (n <= 0) m.delete(key);
  else m.set(key, n);
}

/** Most bytes of an agent card the node reads (1 MiB); a larger card is not taken. */
export const AGENT_CARD_MAX_BYTES = 1 << 20;
/** Most skills of an agent card the node takes (they travel in every `tool_list` reply). */
export const AGENT_CARD_MAX_SKILLS = 1024;
/** The code in the card-read failure of a card whose interfaces are all at another origin than the configured `url`. */
export const A2A_CARD_ORIGIN = 'agent-card-origin';

/** The origin of `url`, or undefined when it is not a URL. */
function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** The code in the card-read failure (start-up print, logs) of a card over either cap. */
export const A2A_CARD_TOO_LARGE = 'agent-card-too-large';

/**
 * The body of `res`, at most `max` bytes.
 * @throws Error `agent-card-too-large` past `max` (the rest is not read; the body is cancelled).
 */
async function readCapped(res: Response, max: number, signal: AbortSignal): Promise<Uint8Array> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`${A2A_CARD_TOO_LARGE}: ${declared} bytes declared (at most ${max})`);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body?.getReader();
  if (reader === undefined) return new Uint8Array(0);
  for (;;) {
    signal.throwIfAborted();
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw new Error(`${A2A_CARD_TOO_LARGE}: over ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** An A2A v1.0 agent behind a resource (see the module docs). */
export class A2aEndpoint implements Endpoint {
  readonly name: string;
  readonly kind = 'a2a' as const;
  readonly #cfg: A2aEndpointConfig;
  readonly #log: Logger;
  readonly #origin: string;
  /** Aborted by {@link close}: a card read in flight ends with the node. */
  readonly #closing = new AbortController();
  readonly tasks = new TaskTable();
  #skills: readonly Json[] | undefined;
  #skillIds: ReadonlySet<string> = new Set();
  #cardAt = 0;
  #client: A2aClient | undefined;
  #reading: Promise<A2aClient> | undefined;
  #lastFailure: string | undefined;
  #retryAt = 0;
  #backoffMs = TOOLS_BACKOFF_MS;
  readonly #bounds: A2aStreamBounds;
  #streams = 0;
  readonly #streamsPerCaller = new Map<string, number>();
  readonly #streamsPerPeer = new Map<string, number>();
  readonly #live = new Set<AbortController>();

  constructor(name: string, cfg: A2aEndpointConfig, log: Logger) {
    this.name = name;
    this.#cfg = cfg;
    this.#log = log.child({ endpoint: name });
    this.#origin = new URL(cfg.url).origin;
    this.#bounds = a2aStreamBounds(cfg);
  }

  /**
   * `fetch` with the configured headers, sent only to the configured URL's origin, and never
   * following a redirect (`redirect: 'error'`): a 3xx would carry the headers and the message to
   * wherever the agent points (fetch strips only `Authorization` across origins). A redirect is
   * then a failed request: the card is not read, a task is `endpoint-unavailable` and reversed.
   * Every reply body is bounded as it arrives ({@link capReply}), before the SDK buffers or parses it.
   */
  readonly #fetch: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin !== this.#origin || Object.keys(this.#cfg.headers).length === 0) {
      return fetch(input, { ...init, redirect: 'error' }).then(capReply);
    }
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    for (const [k, src] of Object.entries(this.#cfg.headers)) headers.set(k, headerValue(k, src));
    return fetch(input, { ...init, headers, redirect: 'error' }).then(capReply);
  };

  /**
   * The card read: {@link #fetch} within the endpoint's `timeout_ms`, its body read up to
   * {@link AGENT_CARD_MAX_BYTES} (past it the read fails `agent-card-too-large`, the last good card
   * stays in use), handed to the SDK's resolver as a buffered Response.
   */
  readonly #cardFetch: typeof fetch = async (input, init) => {
    const signal = AbortSignal.any([AbortSignal.timeout(this.#cfg.timeoutMs), this.#closing.signal]);
    const res = await this.#fetch(input, { ...init, signal });
    const body = await readCapped(res, AGENT_CARD_MAX_BYTES, signal);
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  tools(): readonly Record<string, unknown>[] | undefined {
    return this.#skills === undefined ? undefined : [];
  }

  skills(): readonly Record<string, unknown>[] | undefined {
    return this.#skills;
  }

  toolStatus(skill: string): ToolStatus {
    if (this.#skills === undefined) return 'unlisted';
    if (Date.now() - this.#cardAt > this.#cfg.cardRefreshS * 1000) void this.ensureTools();
    return this.#skillIds.has(skill) ? 'known' : 'unknown';
  }

  lastFailure(): string | undefined {
    return this.#skills === undefined ? this.#lastFailure : undefined;
  }

  /** Reads the card when none is known or it is older than `card_refresh_s` (with a back-off after failures); never rejects. */
  async ensureTools(): Promise<void> {
    const stale = Date.now() - this.#cardAt > this.#cfg.cardRefreshS * 1000;
    if (this.#skills !== undefined && !stale) return;
    if (Date.now() < this.#retryAt) return;
    try {
      await this.#readCard();
    } catch {
      // recorded in #readCard; the last card (if any) stays in use
    }
  }

  async start(): Promise<void> {
    await this.ensureTools();
  }

  async close(): Promise<void> {
    this.#closing.abort(new CallerGone('the node is closing'));
    for (const ac of this.#live) ac.abort(new CallerGone('the node is closing'));
  }

  /** Reads the agent card and makes a client from it (one read at a time). @throws EndpointUnavailable phase `start`. */
  #readCard(): Promise<A2aClient> {
    this.#reading ??= (async () => {
      try {
        const [sdk, c] = await loadSdk();
        const resolver = new c.DefaultAgentCardResolver({ fetchImpl: this.#cardFetch });
        const card = await resolver.resolve(this.#cfg.url);
        if (card.skills.length > AGENT_CARD_MAX_SKILLS) {
          throw new Error(`${A2A_CARD_TOO_LARGE}: the card lists ${card.skills.length} skills (at most ${AGENT_CARD_MAX_SKILLS})`);
        }
        // The node calls only the configured origin: interfaces the card names elsewhere are
        // dropped, so whoever serves the card cannot aim the node's messages at another service.
        const sameOrigin = card.supportedInterfaces.filter((i) => originOf(i.url) === this.#origin);
        if (sameOrigin.length === 0) {
          throw new Error(
            `${A2A_CARD_ORIGIN}: no interface of the card is at ${this.#origin} (${card.supportedInterfaces.map((i) => i.url).join(', ')})`,
          );
        }
        card.supportedInterfaces = sameOrigin;
        const options = c.ClientFactoryOptions.createFrom(c.ClientFactoryOptions.default, {
          transports: [new c.JsonRpcTransportFactory({ fetchImpl: this.#fetch }), new c.RestTransportFactory({ fetchImpl: this.#fetch })],
          cardResolver: resolver,
        });
        const client = await new c.ClientFactory(options).createFromAgentCard(card);
        this.#skills = card.skills.map((s) => sdk.AgentSkill.toJSON(s) as Json);
        this.#skillIds = new Set(card.skills.map((s) => s.id));
        this.#cardAt = Date.now();
        this.#client = client;
        this.#lastFailure = undefined;
        this.#backoffMs = TOOLS_BACKOFF_MS;
        return client;
      } catch (e) {
        this.#lastFailure = messageWithCauses(e);
        this.#retryAt = Date.now() + this.#backoffMs;
        this.#backoffMs = Math.min(this.#backoffMs * 2, TOOLS_BACKOFF_MAX_MS);
        this.#log.warn({ err: this.#lastFailure }, 'agent card not read');
        throw new EndpointUnavailable(`cannot read the agent card of ${this.name} at ${this.#cfg.url}: ${this.#lastFailure}`, 'start', {
          cause: e,
        });
      } finally {
        this.#reading = undefined;
      }
    })();
    return this.#reading;
  }

  precheck(
    frame: { readonly kind: string; readonly action: string; readonly grant_id: string },
    caller: string,
    payload: Uint8Array | undefined,
    notify: boolean,
    leafActions: readonly string[],
    peer: string,
  ): Precheck {
    const refuse = (code: string, message: string): Precheck => ({ code, message });
    if (frame.kind !== 'agent-task') {
      return refuse(NodeErrorCodes.FRAME_KIND_MISMATCH, `${this.name} is an A2A agent: it takes agent-task frames, not ${frame.kind}`);
    }
    const p = parseAgentTask(payload);
    if (typeof p === 'string') return refuse(NodeErrorCodes.PAYLOAD_INVALID, p);
    const action = frame.action;
    if (this.toolStatus(action) === 'unknown') {
      return refuse(NodeErrorCodes.UNKNOWN_SKILL, `${this.name}'s agent card lists no skill ${JSON.stringify(action.slice(0, 128))}`);
    }
    const owned = (id: string): Precheck | undefined => {
      const o = this.tasks.get(id);
      if (o === undefined || o.caller !== caller || o.grantId !== frame.grant_id) {
        return refuse(
          NodeErrorCodes.TASK_NOT_FOUND,
          `no task ${JSON.stringify(id.slice(0, 128))} of this caller and grant at ${this.name}`,
        );
      }
      if (o.skill !== action) return refuse(NodeErrorCodes.SKILL_MISMATCH, `task ${id} runs skill ${o.skill}, not ${action}`);
      return undefined;
    };
    let params = p.params;
    if (p.method === 'SendMessage' || p.method === 'SendStreamingMessage') {
      const r = this.#checkMessage(params, action, leafActions);
      if (!('tasks' in r)) return r;
      for (const id of r.tasks) {
        const bad = owned(id);
        if (bad !== undefined) return bad;
      }
      params = r.params;
    } else if (TASK_BOUND.has(p.method)) {
      if (typeof params['id'] !== 'string' || params['id'] === '')
        return refuse(NodeErrorCodes.PAYLOAD_INVALID, 'request.payload.params.id: the task id');
      const bad = owned(params['id']);
      if (bad !== undefined) return bad;
    }
    if (STREAMING.has(p.method)) {
      if (!notify) return refuse(NodeErrorCodes.PAYLOAD_INVALID, `${p.method} streams: the request needs notify: 1`);
      const full = this.#streamsFull(caller, peer);
      if (full !== undefined) return refuse(NodeErrorCodes.STREAM_LIMIT, full);
    }
    return { args: { method: p.method, params } };
  }

  /**
   * The message of a send: its skill (named, or the one skill the grant allows) must be `action`;
   * returns the params with `metadata.skill` set, and the task ids it continues or references.
   */
  #checkMessage(params: Json, action: string, leafActions: readonly string[]): { params: Json; tasks: string[] } | Precheck {
    const msg = params['message'];
    if (!isObj(msg)) return { code: NodeErrorCodes.PAYLOAD_INVALID, message: 'request.payload.params.message: the A2A message (JSON)' };
    const meta = msg['metadata'] ?? {};
    if (!isObj(meta))
      return { code: NodeErrorCodes.PAYLOAD_INVALID, message: 'request.payload.params.message.metadata: expected an object' };
    let skill = meta[SKILL_META];
    if (skill !== undefined && typeof skill !== 'string') {
      return { code: NodeErrorCodes.PAYLOAD_INVALID, message: 'message.metadata.skill: expected a skill id (text)' };
    }
    if (skill === undefined) {
      const granted = this.#skills === undefined ? [...leafActions] : leafActions.filter((a) => this.#skillIds.has(a));
      if (granted.length !== 1) {
        return {
          code: NodeErrorCodes.SKILL_REQUIRED,
          message: `the message names no skill (message.metadata.skill) and the grant allows ${granted.length} skills of ${this.name}`,
        };
      }
      skill = granted[0]!;
    }
    if (skill !== action) {
      return {
        code: NodeErrorCodes.SKILL_MISMATCH,
        message: `message.metadata.skill ${JSON.stringify(skill)} is not the frame's action ${action}`,
      };
    }
    const refs = msg['referenceTaskIds'];
    const tasks = [
      ...(typeof msg['taskId'] === 'string' && msg['taskId'] !== '' ? [msg['taskId']] : []),
      ...(Array.isArray(refs) ? refs.filter((x): x is string => typeof x === 'string' && x !== '') : []),
    ];
    return { params: { ...params, message: { ...msg, metadata: { ...meta, [SKILL_META]: skill } } }, tasks };
  }

  /**
   * Why one more stream of `caller` (did:key) from `peer` (address) is refused ({@link a2aStreamBounds}),
   * or undefined. Checked before the decision (where `caller` is the request's, its signature not
   * yet checked: a refusal only) and again as the stream opens, with the caller the enforcer
   * verified; only opened streams are counted, so no one can fill another caller's count.
   */
  #streamsFull(caller: string, peer: string): string | undefined {
    const b = this.#bounds;
    if (this.#streams >= b.total) return `${this.name} has ${this.#streams} streams open (max_streams ${b.total}); retry later`;
    const mine = this.#streamsPerCaller.get(caller) ?? 0;
    if (mine >= b.perCaller) {
      return `caller ${caller} has ${mine} streams open to ${this.name} (max_streams_per_peer ${b.perCaller}, per caller); retry later`;
    }
    const here = this.#streamsPerPeer.get(peer) ?? 0;
    if (here >= b.perAddress) {
      return `${peer} has ${here} streams open to ${this.name} (${b.perAddress} per address: half of max_streams); retry later`;
    }
    return undefined;
  }

  async invoke(action: string, args: Record<string, unknown>, opts: InvokeOptions = {}): Promise<Uint8Array> {
    const method = args['method'] as A2aMethod;
    const params = (args['params'] ?? {}) as Json;
    const [sdk] = await loadSdk();
    const client = this.#client ?? (await this.#readCard());
    const owner = opts.caller === undefined ? undefined : { caller: opts.caller.did, grantId: opts.caller.grantId, skill: action };
    const withCaller = (): Json => {
      const msg = (params['message'] ?? {}) as Json;
      const meta = (msg['metadata'] ?? {}) as Json;
      return { ...params, message: { ...msg, metadata: { ...meta, ...(owner ? { [CALLER_META]: owner.caller } : {}) } } };
    };
    const reply = (v: unknown) => enc.encode(JSON.stringify({ [AGENT_REPLY_KEY]: v }));
    switch (method) {
      case 'SendMessage': {
        const r = await this.#once((signal) => client.sendMessage(sdk.SendMessageRequest.fromJSON(withCaller()), { signal }));
        const json = ('messageId' in r ? { message: sdk.Message.toJSON(r) } : { task: sdk.Task.toJSON(r) }) as Json;
        if (owner) this.tasks.bind(taskIdOf(json), owner);
        return reply(json);
      }
      case 'SendStreamingMessage':
        return reply(
          await this.#stream(opts, owner, (signal) => client.sendMessageStream(sdk.SendMessageRequest.fromJSON(withCaller()), { signal })),
        );
      case 'SubscribeToTask':
        return reply(
          await this.#stream(opts, undefined, (signal) => client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON(params), { signal })),
        );
      case 'GetTask':
        return reply(sdk.Task.toJSON(await this.#once((signal) => client.getTask(sdk.GetTaskRequest.fromJSON(params), { signal }))));
      case 'CancelTask':
        return reply(sdk.Task.toJSON(await this.#once((signal) => client.cancelTask(sdk.CancelTaskRequest.fromJSON(params), { signal }))));
      case 'ListTasks': {
        const r = await this.#once((signal) => client.listTasks(sdk.ListTasksRequest.fromJSON(params), { signal }));
        // Only this caller's tasks under this grant: the agent sees one client (the node).
        const mine = r.tasks.filter((t) => {
          const o = this.tasks.get(t.id);
          return o !== undefined && o.caller === owner?.caller && o.grantId === owner.grantId;
        });
        // The agent's page token names the last task of its page (anyone's): not passed on, so
        // ListTasks is one page of the agent's tasks, filtered to the caller's (docs/a2a.md).
        return reply(sdk.ListTasksResponse.toJSON({ ...r, tasks: mine, totalSize: mine.length, nextPageToken: '' }));
      }
      default:
        throw new EndpointError(EndpointErrorCodes.FAILED, `${this.name}: not an A2A method: ${String(method)}`);
    }
  }

  /**
   * One request/answer call within `timeout_ms`. @throws EndpointError `endpoint-timeout` (charged),
   * `endpoint-failed` when the connection broke after the request was sent or the reply passed its
   * cap (charged; {@link brokeMidTask}), or EndpointUnavailable phase `start` for any other failure
   * before the agent answered (reversed).
   */
  async #once<T>(call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(new StreamTimeout()), this.#cfg.timeoutMs);
    try {
      return await call(ac.signal);
    } catch (e) {
      if (ac.signal.reason instanceof StreamTimeout) {
        throw new EndpointError(EndpointErrorCodes.TIMEOUT, `${this.name}: no answer within ${this.#cfg.timeoutMs} ms`, { cause: e });
      }
      throw this.#failure(e);
    } finally {
      clearTimeout(t);
    }
  }

  /**
   * The error of a call that failed before the agent answered: `endpoint-failed` (charged) when
   * the agent was reached and failed mid-task ({@link brokeMidTask}), else `endpoint-unavailable`
   * phase `start` (reversed). Either way the card is read again on the next call.
   */
  #failure(e: unknown): EndpointError {
    // The card may be out of date (the agent moved or restarted): read it again on the next call.
    this.#cardAt = 0;
    if (brokeMidTask(e)) {
      return new EndpointError(
        EndpointErrorCodes.FAILED,
        `${this.name}: the agent failed mid-task: the request was sent and then the connection broke: ${messageWithCauses(e)}`,
        { cause: e },
      );
    }
    return new EndpointUnavailable(`${this.name}: the agent did not take the request: ${messageWithCauses(e)}`, 'start', {
      cause: e,
    });
  }

  /**
   * Runs one stream: each event is sent on as an `a2a/event` notification, in order; resolves to the
   * last event (JSON). The upstream stream is aborted when the caller goes away (`opts.signal`), after
   * `timeout_ms` without an event, or when the node closes.
   * @throws EndpointError `caller-gone` | `endpoint-timeout` | `endpoint-failed` (after the first
   *   event, or before it when the connection broke after the request was sent: charged), or
   *   EndpointUnavailable phase `start` (before the first event otherwise, or `stream-limit`: reversed).
   */
  async #stream(
    opts: InvokeOptions,
    owner: TaskOwner | undefined,
    open: (signal: AbortSignal) => AsyncGenerator<import('@a2a-js/sdk').StreamResponse, void, undefined>,
  ): Promise<Json> {
    const [sdk] = await loadSdk();
    const caller = opts.caller?.did ?? '';
    const peer = opts.caller?.peer ?? '';
    const full = this.#streamsFull(caller, peer);
    if (full !== undefined) throw new EndpointUnavailable(full, 'start');
    this.#streams++;
    count(this.#streamsPerCaller, caller, 1);
    count(this.#streamsPerPeer, peer, 1);
    const ac = new AbortController();
    this.#live.add(ac);
    const gone = () => ac.abort(new CallerGone('the caller went away'));
    if (opts.signal?.aborted) gone();
    else opts.signal?.addEventListener('abort', gone, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => ac.abort(new StreamTimeout()), this.#cfg.timeoutMs);
    };
    let last: Json | undefined;
    let events = 0;
    try {
      arm();
      for await (const ev of open(ac.signal)) {
        arm();
        const json = sdk.StreamResponse.toJSON(ev) as Json;
        if (owner) this.tasks.bind(taskIdOf(json), owner);
        events++;
        last = json;
        opts.onNotification?.({ jsonrpc: '2.0', method: A2A_EVENT_METHOD, params: json });
        if (ac.signal.aborted) break;
      }
    } catch (e) {
      if (!ac.signal.aborted && events === 0) throw this.#failure(e);
      if (!ac.signal.aborted)
        throw new EndpointError(
          EndpointErrorCodes.FAILED,
          `${this.name}: the stream broke after ${events} events: ${(e as Error)?.message}`,
          { cause: e },
        );
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', gone);
      this.#live.delete(ac);
      this.#streams--;
      count(this.#streamsPerCaller, caller, -1);
      count(this.#streamsPerPeer, peer, -1);
    }
    const why = ac.signal.reason;
    if (why instanceof CallerGone)
      throw new EndpointError(EndpointErrorCodes.CALLER_GONE, `${this.name}: ${why.message} after ${events} events; the stream was closed`);
    if (why instanceof StreamTimeout)
      throw new EndpointError(EndpointErrorCodes.TIMEOUT, `${this.name}: no stream event within ${this.#cfg.timeoutMs} ms`);
    if (last === undefined) throw new EndpointError(EndpointErrorCodes.FAILED, `${this.name}: the stream ended without an event`);
    return last;
  }
}
