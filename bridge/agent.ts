/**
 * One agent behind the bridge: its key, its grant chains, its node connection and journal. Turns
 * an MCP `tools/call` into a caller-signed jcp/1 request (spec §11; frame `tool-call` / `control`,
 * §6; payload the arguments' JSON text, `nonce` the journal's random nonce) and the node's answer
 * into an MCP `CallToolResult`:
 *
 * - allow: the upstream's result exactly as the node returned it (content of any type,
 *   `structuredContent`, `isError`, its own `_meta` keys), with the bridge's `_meta` keys added;
 * - deny: `isError: true`, one text item `denied: <deny reason>` (the spec's string, §7), and the
 *   same `_meta` keys (the deny is sealed: its receipt is there);
 * - no decision (the node answered `{error}`, the node is unreachable, bad input): an MCP error
 *   (`McpError`) with `data.code`, the stable code; nothing was debited.
 *
 * `_meta` keys on every decided result: `jcp/verdict`, `jcp/deny_reason` (deny only),
 * `jcp/receipt` (receipt id), `jcp/receipt_cose` (the COSE_Sign1 receipt, hex), `jcp/request_id`,
 * `jcp/grant_id`, `jcp/cost_uj`, `jcp/budget_remaining_uj`, `jcp/budget_uj` (µJ as decimal
 * strings: they can pass 2^53).
 */
// v1 SDK: the agent's errors go to the 2025 face's v1 server (docs/bridge.md, why the 2025 face stays on it).
import { createHmac, hkdfSync } from 'node:crypto';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import {
  contentId,
  type ContentId,
  type Cost,
  DEFAULT_FRAME_CAP,
  type Did,
  encodeWireRequest,
  FRAME_HEADER_BYTES,
  fromHex,
  grantId,
  openReceipt,
  parseDid,
  receiptId,
  requestIdOf,
  sign,
  type SignedGrant,
  toHex,
  verify,
  type WireRequest,
  wireRequestSigningBytes,
} from '../core/index.ts';
import { type ClientSigner, type JcpClient, type McpNotification, WireErrorReply } from '../client/index.ts';
import { type BridgeTool, type McpToolDef, type NodeResourceTools, catalogue } from './catalogue.ts';
import { type AnsweredScope, type Journal, JournalError, saltText } from './journal.ts';
import { DelegationError, DelegationErrorCodes, DelegationGate, mintDelegation, readDelegateRequest } from './delegation.ts';
import { type ThresholdCaller, thresholdToolError } from './threshold.ts';

/** Stable codes of the bridge's MCP errors (`error.data.code`). */
export const BridgeErrorCodes = {
  /** The tool is not in this agent's catalogue (not granted, or not served by the node). */
  UNKNOWN_TOOL: 'unknown-tool',
  /** `arguments` is not a JSON object. */
  ARGUMENTS_INVALID: 'arguments-invalid',
  /** `tools/call` whose `params` is not an object or whose `name` is not a string. */
  PARAMS_INVALID: 'params-invalid',
  /** A request (it has an id) that is not a JSON-RPC message the bridge can read (JSON-RPC -32600). */
  REQUEST_INVALID: 'request-invalid',
  /** A request's `_meta.progressToken` is neither a string nor a number (MCP "Progress"). */
  PROGRESS_TOKEN_INVALID: 'progress-token-invalid',
  /** The signed request would exceed the node's frame cap. */
  ARGUMENTS_TOO_LARGE: 'frame-too-large',
  /** The node could not be reached; the call may be re-sent (it replays, §11). */
  NODE_UNREACHABLE: 'node-unreachable',
  /** The node's answer could not be read. */
  BAD_REPLY: 'bad-reply',
  /**
   * A re-send of a journaled call was refused `clock-skew` (its original `now` is past the node's
   * `max_skew_s`): the node may have decided (and debited) the original, so the call is neither
   * closed nor signed afresh; its re-sends get this until `--replay-window-s` passes.
   */
  RESULT_UNKNOWN: 'result-unknown',
  /** The shared call journal (`--journal-nats`) did not answer in time: nothing was signed or sent, nothing debited. */
  JOURNAL_UNAVAILABLE: 'journal-unavailable',
  /** The shared call journal's bucket is at its byte bound: nothing was signed or sent, nothing debited. */
  JOURNAL_FULL: 'journal-full',
} as const;

/** Options of {@link BridgeAgent}. */
export interface AgentOptions {
  /** For logs and the budget resource. */
  readonly name: string;
  /** The agent's key (an Actor, or a did with a signing function); `client` must sign with it. */
  readonly signer: ClientSigner;
  /** The agent's grant chains, root first in each; the leaf is the grant exercised. */
  readonly chains: readonly (readonly SignedGrant[])[];
  /** The node client, connected with `signer` as its signer. */
  readonly client: JcpClient;
  /**
   * The journal that fixes `now` and the nonce for re-sent calls: a {@link CallJournal} (one
   * process), or a journal replicas share (bridge/journal-nats.ts), whose failures refuse the call
   * `journal-unavailable` / `journal-full` before anything is signed.
   */
  readonly journal: Journal;
  /** Cost claimed per call, µJ (default 0: the node prices at no less than its estimate, §5). */
  readonly costUj?: bigint;
  /** Per-tool cost, µJ, by the tool's listed name; overrides `costUj`. */
  readonly toolCostsUj?: ReadonlyMap<string, bigint>;
  /** The node's frame cap, bytes (default 1,048,576, docs/wire.md). */
  readonly frameCap?: number;
  /** The clock for `now`, unix seconds (default wall clock). */
  readonly clockS?: () => number;
  /**
   * The chains' subject is this FROST group (spec §2.2): `signer` (and `client`'s signer) is
   * `{did: threshold.did, sign: threshold.sign}`, and a call whose signing session fails (holders
   * refused, too few answered) is an MCP tool error result naming who refused and why
   * (bridge/threshold.ts), never sent to the node.
   */
  readonly threshold?: Pick<ThresholdCaller, 'did' | 'explain'>;
  /**
   * Delegators (did:key) whose delegated chains this agent accepts (`--accept-delegation-from`,
   * bridge/delegation.ts); absent or empty: every handed chain is refused.
   */
  readonly acceptDelegationFrom?: readonly Did[];
  /**
   * The keys (did:key) this agent may delegate to (`--delegate-to`; `jcp/delegate`'s `to`,
   * docs/a2a.md). Absent: any key when the request came through a face with a token (the holder
   * of the token is the agent), none through a face without one; see {@link BridgeAgent.delegate}.
   */
  readonly delegateTo?: readonly Did[];
}

/** What the budget resource reports per grant (µJ as decimal strings). */
export interface GrantBudget {
  readonly grant_id: ContentId;
  readonly resource: ContentId;
  readonly resource_name?: string;
  readonly budget_uj: string;
  /** Last remaining budget a receipt reported to this bridge; null before the first call. */
  readonly remaining_uj: string | null;
  /** The receipt that reported it (id and log seq). */
  readonly as_of?: { readonly receipt: ContentId; readonly seq: number };
  readonly tools: readonly string[];
}

/** A call's context from the MCP side. */
export interface CallContext {
  /** The MCP request id (JSON-RPC id) of the `tools/call`. */
  readonly mcpRequestId: string | number;
  /** `_meta["jcp/idempotency_key"]` of the call, when the client gave one. */
  readonly idempotencyKey?: string;
  /** Aborted when the client cancelled or went away. */
  readonly signal?: AbortSignal;
  /**
   * The MCP session the call came in on (Streamable HTTP's `Mcp-Session-Id`; absent over stdio).
   * MCP request ids are per session: the same call with the same id from another session while
   * this process still has the first in flight for a client that is still waiting is another call.
   */
  readonly sessionId?: string;
  /**
   * Gets each MCP notification (progress, logging) the upstream sent during the call, in order,
   * before the call resolves (the node's `notice` messages; only from a node that lists tools,
   * and only on allow). Progress carries the node's progress token: the caller substitutes its own.
   */
  readonly onNotice?: (notification: McpNotification) => void;
  /**
   * The chain to exercise instead of the agent's own: a delegated chain handed to this agent and
   * accepted (bridge/delegation.ts), whose leaf names this agent. Its leaf id is part of the call key.
   */
  readonly chain?: readonly SignedGrant[];
  /**
   * A `jcp/delegation` value handed with the call (MCP `_meta`): the chain to exercise, once
   * accepted ({@link BridgeAgent.acceptDelegation}); the tool is looked up in what it grants.
   */
  readonly delegation?: unknown;
  /**
   * MCP multi round-trip material (MCP 2026-07-28, SEP-2322; docs/bridge.md "Multi round-trip
   * calls"): the client's declared capabilities, and on a continuation its `inputResponses` and the
   * `requestState` it was handed (the node's continuation token). Sent as the request's `input`
   * (docs/wire.md) when it holds anything; a call without it signs the same bytes as before.
   */
  readonly input?: CallInput;
}

/** The MCP client's multi round-trip material for one call ({@link CallContext.input}). */
export interface CallInput {
  /** The client's capabilities (only `sampling`, `elicitation`, `roots` are sent on). */
  readonly capabilities?: Record<string, unknown>;
  /** The client's `inputResponses`. */
  readonly responses?: Record<string, unknown>;
  /** The `requestState` of the input_required result the client answers. */
  readonly state?: string;
}

/**
 * The `input` text of a call (docs/wire.md `request.input`), or undefined when there is nothing to
 * send: no `sampling`/`elicitation`/`roots` capability, no responses, no state.
 */
export function inputText(input: CallInput | undefined): string | undefined {
  if (input === undefined) return undefined;
  const caps: Record<string, unknown> = {};
  for (const k of ['sampling', 'elicitation', 'roots']) {
    const c = input.capabilities?.[k];
    if (c !== undefined && c !== null) caps[k] = c;
  }
  const o = {
    ...(Object.keys(caps).length > 0 ? { capabilities: caps } : {}),
    ...(input.responses !== undefined ? { responses: input.responses } : {}),
    ...(input.state !== undefined ? { state: input.state } : {}),
  };
  return Object.keys(o).length === 0 ? undefined : JSON.stringify(o);
}

/** One jcp/1 exchange the bridge signs for its agent ({@link BridgeAgent.send}). */
export interface Exchange {
  /** `tool-call` (MCP) or `agent-task` (A2A, docs/a2a.md). */
  readonly kind: 'tool-call' | 'agent-task';
  /** The listed name (tool or skill): picks the cost in `toolCostsUj`. */
  readonly name: string;
  /** The frame's action: the upstream tool's name, or the agent's skill id. */
  readonly action: string;
  readonly resource: ContentId;
  /** The chain exercised (root first). */
  readonly chain: readonly SignedGrant[];
  /** The payload's text (tool arguments' JSON; for an agent task `{"method", "params"}`). */
  readonly payloadText: string;
  /** The request's `input` text ({@link inputText}), or undefined. Part of the call key. */
  readonly input?: string;
  /**
   * Keep the call open in the journal after its answer was delivered (until the replay window
   * passes): for keys that are unique per call (an A2A `messageId`), so a re-send of a call that
   * was answered is still the same request, replayed by the node, never a second debit.
   */
  readonly keepOpen?: boolean;
}

/** A decided exchange: the decision, the metadata keys (see the module comment) and the node's result (allow). */
export interface Decided {
  readonly decision: { readonly verdict: 'allow' | 'deny'; readonly deny_reason?: string };
  /** `jcp/verdict`, `jcp/deny_reason`, `jcp/receipt`, `jcp/receipt_cose`, `jcp/request_id`, `jcp/grant_id`, `jcp/cost_uj`, `jcp/budget_remaining_uj`, `jcp/budget_uj`. */
  readonly meta: Record<string, string>;
  /** On allow: the node's result, a JSON object (a CallToolResult, `{"agent-reply": …}`, or `{jcp_error}`). */
  readonly result?: Record<string, unknown>;
  /** On allow, when the result is not a JSON object: why. */
  readonly unreadable?: string;
}

/** An MCP `CallToolResult` (loose: upstream fields are kept as they are). */
export type ToolResult = Record<string, unknown> & { content?: unknown[]; isError?: boolean; _meta?: Record<string, unknown> };

const enc = new TextEncoder();
/** How long an undelivered call's signed request is kept for a re-send, ms (twice the default replay window). */
const SIGNED_KEEP_MS = 600_000;
const dec = new TextDecoder('utf-8', { fatal: true });

/**
 * The secret an agent's bridges key their shared journal's call keys with: HKDF-SHA256 (RFC 5869)
 * of the agent's 32-byte Ed25519 seed, info `jcp-bridge-journal-key/v1`, 32 bytes. Every replica
 * holding the agent's key derives the same one; a reader of the bucket without it cannot confirm
 * guessed arguments (docs/bridge.md "Two MCP eras on the same endpoints (bridge/modern.ts)", its paragraph "Who may write the bucket").
 */
export function journalSecret(seed: Uint8Array): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', seed, new Uint8Array(0), 'jcp-bridge-journal-key/v1', 32));
}

/** A call key as a shared journal sees it: HMAC-SHA256 (RFC 2104) of `callKey` under the agent's {@link journalSecret}, hex. */
export function keyedCallKey(secret: Uint8Array, callKey: string): string {
  return createHmac('sha256', secret).update(callKey).digest('hex');
}

/**
 * A coded MCP error whose message starts with the stable code. `McpError`'s constructor prefixes
 * `MCP error <n>: `, which the SDK's server would send on as the JSON-RPC message (and the client
 * prefixes again); the message is set back to `<code>: <message>`.
 */
export function mcpError(code: ErrorCode, stable: string, message: string): McpError {
  const e = new McpError(code, `${stable}: ${message}`, { code: stable });
  Object.defineProperty(e, 'message', { value: `${stable}: ${message}`, writable: true, configurable: true, enumerable: false });
  return e;
}

/**
 * The µJ the node credited back for an allowed call whose upstream never answered: the node's
 * `endpoint-unavailable` result names the refund and the receipt it reverses (`jcp_error`
 * `refunded_uj`, `receipt_seq`, decimal strings; node/enforcer.ts), and a reversal refunds the
 * receipt's whole `cost_uj` (docs/node.md "Endpoints and results"). 0 for any other result, or one whose figures do not
 * match the receipt (`costUj`, `seq`).
 */
function refundOf(upstream: ToolResult, costUj: bigint, seq: number): bigint {
  const e = upstream['jcp_error'];
  if (typeof e !== 'object' || e === null) return 0n;
  const { code, refunded_uj, receipt_seq } = e as Record<string, unknown>;
  return code === 'endpoint-unavailable' && refunded_uj === costUj.toString() && receipt_seq === String(seq) ? costUj : 0n;
}

/**
 * The value of a journal step that may answer at once or later ({@link Journal}); a
 * {@link JournalError} becomes the MCP error of its code (nothing was signed or sent).
 */
async function settled<T>(step: () => T | Promise<T>): Promise<T> {
  try {
    const v = step();
    return v instanceof Promise ? await v : v;
  } catch (e) {
    if (e instanceof JournalError) throw mcpError(ErrorCode.InternalError, e.code, e.message.slice(e.code.length + 2));
    throw e;
  }
}

/**
 * Milliseconds a bridge agent reuses the node's tool list ({@link BridgeAgent.nodeTools}): 2 s, so
 * an agent asks the node at most once every 2 s however many requests it gets, far within the
 * node's abuse refill (20 tokens/s per address); a tool an upstream adds shows within 2 s.
 */
export const NODE_TOOLS_MAX_AGE_MS = 2000;

/** See the module comment. */
export class BridgeAgent {
  readonly name: string;
  readonly did: Did;
  readonly #o: AgentOptions;
  readonly #budgets = new Map<ContentId, { remaining: bigint; receipt: ContentId; seq: number }>();
  /** Whether the node answers `list_tools` (and so `notify`); undefined until asked. */
  #nodeListsTools: boolean | undefined;
  #catalogue: BridgeTool[] | undefined;
  /** Calls in flight in this process, by call key: the session that sent each and its signal. */
  readonly #inflight = new Map<ContentId, { session: string | undefined; signal: AbortSignal | undefined }>();
  /**
   * Signed requests of open calls, by call key: a re-send sends the same bytes. An Ed25519 key
   * signs the same fields the same way (RFC 8032), but a FROST signature is randomized (RFC 9591
   * nonces), so a re-signed threshold request would be another request (§11 request id).
   */
  readonly #signed = new Map<ContentId, { req: WireRequest; atMs: number }>();

  readonly #gate: DelegationGate;
  /** The agent's journal secret ({@link journalSecret}): Ed25519 key holders only, not a threshold group. */
  readonly #journalSecret: Uint8Array | undefined;

  constructor(o: AgentOptions) {
    this.#o = o;
    this.#journalSecret = o.threshold === undefined && 'key' in o.signer ? journalSecret(o.signer.key.seed) : undefined;
    this.#gate = new DelegationGate({ self: o.signer.did, acceptFrom: o.acceptDelegationFrom ?? [] });
    this.name = o.name;
    this.did = o.signer.did;
  }

  /** The node's tool list as last fetched, and when (performance.now() ms). */
  #listed: { readonly atMs: number; readonly list: NodeResourceTools[] | undefined } | undefined;
  /** The fetch of the node's tool list in flight, shared by every caller that needs it meanwhile. */
  #listing: Promise<NodeResourceTools[] | undefined> | undefined;

  /**
   * The node's tool list (`{list_tools: {}}` → `{tool_list}`, docs/wire.md), or undefined when
   * the node predates the message (it answers `unknown-message`, or `schema` from older nodes):
   * then the granted actions are listed, and requests carry no `notify`. A list fetched less than
   * {@link NODE_TOOLS_MAX_AGE_MS} ago is reused, and callers that come while one is fetched share
   * it: every A2A request, agent-card fetch and MCP `tools/list` needs the list, and the node
   * charges each `tool_list` to the bridge's address, so without this a stranger fetching the
   * card in a loop had every bridge on the host refused `rate-limited` (2026-12-07). A failed
   * fetch is not kept.
   * @throws McpError `node-unreachable`, or the node's error code.
   */
  async nodeTools(): Promise<NodeResourceTools[] | undefined> {
    if (this.#nodeListsTools === false) return undefined;
    const listed = this.#listed;
    if (listed !== undefined && performance.now() - listed.atMs < NODE_TOOLS_MAX_AGE_MS) return listed.list;
    this.#listing ??= this.#fetchNodeTools().finally(() => {
      this.#listing = undefined;
    });
    return await this.#listing;
  }

  async #fetchNodeTools(): Promise<NodeResourceTools[] | undefined> {
    try {
      const atMs = performance.now();
      const list = await this.#o.client.listTools();
      this.#nodeListsTools = true;
      const tools = list.map((r) => {
        // `kind`/`skills`: A2A agents behind the node (docs/a2a.md); read loosely from older clients' types.
        const a2a = r as { kind?: unknown; skills?: unknown };
        const skills = typeof a2a.skills === 'string' ? (JSON.parse(a2a.skills) as unknown) : a2a.skills;
        return {
          name: r.name,
          resource: r.resource,
          tools: r.tools.filter((t): t is McpToolDef => typeof t['name'] === 'string'),
          ...(a2a.kind === 'a2a' ? { kind: 'a2a' as const } : {}),
          ...(Array.isArray(skills) ? { skills: skills.filter((k): k is McpToolDef => typeof k?.['id'] === 'string') } : {}),
        };
      });
      this.#listed = { atMs, list: tools };
      return tools;
    } catch (e) {
      if (e instanceof WireErrorReply) {
        if (e.code === 'unknown-message' || e.code === 'schema') {
          this.#nodeListsTools = false;
          return undefined;
        }
        throw mcpError(ErrorCode.InternalError, e.code, e.message.slice(e.code.length + 2));
      }
      throw mcpError(ErrorCode.InternalError, BridgeErrorCodes.NODE_UNREACHABLE, (e as Error).message);
    }
  }

  /** Refreshes and returns the catalogue (see bridge/catalogue.ts). @throws McpError as {@link nodeTools}. */
  async tools(): Promise<BridgeTool[]> {
    this.#catalogue = catalogue(this.#o.chains, await this.nodeTools());
    return this.#catalogue;
  }

  /** The agent's own grant chains, root first in each. */
  get chains(): readonly (readonly SignedGrant[])[] {
    return this.#o.chains;
  }

  /** The budget of each leaf grant as this bridge last saw it (see {@link GrantBudget}). */
  async budgets(): Promise<GrantBudget[]> {
    const tools = this.#catalogue ?? (await this.tools().catch(() => [] as BridgeTool[]));
    const out: GrantBudget[] = [];
    const seen = new Set<ContentId>();
    for (const chain of this.#o.chains) {
      const leaf = chain[chain.length - 1];
      if (leaf === undefined) continue;
      const id = grantId(leaf.grant);
      if (seen.has(id)) continue;
      seen.add(id);
      const b = this.#budgets.get(id);
      const mine = tools.filter((t) => this.#o.chains[t.chainIndex] === chain);
      const name = mine[0]?.resourceName;
      out.push({
        grant_id: id,
        resource: leaf.grant.capability.resource,
        ...(name !== undefined ? { resource_name: name } : {}),
        budget_uj: leaf.grant.budget_uj.toString(),
        remaining_uj: b === undefined ? null : b.remaining.toString(),
        ...(b !== undefined ? { as_of: { receipt: b.receipt, seq: b.seq } } : {}),
        tools: mine.map((t) => t.name),
      });
    }
    return out;
  }

  /**
   * Calls tool `name` (a listed name) with `args` through the node.
   * @returns the tool's result (allow) or a sealed deny as an `isError` result, with `_meta`.
   * @throws McpError (InvalidParams) `unknown-tool`, `arguments-invalid`, `frame-too-large`;
   *   (InternalError) `node-unreachable`, `bad-reply`, `result-unknown` (a re-send refused
   *   `clock-skew`: the entry stays open), or the node's own error code (no decision).
   */
  async call(name: string, args: unknown, ctx: CallContext): Promise<ToolResult> {
    if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
      throw mcpError(ErrorCode.InvalidParams, BridgeErrorCodes.ARGUMENTS_INVALID, 'tools/call arguments must be a JSON object');
    }
    const delegated = ctx.delegation === undefined ? undefined : this.acceptDelegation(ctx.delegation);
    const tool = delegated === undefined ? await this.#tool(name) : await this.#delegatedTool(name, delegated);
    const argsText = JSON.stringify(args ?? {});
    const chain = delegated ?? this.#o.chains[tool.chainIndex]!;
    const input = inputText(ctx.input);
    const x: Exchange = {
      kind: 'tool-call',
      name: tool.name,
      action: tool.action,
      resource: tool.resource,
      chain,
      payloadText: argsText,
      ...(input !== undefined ? { input } : {}),
    };
    const d = await this.send(x, { ...ctx, ...(delegated !== undefined ? { chain: delegated } : {}) });
    if ('threshold' in d) return d.threshold;
    return this.#toResult(d);
  }

  /** The listed tool `name`. @throws McpError `unknown-tool`. */
  async #tool(name: string): Promise<BridgeTool> {
    let tool = this.#catalogue?.find((t) => t.name === name);
    if (tool === undefined) tool = (await this.tools()).find((t) => t.name === name);
    if (tool === undefined) {
      throw mcpError(ErrorCode.InvalidParams, BridgeErrorCodes.UNKNOWN_TOOL, `no tool ${JSON.stringify(name)} is granted to ${this.name}`);
    }
    return tool;
  }

  /**
   * Tool `name` as the delegated `chain` grants it (its leaf's resource and actions, named by the
   * catalogue rule over that chain alone). @throws McpError `delegation-resource-mismatch` (the tool
   * is this agent's on another resource than the chain's), `unknown-tool`.
   */
  async #delegatedTool(name: string, chain: readonly SignedGrant[]): Promise<BridgeTool> {
    const node = await this.nodeTools();
    const tool = catalogue([chain], node).find((t) => t.name === name);
    if (tool !== undefined) return tool;
    const leaf = chain[chain.length - 1]!.grant;
    const elsewhere =
      (this.#catalogue ?? (await this.tools())).find((t) => t.name === name)?.resource ??
      node?.find((r) => r.resource !== leaf.capability.resource && r.tools.some((t) => t.name === name))?.resource;
    if (elsewhere !== undefined && elsewhere !== leaf.capability.resource) {
      throw mcpError(
        ErrorCode.InvalidParams,
        DelegationErrorCodes.RESOURCE_MISMATCH,
        `the delegated grant ${grantId(leaf)} is for resource ${leaf.capability.resource}; tool ${JSON.stringify(name)} is on ${elsewhere}`,
      );
    }
    throw mcpError(
      ErrorCode.InvalidParams,
      BridgeErrorCodes.UNKNOWN_TOOL,
      `the delegated grant ${grantId(leaf)} grants no tool ${JSON.stringify(name)}`,
    );
  }

  /**
   * The chain a `jcp/delegation` value hands this agent, checked (bridge/delegation.ts), optionally
   * for `resource`. @throws McpError (InvalidParams) with the delegation's stable code.
   */
  acceptDelegation(text: unknown, resource?: ContentId): SignedGrant[] {
    try {
      return this.#gate.accept(text, resource);
    } catch (e) {
      if (e instanceof DelegationError) throw mcpError(ErrorCode.InvalidParams, e.code, e.message.slice(e.code.length + 2));
      throw e;
    }
  }

  /**
   * Mints the child grant `request` asks for (a `jcp/delegate` value) from this agent's chain for its
   * resource (a name the node lists, or a content id), or from `base` (an accepted delegated chain,
   * to delegate further), signed with the agent's key: the chain to hand on, root first. With
   * `seed`, the child's nonce is derived from it, so the same seed mints the same signed grant.
   * `authenticated`: the request came through a face with a token (false: one anyone who reaches
   * it may use); `to` must then be in {@link AgentOptions.delegateTo} when that is set, and, when
   * it is not, the request must be `authenticated`.
   * @throws McpError (InvalidParams) `delegate-invalid`, `delegate-target-refused`, `delegate-no-grant`, `delegate-not-narrower`,
   *   `delegate-forbidden`, `delegate-unsupported` (a threshold subject: no key here to sign with).
   */
  async delegate(request: unknown, base?: readonly SignedGrant[], seed?: string, authenticated = true): Promise<SignedGrant[]> {
    try {
      const req = readDelegateRequest(request);
      const allowed = this.#o.delegateTo;
      if (allowed !== undefined ? !allowed.includes(req.to) : !authenticated)
        throw new DelegationError(
          DelegationErrorCodes.TARGET_REFUSED,
          allowed !== undefined
            ? `${req.to} is not a key this agent delegates to (--delegate-to)`
            : 'this face has no token: anyone who reaches it could name any key; list the keys this agent delegates to with --delegate-to',
        );
      const signer = this.#o.signer;
      if (this.#o.threshold !== undefined || !('key' in signer))
        throw new DelegationError(
          DelegationErrorCodes.UNSUPPORTED,
          'this agent signs through a threshold group; the bridge holds no key to sign a grant with',
        );
      const named = (await this.nodeTools().catch(() => undefined))?.find((r) => r.name === req.resource)?.resource;
      const resource = named ?? req.resource;
      const chains = base !== undefined ? [base] : this.#o.chains;
      const parent = chains.find((c) => c[c.length - 1]?.grant.capability.resource === resource);
      if (parent === undefined)
        throw new DelegationError(
          DelegationErrorCodes.NO_GRANT,
          `${this.name} holds no grant for resource ${JSON.stringify(req.resource)}`,
        );
      const clock = (this.#o.clockS ?? (() => Math.floor(Date.now() / 1000)))();
      // A seed (the A2A message id and the request) mints the same grant for a re-sent message: the same request, a replay.
      const nonce = seed === undefined ? undefined : fromHex(contentId([this.did, seed, 'delegation-nonce'])).slice(0, 16);
      return mintDelegation(parent, req, signer, clock, ...(nonce !== undefined ? [nonce] : []));
    } catch (e) {
      if (e instanceof DelegationError) throw mcpError(ErrorCode.InvalidParams, e.code, e.message.slice(e.code.length + 2));
      throw e;
    }
  }

  /**
   * Signs and sends one exchange (a tool call, or an agent task for bridge/a2a.ts) through the
   * journal: the call key is the caller, resource, action, payload and chain leaf with the
   * idempotency key (or the MCP request id), so a re-send is the same signed request (the node
   * replays it, §11) and never a second debit.
   * @returns the decision, the receipt, the node's result and the `_meta`/metadata keys; or, for a
   *   threshold subject whose holders did not sign, the tool error result naming them.
   * @throws McpError as {@link call}.
   */
  async send(x: Exchange, ctx: CallContext): Promise<Decided | { threshold: ToolResult }> {
    const contentKey = contentId([
      this.did,
      x.resource,
      x.action,
      x.payloadText,
      ...(x.kind === 'tool-call' ? [] : [x.kind]),
      ...(ctx.chain !== undefined ? [grantId(ctx.chain[ctx.chain.length - 1]!.grant)] : []),
      ...(x.input !== undefined ? [x.input, 'input'] : []),
    ]);
    let callKey = contentId([
      contentKey,
      ctx.idempotencyKey ?? String(ctx.mcpRequestId),
      ctx.idempotencyKey === undefined ? 'mcp-id' : 'key',
    ]);
    if (ctx.idempotencyKey === undefined) {
      // The same MCP id from another live session is not a re-send: its own key (docs/bridge.md).
      const holder = this.#inflight.get(callKey);
      if (holder !== undefined && holder.session !== ctx.sessionId && holder.signal?.aborted !== true) {
        callKey = contentId([callKey, ctx.sessionId ?? '', 'session']);
      }
    }
    const mine = !this.#inflight.has(callKey);
    if (mine) this.#inflight.set(callKey, { session: ctx.sessionId, signal: ctx.signal });
    try {
      return await this.#call(x, contentKey, callKey, ctx);
    } finally {
      if (mine) this.#inflight.delete(callKey);
    }
  }

  async #call(x: Exchange, contentKey: ContentId, callKey: ContentId, ctx: CallContext): Promise<Decided | { threshold: ToolResult }> {
    const journal = this.#o.journal;
    const clock = (this.#o.clockS ?? (() => Math.floor(Date.now() / 1000)))();
    // Recorded before it is signed (in this process before the first await), so a re-send arriving
    // while this one is signed reuses its stamp. A call that is never sent (signing failed, past
    // the frame cap) is closed again below.
    const { jk, answered } = this.#journalKey(callKey, ctx);
    const stamp = await settled(() => journal.open(jk, contentKey, clock, answered));
    // The salt is 0 (no whitespace) but for a re-send of a call an earlier bridge signed with one.
    const payload = enc.encode(x.payloadText + saltText(stamp.salt));
    const cost: Cost = { uj: this.#o.toolCostsUj?.get(x.name) ?? this.#o.costUj ?? 0n, provenance: 'Estimator' };
    const client = this.#o.client;
    let req: WireRequest;
    const kept = stamp.resent ? this.#signed.get(callKey)?.req : undefined;
    // A re-send after a restart whose journal kept the signature (threshold callers): the same
    // fields get the same signature back, so the same request; different fields (the bridge's
    // configuration changed meanwhile) are another request anyway and are signed afresh.
    const saved = kept === undefined ? stamp.signature : undefined;
    const base = this.#o.signer;
    const resign: ClientSigner | undefined =
      saved === undefined
        ? undefined
        : {
            did: base.did,
            sign: (msg) => (verify(parseDid(base.did), msg, saved) ? saved : 'sign' in base ? base.sign(msg) : sign(base.key, msg)),
          };
    if (kept !== undefined) req = kept;
    else
      try {
        req = await client.request({
          ...(resign !== undefined ? { signer: resign } : {}),
          chain: x.chain,
          action: x.action,
          payload,
          cost,
          resource: x.resource,
          ...(x.kind !== 'tool-call' ? { kind: x.kind } : {}),
          now: stamp.nowS,
          ...(stamp.nonce !== undefined ? { nonce: stamp.nonce } : {}),
          ...(x.input !== undefined ? { input: x.input } : {}),
          caller: this.did,
          // Asked of every call to a node that serves it (a fixed rule, so a re-sent call signs the same bytes).
          ...(this.#nodeListsTools === true ? { notify: true } : {}),
        });
      } catch (e) {
        if (!stamp.resent) await journal.end(jk);
        // A threshold call its holders did not sign: a tool error naming who refused; nothing was sent.
        const why = await this.#o.threshold?.explain(e);
        if (why !== undefined) return { threshold: thresholdToolError(why) };
        throw e;
      }
    if (kept === undefined) this.#keep(callKey, req);
    const cap = this.#o.frameCap ?? DEFAULT_FRAME_CAP;
    const size = encodeWireRequest(req).length;
    if (size > cap) {
      if (!stamp.resent) await journal.end(jk);
      this.#signed.delete(callKey);
      throw mcpError(
        ErrorCode.InvalidParams,
        BridgeErrorCodes.ARGUMENTS_TOO_LARGE,
        `the signed request would be ${size} bytes, above the node's frame cap of ${cap} (header ${FRAME_HEADER_BYTES} not counted); nothing was sent`,
      );
    }
    // A FROST signature is randomized: keep it (fsync'd) before the request leaves, so a re-send
    // after a restart sends these bytes again (the node replays them; no second debit).
    if (this.#o.threshold !== undefined && kept === undefined) req = await this.#signedOnce(callKey, jk, req);
    let r: Awaited<ReturnType<JcpClient['callRequest']>>;
    try {
      // An agent task (it may stream, or run long) has a connection of its own: jcp/1 answers a
      // connection's requests in order, so it would hold every other agent's call behind it; the
      // client going away (ctx.signal) closes that connection, and the node ends the agent's stream.
      const alone = x.kind === 'agent-task' ? { ownConnection: true, ...(ctx.signal !== undefined ? { signal: ctx.signal } : {}) } : {};
      r = await client.callRequest(req, { ...(ctx.onNotice !== undefined ? { onNotice: ctx.onNotice } : {}), ...alone });
    } catch (e) {
      if (e instanceof WireErrorReply && e.code === 'clock-skew' && stamp.resent) {
        // A re-send whose original `now` is past the node's window: the original may have been
        // decided and debited (the node went away before answering), so the outcome is unknown.
        // The entry stays open: signing the call afresh would be a new request and a second debit.
        throw mcpError(
          ErrorCode.InternalError,
          BridgeErrorCodes.RESULT_UNKNOWN,
          `the node may have run this call; its original request (now ${stamp.nowS}) is past the replay window (${e.message}); not re-sent as a new call`,
        );
      }
      if (e instanceof WireErrorReply) {
        // No decision, no receipt, no debit: the call is over (a re-send would get the same error).
        await journal.end(jk);
        this.#signed.delete(callKey);
        throw mcpError(ErrorCode.InvalidParams, e.code, e.message.slice(e.code.length + 2));
      }
      throw mcpError(ErrorCode.InternalError, BridgeErrorCodes.NODE_UNREACHABLE, `${(e as Error).message}; re-send the call to replay it`);
    }
    // Delivered unless the client went away; an undelivered call stays open for its re-send.
    if (ctx.signal?.aborted !== true && x.keepOpen !== true) {
      await journal.end(jk);
      this.#signed.delete(callKey);
    }
    return this.#decided(r.decision, r.receipt, r.result, requestIdOf(req));
  }

  /**
   * The key the journal sees (keyed with the agent's journal secret when the journal is shared:
   * {@link keyedCallKey}) and the call's {@link AnsweredScope}: an answered call re-sent within the
   * answered window is the same request when it names itself (docs/bridge.md "Re-sent calls, and repeated ones (bridge/journal.ts)"), by
   * its idempotency key whatever the session, or by its MCP id within its session; an MCP id alone
   * (no session: every client's ids start alike) does not.
   */
  #journalKey(callKey: ContentId, ctx: CallContext): { jk: string; answered: AnsweredScope | undefined } {
    const shared = this.#journalSecret !== undefined && this.#o.journal.shared === true;
    return {
      jk: shared ? keyedCallKey(this.#journalSecret!, callKey) : callKey,
      answered: ctx.idempotencyKey !== undefined ? {} : ctx.sessionId !== undefined ? { session: ctx.sessionId } : undefined,
    };
  }

  /**
   * Records the signature of a threshold call in the journal before it leaves, and returns the
   * request to send: `req`, or `req` with the signature another replica recorded first for the same
   * call (the same fields; it verifies, so it is the same request, §11). @throws McpError
   * `journal-unavailable` | `journal-full`: nothing was sent.
   */
  async #signedOnce(callKey: ContentId, jk: string, req: WireRequest): Promise<WireRequest> {
    const won = await settled(() => this.#o.journal.signed(jk, req.signature));
    if (won === undefined || Buffer.from(won).equals(Buffer.from(req.signature))) return req;
    if (!verify(parseDid(this.did), wireRequestSigningBytes(req), won)) return req;
    const theirs: WireRequest = { ...req, signature: won };
    this.#keep(callKey, theirs);
    return theirs;
  }

  /** Keeps an open call's signed request for its re-sends (dropped after {@link SIGNED_KEEP_MS}). */
  #keep(callKey: ContentId, req: WireRequest): void {
    const now = Date.now();
    for (const [k, v] of this.#signed) if (now - v.atMs > SIGNED_KEEP_MS) this.#signed.delete(k);
    this.#signed.set(callKey, { req, atMs: now });
  }

  /** The decided exchange with its metadata keys; records the budget the receipt reports. @throws McpError `bad-reply` (an unreadable receipt). */
  #decided(decision: Decided['decision'], receipt: Uint8Array, result: Uint8Array | undefined, requestId: ContentId): Decided {
    const opened = openReceipt(receipt);
    if (!opened.ok) throw mcpError(ErrorCode.InternalError, BridgeErrorCodes.BAD_REPLY, `receipt: ${opened.error.why}`);
    const core = opened.value;
    const rid = receiptId(receipt);
    let upstream: ToolResult | undefined;
    let unreadable: string | undefined;
    if (decision.verdict === 'allow') {
      try {
        const v = JSON.parse(dec.decode(result ?? new Uint8Array())) as unknown;
        if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
        upstream = v as ToolResult;
      } catch (e) {
        unreadable = (e as Error).message;
      }
    }
    // A call the upstream never answered was credited back by the node (a sealed reversal of
    // this receipt, docs/node.md "Endpoints and results"): the budget left is the receipt's figure plus the refund.
    const remaining = core.budget_remaining_uj + (upstream !== undefined ? refundOf(upstream, core.cost_uj, core.seq) : 0n);
    const prev = this.#budgets.get(core.grant_id);
    if (prev === undefined || prev.seq <= core.seq) this.#budgets.set(core.grant_id, { remaining, receipt: rid, seq: core.seq });
    const meta: Record<string, string> = {
      'jcp/verdict': decision.verdict,
      ...(decision.deny_reason !== undefined ? { 'jcp/deny_reason': decision.deny_reason } : {}),
      'jcp/receipt': rid,
      'jcp/receipt_cose': toHex(receipt),
      'jcp/request_id': requestId,
      'jcp/grant_id': core.grant_id,
      'jcp/cost_uj': core.cost_uj.toString(),
      'jcp/budget_remaining_uj': remaining.toString(),
      'jcp/budget_uj': core.budget_uj.toString(),
    };
    return {
      decision,
      meta,
      ...(upstream !== undefined ? { result: upstream } : {}),
      ...(unreadable !== undefined ? { unreadable } : {}),
    };
  }

  /** An MCP `CallToolResult` for a decided tool call. */
  #toResult(d: Decided): ToolResult {
    const { decision, meta, result: upstream, unreadable } = d;
    if (decision.verdict === 'deny') {
      return { isError: true, content: [{ type: 'text', text: `denied: ${decision.deny_reason ?? 'unknown'}` }], _meta: meta };
    }
    if (upstream === undefined) {
      return {
        isError: true,
        content: [{ type: 'text', text: `bad-reply: the node's result is not a CallToolResult (${unreadable})` }],
        _meta: meta,
      };
    }
    return {
      ...upstream,
      content: (upstream['content'] as unknown[] | undefined) ?? [],
      _meta: { ...((upstream['_meta'] as Record<string, unknown>) ?? {}), ...meta },
    };
  }
}
