/**
 * The bridge's A2A face (docs/a2a.md "The bridge's A2A face"): an A2A v1.0 server, on the SDK's
 * Express handlers, for the agents the bridge holds keys for. Each agent has an agent card at
 * `/.well-known/agent-card.json` (its JSON-RPC interface at `/`, its HTTP+JSON interface at
 * `/rest`) listing the skills its grants permit on the A2A agents behind the node (the node's
 * `tool_list` entries with `kind: "a2a"`), named as tools are (bridge/catalogue.ts).
 *
 * Every `SendMessage`/`SendStreamingMessage` becomes a caller-signed jcp/1 request with an
 * `agent-task` frame (BridgeAgent.send: the journal fixes its time and nonce by the message's
 * `messageId`, so a re-sent message is the same request, replayed by the node, never a second
 * debit). The message names its skill in `metadata.skill` (the card's id; forwarded as the
 * upstream's). Follow-ups (`GetTask`, `CancelTask`, `SubscribeToTask`, `ListTasks`) are agent-task
 * requests too, under the chain the task started with.
 *
 * Replies: the agent's task or message with the decision's keys added to its `metadata`
 * (`jcp/verdict`, `jcp/receipt`, `jcp/grant_id`, `jcp/budget_remaining_uj`, …, bridge/agent.ts).
 * A deny of a send is a task in state `TASK_STATE_REJECTED` whose status message is
 * `denied: <reason>` (sealed: its receipt is in the metadata); a deny of a follow-up is an A2A
 * error with that message and the keys in its `ErrorInfo.metadata`. A send the agent never ran
 * (unreachable) is a `TASK_STATE_FAILED` task with `jcp/error`. Requests refused before any
 * decision are A2A errors whose message starts with the stable code (`unknown-skill`,
 * `skill-required`, `delegation-*`, `delegate-*`, `node-unreachable`, …), the code also in
 * `ErrorInfo.metadata["jcp/error"]`.
 *
 * Streams: each event the agent sends (the node's `a2a/event` notices) reaches the client in
 * order; an event is written when the next arrives or the task's request is decided, so the last
 * one carries the decision's metadata.
 *
 * Delegation (bridge/delegation.ts): a message whose metadata has `jcp/delegate` gets a child
 * grant minted from the agent's own grant and forwarded as `jcp/delegation`; a message that
 * carries `jcp/delegation` (a chain handed to this agent, accepted from a listed delegator) is
 * sent under that chain, and the chain is not forwarded.
 *
 * HTTP: the same checks as the MCP face (bridge/http.ts) before a body is read: loopback unless
 * `allowRemote`, `Host` on loopback, `Origin`, bearer token (one per agent; a single agent on
 * loopback may have none), `Content-Type` (`application/json` or `application/a2a+json`),
 * `Content-Length`; and open requests (streams included) bounded per agent and in all.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  A2A_PROTOCOL_VERSION,
  type AgentCard,
  AgentSkill,
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  type ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskState,
  TaskStatusUpdateEvent,
} from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  InvalidAgentResponseError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotFoundError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';
// v1 SDK: McpError is what the bridge's 2025 face (the v1 server, docs/bridge.md) throws to its clients.
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import express from 'express';
import type { SignedGrant } from '../core/index.ts';
import { BRIDGE_HTTP_LIMITS, createBoundedServer, type HttpLimits, peerAddress } from '../io/index.ts';
import type { BridgeAgent, Decided, Exchange } from './agent.ts';
import { type BridgeSkill, skillCatalogue } from './catalogue.ts';
import { DELEGATE_KEY, DELEGATION_KEY, DelegationErrorCodes, encodeDelegation } from './delegation.ts';
import {
  BEARER_CHALLENGE,
  BridgeConfigError,
  type HttpAgent,
  HttpErrorCodes,
  type KeyedAgent,
  MAX_BODY_BYTES,
  UNAUTHORIZED_MESSAGE,
  authenticate,
  checkedAgents,
  headerRefusal,
  isLoopback,
  loopbackHosts,
  originOf,
  refuse,
  reply,
} from './http.ts';
import { BRIDGE_INFO } from './server.ts';

/** Stable codes of A2A requests refused before a decision (in the message and `ErrorInfo.metadata["jcp/error"]`). */
export const A2aErrorCodes = {
  /** A message names no skill and the card lists more than one. */
  SKILL_REQUIRED: 'skill-required',
  /** `metadata.skill` names no skill of this agent's card (or of the delegated chain's). */
  UNKNOWN_SKILL: 'unknown-skill',
  /** A send without a message. */
  MESSAGE_REQUIRED: 'message-required',
  /**
   * A message with no parts, or a part with none of `text`, `raw`, `url`, `data` (A2A v1.0 `Part`'s
   * one-of; the SDK reads any other shape, v0.3's `{kind: "file", file}` among them, as a part with
   * no content). Refused before a decision: nothing is sealed or debited.
   */
  PART_INVALID: 'part-invalid',
  /** 429: the agent has `perAgent` requests open. */
  REQUEST_LIMIT_AGENT: 'request-limit-agent',
  /** 503: the bridge has `total` requests open. */
  REQUEST_LIMIT_TOTAL: 'request-limit-total',
  /** 429: the client's address (IPv4, or IPv6 /64) has `perPeer` requests open to this agent. */
  REQUEST_LIMIT_PEER: 'request-limit-peer',
  /**
   * A message's `messageId`, `contextId`, `taskId` or a `referenceTaskIds` entry is longer than
   * {@link A2A_MAX_ID_CHARS}. Refused before a decision: nothing is sealed or debited.
   */
  ID_TOO_LONG: 'id-too-long',
  /** 400: a body that is not JSON (the parser refused it). */
  JSON_INVALID: 'json-invalid',
} as const;

/** Bounds on open A2A requests (streams included) (see {@link DEFAULT_A2A_LIMITS}). */
export interface A2aLimits {
  /** Open requests per agent; one more gets 429 `request-limit-agent`. */
  readonly perAgent: number;
  /** Open requests in all; one more gets 503 `request-limit-total`. */
  readonly total: number;
  /**
   * Open requests to one agent from one client address (IPv4, or IPv6 by /64); one more gets 429
   * `request-limit-peer`: one address trickling bodies cannot hold all of an agent's `perAgent`.
   */
  readonly perPeer: number;
}

/** Default bounds: 64 open requests per agent, 32 of them from one address, 1,024 in all. */
export const DEFAULT_A2A_LIMITS: A2aLimits = { perAgent: 64, total: 1024, perPeer: 32 };

/**
 * Longest A2A id a message may carry (`messageId`, `contextId`, `taskId`, `referenceTaskIds`),
 * characters: 1,024 (a UUID is 36). The bridge keeps ids (its task routes, its journal's keys);
 * messages with 1,000,000-character ids grew a bridge to 1.1 GB (2026-12-07).
 */
export const A2A_MAX_ID_CHARS = 1024;

/** Options of {@link serveBridgeA2a}. */
export interface A2aOptions {
  readonly host: string;
  /** 0 for an ephemeral port. */
  readonly port: number;
  readonly agents: readonly HttpAgent[];
  readonly allowRemote?: boolean;
  readonly limits?: Partial<A2aLimits>;
  /** As {@link HttpOptions.allowedOrigins} (bridge/http.ts). */
  readonly allowedOrigins?: readonly string[];
  /** As {@link HttpOptions.allowedHosts} (bridge/http.ts). */
  readonly allowedHosts?: readonly string[];
  /** As {@link HttpOptions.connectionLimits} (bridge/http.ts; default `BRIDGE_HTTP_LIMITS`: 4096 in all, 256 per peer). */
  readonly connectionLimits?: HttpLimits;
}

/** A listening A2A face. */
export interface A2aBridge {
  /** `http://host:port` (the agent card is at `/.well-known/agent-card.json`). */
  readonly url: string;
  readonly port: number;
  /** Requests open now. */
  readonly open: () => number;
  close(): Promise<void>;
}

/** The most task ids remembered per agent (task → the skill and chain it started under). */
const MAX_TASKS = 4096;

/** A task's route: the skill it is for and the chain it runs under. */
interface Route {
  readonly skill: BridgeSkill;
  readonly chain: readonly SignedGrant[];
}

/** The stable code of a bridge error (McpError `data.code`), or undefined. */
function codeOf(e: unknown): string | undefined {
  const c = (e as { data?: { code?: unknown } }).data?.code;
  return typeof c === 'string' ? c : undefined;
}

/** An A2A error for an error thrown before a decision (see the module comment). */
function a2aError(e: unknown): Error {
  if (e instanceof A2AError) return e;
  const code = codeOf(e);
  if (code === undefined) return e as Error;
  const o = { message: (e as Error).message, metadata: { 'jcp/error': code } };
  if (code === 'task-not-found') return new TaskNotFoundError(o);
  if (e instanceof McpError && e.code === -32602) return new RequestMalformedError(o);
  return new A2AError(o);
}

/** A malformed-request error with its stable code. */
function malformed(code: string, message: string): Error {
  return new RequestMalformedError({ message: `${code}: ${message}`, metadata: { 'jcp/error': code } });
}

/** The `metadata` of an A2A object with `meta` added. */
function withMeta<T extends { metadata: { [key: string]: unknown } | undefined }>(v: T, meta: Record<string, string>): T {
  return { ...v, metadata: { ...(v.metadata ?? {}), ...meta } };
}

/** A terminal task (rejected or failed) whose status message is `text`, carrying `meta`. */
function endedTask(
  state: 'TASK_STATE_REJECTED' | 'TASK_STATE_FAILED',
  text: string,
  meta: Record<string, string>,
  contextId: string,
): Task {
  return Task.fromJSON({
    id: `jcp-${meta['jcp/request_id'] ?? randomUUID()}`,
    contextId: contextId.length > 0 ? contextId : randomUUID(),
    status: endStatus(state, text, meta),
    metadata: meta,
  });
}

/** The JSON status that ends a task the bridge ends (`state`, an agent message of `text` carrying `meta`, now). */
function endStatus(state: 'TASK_STATE_REJECTED' | 'TASK_STATE_FAILED', text: string, meta: Record<string, string>) {
  return {
    state,
    message: { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text }], metadata: meta },
    timestamp: new Date().toISOString(),
  };
}

/** The agent's reply (`{"agent-reply": …}`) of a decided exchange, or the node's `jcp_error`. */
function replyOf(d: Decided): { reply?: Record<string, unknown>; error?: { code: string; message: string } } {
  const r = d.result;
  if (r === undefined) return { error: { code: 'bad-reply', message: `the node's result is not JSON (${d.unreadable})` } };
  const a = r['agent-reply'];
  if (typeof a === 'object' && a !== null && !Array.isArray(a)) return { reply: a as Record<string, unknown> };
  const e = r['jcp_error'] as { code?: unknown; message?: unknown } | undefined;
  if (e !== undefined) return { error: { code: String(e.code), message: String(e.message ?? '') } };
  return { error: { code: 'bad-reply', message: 'the node answered without an agent-reply' } };
}

/** A SendMessage reply (`{task}` | `{message}` | a bare task or message) as the SDK's object. */
function sendResult(j: Record<string, unknown>): Task | Message {
  if ('task' in j) return Task.fromJSON(j['task']);
  if ('message' in j) return Message.fromJSON(j['message']);
  if ('status' in j && 'id' in j) return Task.fromJSON(j);
  if ('messageId' in j) return Message.fromJSON(j);
  throw new InvalidAgentResponseError({ message: 'the agent replied with neither a task nor a message' });
}

/** A stream event's metadata with `meta` added. */
function eventWithMeta(e: StreamResponse, meta: Record<string, string>): StreamResponse {
  const p = e.payload;
  if (p === undefined) return e;
  switch (p.$case) {
    case 'task':
      return { payload: { $case: 'task', value: withMeta(p.value, meta) } };
    case 'message':
      return { payload: { $case: 'message', value: withMeta(p.value, meta) } };
    case 'statusUpdate':
      return { payload: { $case: 'statusUpdate', value: withMeta(p.value, meta) } };
    case 'artifactUpdate':
      return { payload: { $case: 'artifactUpdate', value: withMeta(p.value, meta) } };
  }
}

/** Task states after which a task changes no more (A2A v1.0 `TaskState`: completed, failed, canceled, rejected). */
const TERMINAL_STATES: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

/**
 * The `TASK_STATE_FAILED` status update that ends a stream which broke after its last event `last`
 * (the node's `jcp/error` `error`, e.g. `endpoint-failed`), or undefined when `last` already ended
 * its task (a terminal state) or names no task (a message): without it an A2A client saw the
 * stream end on a `WORKING` event, its task never finished.
 */
export function brokenStreamEnd(
  last: StreamResponse,
  error: { code: string; message: string },
  meta: Record<string, string>,
): StreamResponse | undefined {
  const p = last.payload;
  if (p === undefined || p.$case === 'message') return undefined;
  const state = p.$case === 'task' ? p.value.status?.state : p.$case === 'statusUpdate' ? p.value.status?.state : undefined;
  if (state !== undefined && TERMINAL_STATES.has(state)) return undefined;
  const taskId = p.$case === 'task' ? p.value.id : p.value.taskId;
  const update = TaskStatusUpdateEvent.fromJSON({
    taskId,
    contextId: p.value.contextId,
    status: endStatus('TASK_STATE_FAILED', `${error.code}: ${error.message}`, meta),
    metadata: meta,
  });
  return { payload: { $case: 'statusUpdate', value: update } };
}

/** The task id an event or reply names, or undefined. */
function taskIdOf(v: Task | Message | StreamResponse): string | undefined {
  if ('payload' in v) {
    const p = v.payload;
    if (p === undefined) return undefined;
    return p.$case === 'task' ? p.value.id : p.$case === 'message' ? p.value.taskId : p.value.taskId;
  }
  return 'status' in v ? v.id : (v as Message).taskId;
}

/** One agent's A2A request handler (the SDK's `A2ARequestHandler`): see the module comment. */
export class A2aFace implements A2ARequestHandler {
  readonly #agent: BridgeAgent;
  readonly #tasks = new Map<string, Route>();
  #base = 'http://127.0.0.1';
  readonly #secured: boolean;

  constructor(agent: BridgeAgent, secured: boolean) {
    this.#agent = agent;
    this.#secured = secured;
  }

  /** Sets the base URL the card names (`http://host:port`). */
  setBase(base: string): void {
    this.#base = base;
  }

  /** The skills this agent's grants permit (own chains, or `chain` alone). @throws A2A error `node-unreachable`. */
  async skills(chain?: readonly SignedGrant[]): Promise<BridgeSkill[]> {
    try {
      const node = await this.#agent.nodeTools();
      return skillCatalogue(chain === undefined ? this.#agent.chains : [chain], node);
    } catch (e) {
      throw a2aError(e);
    }
  }

  async getAgentCard(): Promise<AgentCard> {
    const skills = await this.skills();
    const iface = (path: string, protocolBinding: string) => ({
      url: `${this.#base}${path}`,
      protocolBinding,
      tenant: '',
      protocolVersion: A2A_PROTOCOL_VERSION,
    });
    return {
      name: this.#agent.name,
      description: `JCP bridge for ${this.#agent.did}: every task is a signed request decided by an enforcement node; replies carry jcp/receipt and jcp/budget_remaining_uj in their metadata.`,
      supportedInterfaces: [iface('/', 'JSONRPC'), iface('/rest', 'HTTP+JSON')],
      provider: undefined,
      version: BRIDGE_INFO.version,
      capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
      securitySchemes: this.#secured
        ? {
            bearer: {
              scheme: {
                $case: 'httpAuthSecurityScheme',
                value: { description: 'the bridge token of this agent', scheme: 'Bearer', bearerFormat: '' },
              },
            },
          }
        : {},
      securityRequirements: this.#secured ? [{ schemes: { bearer: { list: [] } } }] : [],
      defaultInputModes: ['text/plain', 'application/json'],
      defaultOutputModes: ['text/plain', 'application/json'],
      skills: skills.map((s) => AgentSkill.fromJSON(s.definition)),
      signatures: [],
    };
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new ExtendedAgentCardNotConfiguredError();
  }

  /** The route of a message: its skill (`metadata.skill`) under the chain it is sent with. */
  async #route(skill: unknown, delegated: readonly SignedGrant[] | undefined): Promise<Route> {
    const own = await this.skills();
    const list = delegated === undefined ? own : await this.skills(delegated);
    const chainOf = (s: BridgeSkill) => delegated ?? this.#agent.chains[s.chainIndex]!;
    if (skill === undefined) {
      if (list.length === 1) return { skill: list[0]!, chain: chainOf(list[0]!) };
      throw malformed(
        A2aErrorCodes.SKILL_REQUIRED,
        `name the skill in message.metadata.skill (one of ${list.map((s) => s.name).join(', ') || 'none'})`,
      );
    }
    const found = list.find((s) => s.name === skill);
    if (found !== undefined) return { skill: found, chain: chainOf(found) };
    if (delegated !== undefined && own.some((s) => s.name === skill))
      throw malformed(
        DelegationErrorCodes.RESOURCE_MISMATCH,
        `the delegated chain grants no skill ${JSON.stringify(skill)}; it is for another resource`,
      );
    throw malformed(A2aErrorCodes.UNKNOWN_SKILL, `no skill ${JSON.stringify(skill)} is granted to ${this.#agent.name}`);
  }

  /** A send's route and the request to forward (skill rewritten, delegation minted or taken). */
  async #prepare(params: SendMessageRequest): Promise<{ route: Route; out: SendMessageRequest; message: Message }> {
    const message = params.message;
    if (message === undefined) throw malformed(A2aErrorCodes.MESSAGE_REQUIRED, 'a send needs a message');
    if (message.parts.length === 0) throw malformed(A2aErrorCodes.PART_INVALID, 'a message needs at least one part');
    const empty = message.parts.findIndex((p) => p.content === undefined);
    if (empty >= 0) throw malformed(A2aErrorCodes.PART_INVALID, `part ${empty} has none of text, raw, url or data (an A2A v1.0 part)`);
    const ids: [string, string][] = [
      ['messageId', message.messageId],
      ['contextId', message.contextId],
      ['taskId', message.taskId],
      ...message.referenceTaskIds.map((id, i): [string, string] => [`referenceTaskIds[${i}]`, id]),
    ];
    const long = ids.find(([, id]) => typeof id === 'string' && id.length > A2A_MAX_ID_CHARS);
    if (long !== undefined)
      throw malformed(A2aErrorCodes.ID_TOO_LONG, `message.${long[0]} has ${long[1].length} characters (at most ${A2A_MAX_ID_CHARS})`);
    const meta: Record<string, unknown> = { ...(message.metadata ?? {}) };
    let delegated: SignedGrant[] | undefined;
    try {
      if (meta[DELEGATION_KEY] !== undefined) delegated = this.#agent.acceptDelegation(meta[DELEGATION_KEY]);
      delete meta[DELEGATION_KEY];
      const route = await this.#route(meta['skill'], delegated);
      if (meta[DELEGATE_KEY] !== undefined) {
        const seed = `${message.messageId}\u0000${JSON.stringify(meta[DELEGATE_KEY])}`;
        meta[DELEGATION_KEY] = encodeDelegation(await this.#agent.delegate(meta[DELEGATE_KEY], delegated, seed, this.#secured));
        delete meta[DELEGATE_KEY];
      }
      meta['skill'] = route.skill.action;
      return { route, out: { ...params, message: { ...message, metadata: meta } }, message };
    } catch (e) {
      throw a2aError(e);
    }
  }

  /** Sends one agent-task exchange. @throws the A2A error of a refusal before a decision. */
  async #exchange(
    route: Route,
    method: string,
    params: unknown,
    key: string,
    extra: { signal?: AbortSignal; onEvent?: (e: StreamResponse) => void } = {},
  ): Promise<Decided> {
    const x: Exchange = {
      kind: 'agent-task',
      name: route.skill.name,
      action: route.skill.action,
      resource: route.skill.resource,
      chain: route.chain,
      payloadText: JSON.stringify({ method, params }),
      // A message id names one message: its re-send replays even after the answer was delivered.
      ...(key.startsWith('a2a-message:') ? { keepOpen: true } : {}),
    };
    const onEvent = extra.onEvent;
    let d: Awaited<ReturnType<BridgeAgent['send']>>;
    try {
      d = await this.#agent.send(x, {
        mcpRequestId: key,
        idempotencyKey: key,
        ...(extra.signal !== undefined ? { signal: extra.signal } : {}),
        ...(onEvent !== undefined
          ? {
              onNotice: (n) => {
                if (n.method !== 'a2a/event') return;
                try {
                  onEvent(StreamResponse.fromJSON(n.params ?? {}));
                } catch {
                  // An event the SDK cannot read is dropped (it is data, §6).
                }
              },
            }
          : {}),
      });
    } catch (e) {
      throw a2aError(e);
    }
    if ('threshold' in d) {
      const text = (d.threshold.content?.[0] as { text?: string } | undefined)?.text ?? 'threshold-refused';
      throw new A2AError({ message: text, metadata: { 'jcp/error': String(d.threshold._meta?.['jcp/error'] ?? 'threshold-refused') } });
    }
    return d;
  }

  #remember(id: string | undefined, route: Route): void {
    if (id === undefined || id.length === 0 || id.length > A2A_MAX_ID_CHARS) return;
    this.#tasks.delete(id);
    this.#tasks.set(id, route);
    for (const k of this.#tasks.keys()) {
      if (this.#tasks.size <= MAX_TASKS) break;
      this.#tasks.delete(k);
    }
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const { route, out, message } = await this.#prepare(params);
    const d = await this.#exchange(route, 'SendMessage', SendMessageRequest.toJSON(out), `a2a-message:${message.messageId}`);
    if (d.decision.verdict === 'deny')
      return endedTask('TASK_STATE_REJECTED', `denied: ${d.decision.deny_reason}`, d.meta, message.contextId);
    const { reply, error } = replyOf(d);
    if (reply === undefined) {
      const meta = { ...d.meta, 'jcp/error': error!.code };
      return endedTask('TASK_STATE_FAILED', `${error!.code}: ${error!.message}`, meta, message.contextId);
    }
    const r = sendResult(reply);
    this.#remember(taskIdOf(r), route);
    return withMeta(r, d.meta);
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const { route, out, message } = await this.#prepare(params);
    yield* this.#stream(
      route,
      'SendStreamingMessage',
      SendMessageRequest.toJSON(out),
      `a2a-message:${message.messageId}`,
      message.contextId,
    );
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const route = await this.#taskRoute(params.id);
    yield* this.#stream(route, 'SubscribeToTask', SubscribeToTaskRequest.toJSON(params), `a2a-follow:${randomUUID()}`, '');
  }

  /** A streaming exchange: events in order, the last with the decision's metadata (see the module comment). */
  async *#stream(
    route: Route,
    method: string,
    params: unknown,
    key: string,
    contextId: string,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const events: StreamResponse[] = [];
    let wake: (() => void) | undefined;
    let outcome: { d: Decided } | { e: unknown } | undefined;
    const gone = new AbortController();
    // The HTTP client went away (or stopped reading): end the exchange, which closes its own
    // connection to the node, which closes the agent's stream (docs/a2a.md).
    const drop = (why: string) => {
      if (outcome === undefined) outcome = { e: new Error(why) };
      gone.abort();
      wake?.();
    };
    const clientGone = requestGone.getStore();
    const onClientGone = () => drop('the A2A client went away');
    if (clientGone?.aborted === true) onClientGone();
    clientGone?.addEventListener('abort', onClientGone, { once: true });
    void this.#exchange(route, method, params, key, {
      signal: gone.signal,
      onEvent: (e) => {
        if (events.length >= A2A_MAX_QUEUED_EVENTS) return drop(`the A2A client read none of ${A2A_MAX_QUEUED_EVENTS} queued events`);
        events.push(e);
        wake?.();
      },
    }).then(
      (d) => {
        outcome = { d };
        wake?.();
      },
      (e: unknown) => {
        outcome = { e };
        wake?.();
      },
    );
    let held: StreamResponse | undefined;
    try {
      for (;;) {
        for (let e = events.shift(); e !== undefined; e = events.shift()) {
          if (held !== undefined) yield held;
          held = e;
          this.#remember(taskIdOf(e), route);
        }
        if (outcome !== undefined) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
      if ('e' in outcome) {
        if (held !== undefined) yield held;
        throw outcome.e;
      }
      const d = outcome.d;
      if (d.decision.verdict === 'deny') {
        const t = endedTask('TASK_STATE_REJECTED', `denied: ${d.decision.deny_reason}`, d.meta, contextId);
        yield { payload: { $case: 'task', value: t } };
        return;
      }
      const { reply, error } = replyOf(d);
      const meta = error !== undefined ? { ...d.meta, 'jcp/error': error.code } : d.meta;
      if (held !== undefined) {
        yield eventWithMeta(held, meta);
        const end = error !== undefined ? brokenStreamEnd(held, error, meta) : undefined;
        if (end !== undefined) yield end;
      } else if (reply !== undefined) yield eventWithMeta(StreamResponse.fromJSON(reply), meta);
      else
        yield { payload: { $case: 'task', value: endedTask('TASK_STATE_FAILED', `${error!.code}: ${error!.message}`, meta, contextId) } };
    } finally {
      clientGone?.removeEventListener('abort', onClientGone);
      if (outcome === undefined) gone.abort();
    }
  }

  /** The route of a task this agent started, or (with one A2A resource) that resource's first skill. @throws TaskNotFoundError. */
  async #taskRoute(id: string): Promise<Route> {
    const known = this.#tasks.get(id);
    if (known !== undefined) return known;
    const skills = await this.skills();
    const resources = new Set(skills.map((s) => s.resource));
    if (resources.size === 1) return { skill: skills[0]!, chain: this.#agent.chains[skills[0]!.chainIndex]! };
    throw new TaskNotFoundError({
      message: `task ${JSON.stringify(id)} was not started through this bridge`,
      metadata: { 'jcp/error': 'task-not-found' },
    });
  }

  /** A follow-up on a task: its reply (a task) with metadata; a deny is an A2A error naming the reason. */
  async #followUp(route: Route, method: string, params: unknown): Promise<Record<string, unknown> & { meta: Record<string, string> }> {
    const d = await this.#exchange(route, method, params, `a2a-follow:${randomUUID()}`);
    if (d.decision.verdict === 'deny') throw new A2AError({ message: `denied: ${d.decision.deny_reason}`, metadata: d.meta });
    const { reply, error } = replyOf(d);
    if (reply === undefined)
      throw new A2AError({ message: `${error!.code}: ${error!.message}`, metadata: { ...d.meta, 'jcp/error': error!.code } });
    return { ...reply, meta: d.meta };
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    const { meta, ...r } = await this.#followUp(await this.#taskRoute(params.id), 'GetTask', GetTaskRequest.toJSON(params));
    return withMeta(Task.fromJSON('task' in r ? r['task'] : r), meta);
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    const { meta, ...r } = await this.#followUp(await this.#taskRoute(params.id), 'CancelTask', CancelTaskRequest.toJSON(params));
    return withMeta(Task.fromJSON('task' in r ? r['task'] : r), meta);
  }

  /** ListTasks to each A2A resource this agent may reach (its first granted skill), tasks concatenated. */
  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const skills = await this.skills();
    const out: ListTasksResponse = { tasks: [], nextPageToken: '', pageSize: 0, totalSize: 0 };
    const seen = new Set<string>();
    for (const s of skills) {
      if (seen.has(s.resource)) continue;
      seen.add(s.resource);
      const route = { skill: s, chain: this.#agent.chains[s.chainIndex]! };
      const { meta, ...r } = await this.#followUp(route, 'ListTasks', ListTasksRequest.toJSON(params));
      const tasks = Array.isArray(r['tasks']) ? r['tasks'].map((t) => withMeta(Task.fromJSON(t), meta)) : [];
      for (const t of tasks) this.#remember(t.id, route);
      out.tasks.push(...tasks);
      out.totalSize += typeof r['totalSize'] === 'number' ? r['totalSize'] : tasks.length;
      out.pageSize = Math.max(out.pageSize, typeof r['pageSize'] === 'number' ? r['pageSize'] : tasks.length);
      if (seen.size === 1 && typeof r['nextPageToken'] === 'string') out.nextPageToken = r['nextPageToken'];
    }
    if (seen.size > 1) out.nextPageToken = '';
    return out;
  }

  async createTaskPushNotificationConfig(): Promise<never> {
    throw new PushNotificationNotSupportedError();
  }
  async getTaskPushNotificationConfig(): Promise<never> {
    throw new PushNotificationNotSupportedError();
  }
  async listTaskPushNotificationConfigs(): Promise<never> {
    throw new PushNotificationNotSupportedError();
  }
  async deleteTaskPushNotificationConfig(): Promise<never> {
    throw new PushNotificationNotSupportedError();
  }
}

/**
 * The open-request counters behind {@link A2aLimits}. At an agent's `perAgent` bound, a newcomer
 * from an address holding fewer of that agent's requests than the address holding the most (by
 * more than one) takes the place of that address's oldest request still sending its body (nothing
 * of it has reached the agent or the node): many loopback addresses trickling bodies cannot keep
 * the others out (2026-12-07: two addresses at 32 each held all 64 of an agent's).
 */
export class OpenRequests {
  readonly #perAgent = new Map<BridgeAgent, number>();
  /** Open requests by agent and client address (`peerAddress`), joined by a NUL. */
  readonly #perPeer = new Map<string, number>();
  /** Requests still sending their body, by agent, oldest first: their address key and what frees their place. */
  readonly #reading = new Map<BridgeAgent, Map<ServerResponse, { key: string; release: () => void }>>();
  #total = 0;
  readonly limits: A2aLimits;
  constructor(limits: A2aLimits) {
    this.limits = limits;
  }
  get total(): number {
    return this.#total;
  }
  /**
   * Counts `res` as open for `agent` and the client address `peer` until it closes, as sending
   * its body until {@link bodyDone}; or says which bound refuses it.
   */
  hold(agent: BridgeAgent, peer: string, res: ServerResponse): [number, string, number] | undefined {
    const key = `${agent.did}\u0000${peer}`;
    const theirs = this.#perPeer.get(key) ?? 0;
    if (theirs >= this.limits.perPeer) return [429, A2aErrorCodes.REQUEST_LIMIT_PEER, this.limits.perPeer];
    if ((this.#perAgent.get(agent) ?? 0) >= this.limits.perAgent && !this.#evictFor(agent, theirs))
      return [429, A2aErrorCodes.REQUEST_LIMIT_AGENT, this.limits.perAgent];
    if (this.#total >= this.limits.total) return [503, A2aErrorCodes.REQUEST_LIMIT_TOTAL, this.limits.total];
    this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 0) + 1);
    this.#perPeer.set(key, theirs + 1);
    this.#total++;
    const reading = this.#reading.get(agent) ?? new Map<ServerResponse, { key: string; release: () => void }>();
    this.#reading.set(agent, reading);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      reading.delete(res);
      this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 1) - 1);
      const left = (this.#perPeer.get(key) ?? 1) - 1;
      if (left <= 0) this.#perPeer.delete(key);
      else this.#perPeer.set(key, left);
      this.#total--;
    };
    reading.set(res, { key, release });
    res.once('close', release);
    return undefined;
  }

  /** `res`'s body has been read whole: it may no longer be evicted. */
  bodyDone(agent: BridgeAgent, res: ServerResponse): void {
    this.#reading.get(agent)?.delete(res);
  }

  /**
   * Closes the oldest request still sending its body of the address holding the most of `agent`'s
   * requests, if that address holds more than `held` + 1 (the newcomer's address holds `held`):
   * true when one was closed (its count drops as it closes, at once).
   */
  #evictFor(agent: BridgeAgent, held: number): boolean {
    const reading = this.#reading.get(agent);
    if (reading === undefined) return false;
    let victim: [ServerResponse, () => void] | undefined;
    let most = held + 1;
    for (const [res, { key, release }] of reading) {
      const n = this.#perPeer.get(key) ?? 0;
      if (n > most) {
        most = n;
        victim = [res, release];
      }
    }
    if (victim === undefined) return false;
    victim[1]();
    victim[0].req.socket.destroy();
    return true;
  }
}

/**
 * The HTTP request being answered, as a signal aborted when its response closes (the client went
 * away, or the answer is done): a stream exchange ends with it, so a client that disconnects
 * holds no stream at the bridge or the node.
 */
const requestGone = new AsyncLocalStorage<AbortSignal>();

/** Most stream events queued for an HTTP client that does not read them; past it the stream is dropped. */
export const A2A_MAX_QUEUED_EVENTS = 1024;

/**
 * The index of the first part that is not an object in a send's `message.parts` (JSON-RPC
 * `params.message`, or HTTP+JSON's body `message`), else undefined: the SDK would fail reading it
 * with an internal error and no stable code.
 */
function partNotObject(body: unknown): number | undefined {
  const o = body as { params?: { message?: { parts?: unknown } }; message?: { parts?: unknown } } | null;
  const parts = o?.params?.message?.parts ?? o?.message?.parts;
  if (!Array.isArray(parts)) return undefined;
  const i = parts.findIndex((p) => typeof p !== 'object' || p === null || Array.isArray(p));
  return i < 0 ? undefined : i;
}

/** One agent's Express router: its card, its HTTP+JSON interface at `/rest`, its JSON-RPC interface at `/`. */
function agentRouter(face: A2aFace): express.Router {
  const router = express.Router();
  const userBuilder = UserBuilder.noAuthentication;
  router.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: face, cache: { maxAge: 0 } }));
  router.use('/rest', restHandler({ requestHandler: face, userBuilder }));
  router.post('/', jsonRpcHandler({ requestHandler: face, userBuilder }));
  return router;
}

/**
 * Serves `agents` as A2A agents at `http://host:port` (see the module comment).
 * @throws BridgeConfigError as serveBridgeHttp (`remote-listen-refused`, `no-agents`,
 *   `token-required`, `token-duplicate`, `origin-invalid`), `limits-invalid`; the listen error as it is.
 */
export async function serveBridgeA2a(o: A2aOptions): Promise<A2aBridge> {
  const keyed: KeyedAgent[] = checkedAgents(o);
  const limits = { ...DEFAULT_A2A_LIMITS, ...o.limits };
  for (const [k, v] of Object.entries(limits))
    if (!Number.isSafeInteger(v) || v < 1)
      throw new BridgeConfigError('limits-invalid', `A2A limit ${k}: expected a whole number ≥ 1, got ${v}`);
  const open = new OpenRequests(limits);
  const faces = new Map(keyed.map((k) => [k.agent, new A2aFace(k.agent, k.hash !== undefined)]));
  const routers = new Map([...faces].map(([a, f]) => [a, agentRouter(f)]));
  const extraOrigins = (o.allowedOrigins ?? []).map(originOf);
  let hosts: Set<string> | undefined;
  let origins = new Set<string>();
  const app = express();
  const parseBody = express.json({ limit: MAX_BODY_BYTES, type: ['application/json', 'application/a2a+json'], strict: false });
  app.disable('x-powered-by');
  app.use((req, res, next) => {
    const bad = headerRefusal(req, hosts, origins, ['application/json', 'application/a2a+json']);
    if (bad !== undefined)
      return refuse(res, bad[0], bad[1], bad[2], bad[2] === HttpErrorCodes.PAYLOAD_TOO_LARGE ? { limit: MAX_BODY_BYTES } : {});
    const agent = authenticate(keyed, req);
    if (agent === undefined) return reply(res, 401, UNAUTHORIZED_MESSAGE, HttpErrorCodes.UNAUTHORIZED, BEARER_CHALLENGE);
    const over = open.hold(agent, peerAddress(req.socket.remoteAddress), res);
    if (over !== undefined)
      return refuse(res, over[0], `too many open requests (${over[1]}, limit ${over[2]}); retry later`, over[1], { limit: over[2] });
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    // The body is parsed here up to MAX_BODY_BYTES (the SDK's own parser, with Express's 100 KB
    // default, then sees it parsed and skips).
    return requestGone.run(gone.signal, () =>
      parseBody(req, res, (err?: unknown) => {
        open.bodyDone(agent, res);
        if (err) return next(err);
        const odd = partNotObject(req.body);
        if (odd !== undefined)
          return refuse(res, 400, `part-invalid: part ${odd} is not an object (an A2A v1.0 part)`, A2aErrorCodes.PART_INVALID);
        return routers.get(agent)!(req, res, next);
      }),
    );
  });
  app.use((_req: express.Request, res: express.Response) =>
    reply(res, 404, 'not found: the agent card is at /.well-known/agent-card.json', HttpErrorCodes.NOT_FOUND),
  );
  // A body the parser refused (chunked past the cap, not JSON): the stable JSON error, never
  // Express's HTML page with its stack trace.
  app.use((err: { type?: string; status?: number }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    if (res.headersSent) return void res.destroy();
    if (err.type === 'entity.too.large')
      return refuse(res, 413, `payload too large (over ${MAX_BODY_BYTES} bytes)`, HttpErrorCodes.PAYLOAD_TOO_LARGE, {
        limit: MAX_BODY_BYTES,
      });
    if (err.type === 'entity.parse.failed') return refuse(res, 400, 'the body is not JSON', A2aErrorCodes.JSON_INVALID);
    return refuse(
      res,
      err.status !== undefined && err.status >= 400 && err.status < 500 ? err.status : 500,
      'the request failed',
      HttpErrorCodes.INTERNAL,
    );
  });
  const { server: http } = createBoundedServer(app, o.connectionLimits, BRIDGE_HTTP_LIMITS);
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  const shown = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host;
  if (isLoopback(o.host)) hosts = new Set([...loopbackHosts(shown, port), ...(o.allowedHosts ?? []).map((h) => h.toLowerCase())]);
  origins = new Set([`http://${shown}:${port}`.toLowerCase(), ...[...(hosts ?? [])].map((h) => `http://${h}`), ...extraOrigins]);
  const url = `http://${shown}:${port}`;
  for (const f of faces.values()) f.setBase(url);
  return {
    url,
    port,
    open: () => open.total,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
