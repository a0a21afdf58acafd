/**
 * The request path of the enforcement node (spec §11, §7, §8.1; docs/design.md "The way data flows"),
 * from one decoded jcp/1 message body to the response body, in this order:
 *
 *  1. canonical check and schema check (`decodeWireMessage`, or `ChainCache` for a chain seen
 *     before; the frame cap was checked by the connection's `FrameReader` before any
 *     allocation) → error reply, no receipt;
 *  2. skew check: `|request.now − node clock| > max_skew_s` → error `clock-skew`;
 *  3. idempotent replay by `request_id`: a request decided before gets its original response
 *     back (the receipt from the log, the kept result), and nothing is debited twice;
 *  4. a resource the node does not serve → error `unknown-resource` (nothing decided or debited);
 *     payload check for a resource with an endpoint (a JSON object of tool arguments) → error
 *     `payload-invalid`; then the tool name against the upstream's `tools/list` → error
 *     `unknown-tool` (when the node has no list yet it connects to get one; an upstream it cannot
 *     reach has no list, and the call goes on to the decision);
 *  5. caller signature (on a worker thread when the node has them): a failure is a sealed
 *     `bad-signature` deny (`denied()`), evidence like any other decision;
 *  6. the decision with the chain (`decide`, §4.2, §7), priced at no less than the node's own
 *     estimate for the action, its provenance capped at what the node can vouch for
 *     (`capProvenance`), then the budget policy hook; the debit on allow;
 *  7. the receipt sealed (`seq`, `prev`, `request_id`, `at`) and appended to the log; the reply is
 *     sent only once the receipt's batch is durable (fsync'd);
 *  8. on allow, the endpoint is invoked (metered) and its result goes back as data (§6); a request
 *     with `notify: 1` gets the upstream's progress and logging notifications as `notice`
 *     messages first. The call's outcome record (`outcome.ts`) is written beside the receipt: a
 *     measurement (what the meter measured, with its provenance), or, when the endpoint could not
 *     run the call (endpoint-unavailable), a reversal: durable before the reply, then the debit is
 *     credited back, so nothing is charged for an effect that never happened.
 *
 * `{list_tools: {}}` is answered with every endpoint's known tools (`tool_list`), no receipt.
 *
 * Steps 6–7 run synchronously, one request at a time, so the ledger, `seq` and the `prev` chain
 * are consistent; everything that waits (signature workers, fsync, endpoints) happens outside
 * that section, so a slow request never holds up the others.
 */
import type { Logger } from 'pino';
import {
  type Actor,
  type ContentId,
  contentIdOfBytes,
  type Cost,
  decide,
  type Decision,
  type DecisionRequest,
  type DecisionState,
  denied,
  DenyReasons,
  encodeWireMessage,
  encodeWireResponse,
  err,
  type Grant,
  grantId,
  isJcpError,
  type Ledger,
  MAX_ERROR_MESSAGE,
  openReceipt,
  parseDid,
  type Provenance,
  provenanceProblem,
  receiptCoreFor,
  receiptId,
  type Result,
  sealReceipt,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  type SignedRevocation,
  type TrustRoots,
  verify,
  type WireAmended,
  type WireMessage,
  type WireRequest,
  wireRequestSigningBytesOf,
} from '../core/index.ts';
import { MeteredError } from '../meter/index.ts';
import { a2aPriceKey, AGENT_REPLY_KEY, agentOutcome } from './a2a.ts';
import { ChainCache } from './chaincache.ts';
import { NodeErrorCodes, type WireErrorCode } from './codes.ts';
import {
  type Endpoint,
  EndpointError,
  EndpointErrorCodes,
  type InvokeOptions,
  type McpNotificationMessage,
  endpointUnavailableIn,
  errorResult,
  type McpInput,
} from './endpoint.ts';
import { OUTCOME_PROFILE, sealOutcome } from './outcome.ts';
import {
  argumentsDigest,
  type ContinuationLimits,
  type ContinuationParty,
  Continuations,
  DEFAULT_CONTINUATION_LIMITS,
} from './continuations.ts';
import type { NoticeSink } from './server.ts';
import type { BudgetPolicy } from './hooks.ts';
import type { NodeMetrics } from './metrics.ts';
import { capProvenance, type NodeMeter, priceCall } from './pricing.ts';
import type { ReceiptLog } from './receiptlog.ts';
import type { TimedRequestIndex } from './requestindex.ts';
import { FAILED_RECENTLY_S, type PeerLimiter, REPLY_TOKEN_BYTES, ReplaySlots } from './ratelimit.ts';
import type { IssuerPolicy, RecordRefusal } from './issuerpolicy.ts';
import type { AmendmentRejection, AmendmentStore } from './amendments.ts';
import type { RevocationStore } from './revocations.ts';
import type { WorkerPool } from './workers.ts';

/** Where admitted amendments are handed on (a cluster's revocation stream). */
export interface AmendmentOutlet {
  readonly name: string;
  /** Resolves once handed on; `message` is the det-CBOR `{amend: …}` message. */
  publish(steeredId: ContentId, message: Uint8Array): Promise<void>;
}

/** Results larger than this (bytes) are replaced by an `endpoint-failed` error result. */
export const RESULT_CAP_BYTES = 8 << 20;

/** A guarded resource's endpoint as the enforcer sees it. */
export interface EndpointBinding {
  readonly name: string;
  readonly endpoint: Endpoint;
}

/** Everything the request path uses. */
export interface EnforcerDeps {
  /** Bounds of the MCP calls waiting for input (node/continuations.ts; default {@link DEFAULT_CONTINUATION_LIMITS}). */
  readonly continuationLimits?: ContinuationLimits;
  readonly steward: Actor;
  readonly log: ReceiptLog;
  readonly ledger: Ledger;
  /** The idempotency index, bounded by time (its horizon refuses older requests: `clock-skew`). */
  readonly requests: TimedRequestIndex;
  /** Next `seq` to seal, and the id of the last receipt (the log head). */
  readonly nextSeq: number;
  readonly headId: ContentId | undefined;
  readonly trust: TrustRoots;
  readonly revocations: RevocationStore;
  /** Amendments in force (§4.7): steered grants refused `revoked`, continuations capped. Absent = none. */
  readonly amendments?: AmendmentStore | undefined;
  readonly meter: NodeMeter;
  /**
   * The best provenance a receipt may seal for a charged figure (`provenanceCeiling` of the
   * meter's probed provenance; default `Estimator`). A caller's claim above it is capped.
   */
  readonly provenanceCeiling?: Provenance | undefined;
  /** resource content id → endpoint. */
  readonly endpoints: ReadonlyMap<ContentId, EndpointBinding>;
  /**
   * The resource ids this node serves (its config's `resources`). A request for any other is
   * refused with the error `unknown-resource` before any decision or debit. Undefined = every
   * resource (for embedders that decide for resources they do not list).
   */
  readonly resources?: ReadonlySet<ContentId> | undefined;
  readonly metrics: NodeMetrics;
  readonly logger: Logger;
  /** Largest accepted |now − clock|, seconds. */
  readonly maxSkewS: number;
  /** The node's clock, unix seconds. */
  readonly clockS: () => number;
  /** Signature workers; undefined = verify on this thread. */
  readonly pool?: WorkerPool | undefined;
  readonly budgetPolicy?: BudgetPolicy | undefined;
  /** Abuse limits per peer address (node/ratelimit.ts); undefined = none. */
  readonly limiter?: PeerLimiter | undefined;
  /**
   * The global bucket of sealed denies a caller can cause at will (config `abuse.deny_burst`,
   * `abuse.deny_refill_per_s`; one key, `''`): a request whose chain root no trust root of the
   * resource issued, or whose caller signature fails, takes a token here and one of its peer's;
   * past either it gets `rate-limited` and no receipt. Undefined = no global limit.
   */
  readonly denyLimiter?: PeerLimiter | undefined;
  /**
   * The global bucket of failures, all peers together (config `abuse.failure_burst`,
   * `abuse.failure_refill_per_s`; one key, `''`): every request that fails before a decision takes
   * as many tokens here as of its peer's (one per 64 KiB of it, at least one), and a `read-timeout`
   * one. While it is empty, an address that failed within {@link FAILED_RECENTLY_S} is refused
   * `rate-limited`; addresses that did not fail are served as before. Undefined = no global limit.
   */
  readonly failureLimiter?: PeerLimiter | undefined;
  /** Which issuers' amendments a node keeps and relays (node/issuerpolicy.ts); undefined = any. */
  readonly issuerPolicy?: IssuerPolicy | undefined;
  /** Called once when the log can no longer be written: the node must stop. */
  readonly onFatal: (e: Error) => void;
  /**
   * Where a revocation accepted over jcp/1 goes on to (the cluster's revocation
   * stream, so every node enforces it). Each is awaited before the `{revoked}` reply; one that
   * fails is retried in the background (every 1 s, then up to 30 s apart) until it succeeds or
   * {@link Enforcer.stopRetries} is called.
   */
  /** Where an amendment admitted over jcp/1 goes on to (§4.7: the revocation stream), like `revocationOutlets`. */
  readonly amendmentOutlets?: ReadonlyArray<AmendmentOutlet> | undefined;
  readonly revocationOutlets?: ReadonlyArray<{ readonly name: string; publish(sr: SignedRevocation): Promise<void> }> | undefined;
}

const dec = new TextDecoder('utf-8', { fatal: true });
const enc = new TextEncoder();

/** An error reply body (§11): `{error: {code, message}}`, never a receipt. */
export function errorBody(code: WireErrorCode | string, message: string): Uint8Array {
  return encodeWireMessage({ kind: 'error', error: { code, message: message.slice(0, MAX_ERROR_MESSAGE) } });
}

/** The node's request path; see the module docs for the order of checks. */
export class Enforcer {
  readonly #d: EnforcerDeps;
  readonly #state: DecisionState;
  readonly #inflight = new Map<ContentId, Promise<Uint8Array>>();
  readonly #chains = new ChainCache();
  /** MCP calls waiting for their continuation (multi round-trip, docs/node.md). */
  readonly #continuations: Continuations;
  /**
   * Replies to continuations already answered, by request id (a re-send of the same signed bytes
   * gets the same reply, §11), oldest first; at most {@link CONTINUED_KEEP_BYTES} of replies, each
   * kept for the pending calls' lifetime.
   */
  readonly #continued = new Map<ContentId, { reply: Uint8Array; atMs: number }>();
  #continuedBytes = 0;
  #nextSeq: number;
  #headId: ContentId | undefined;
  #fatal: Error | undefined;

  constructor(deps: EnforcerDeps) {
    this.#d = deps;
    this.#continuations = new Continuations(deps.continuationLimits ?? DEFAULT_CONTINUATION_LIMITS);
    this.#nextSeq = deps.nextSeq;
    this.#headId = deps.headId;
    const amendments = deps.amendments;
    this.#state =
      amendments === undefined
        ? { ledger: deps.ledger, revoked: deps.revocations, trust: deps.trust }
        : {
            // §4.7: an amendment soft-revokes the steered grant (denied `revoked`, like §4.3) and
            // the continuation starts with the steered grant's spend carried over (its cap).
            ledger: amendments.view(deps.ledger),
            revoked: { has: (id) => deps.revocations.has(id) || amendments.steered(id) },
            trust: deps.trust,
          };
  }

  /** The next seq to be sealed. */
  get nextSeq(): number {
    return this.#nextSeq;
  }

  /** The ledger (spend per grant id, µJ). */
  get ledger(): Ledger {
    return this.#d.ledger;
  }

  /** Set once the receipt log failed; the node answers `log-failed` from then on. */
  get fatal(): Error | undefined {
    return this.#fatal;
  }

  /**
   * False while messages from the address `peer` are refused `rate-limited` (its bucket is
   * empty); always true without abuse limits. The jcp/1 server refuses such an address's new
   * connections and closes one that keeps sending (node/server.ts).
   */
  admits(peer: string): boolean {
    const limiter = this.#d.limiter;
    if (limiter === undefined) return true;
    if (!limiter.admits(peer)) return false;
    const all = this.#d.failureLimiter;
    return all === undefined || all.admits('') || !limiter.failedWithin(peer, FAILED_RECENTLY_S);
  }

  /**
   * Takes one token of the address `peer` (and of the global failure bucket) for a failure the
   * jcp/1 server answers itself (a `read-timeout`, node/server.ts); nothing without abuse limits.
   */
  charge(peer: string): void {
    this.#d.limiter?.charge(peer);
    this.#failed(1);
  }

  /** When the global failure bucket last emptied and was logged (clock seconds). */
  #pressureLoggedAt = Number.NEGATIVE_INFINITY;

  /**
   * Takes `n` tokens of the global failure bucket for a failure of any peer; logs (at most once
   * per {@link FAILED_RECENTLY_S}) when that empties it.
   */
  #failed(n: number): void {
    const all = this.#d.failureLimiter;
    if (all === undefined || !all.enabled) return;
    all.charge('', n);
    if (all.admits('')) return;
    const now = this.#d.clockS();
    if (now - this.#pressureLoggedAt < FAILED_RECENTLY_S) return;
    this.#pressureLoggedAt = now;
    this.#d.logger.warn(
      { refused_for_s: FAILED_RECENTLY_S },
      'abuse: the failures of all peers together emptied abuse.failure_burst; addresses that failed recently are refused rate-limited until it refills',
    );
  }

  /**
   * Handles one message body from peer address `peer` and resolves to the response body.
   * `notice` sends the `notice` messages of a request that asked for them (`notify: 1`) before
   * its response. Never rejects. With abuse limits, a peer out of tokens gets `rate-limited`
   * before anything else, and a reply that is the peer's failure (every error reply but the
   * node's own faults: `UNCHARGED`) takes one of its tokens.
   */
  async handle(body: Uint8Array, notice?: NoticeSink, peer = ''): Promise<Uint8Array> {
    const limiter = this.#d.limiter;
    if (limiter === undefined || !limiter.enabled) return await this.#handle(body, notice, peer);
    if (!this.admits(peer)) {
      this.#d.metrics.rateLimited.inc();
      const why = limiter.admits(peer)
        ? `too many failed requests from all peers, and ${peer} failed within the last ${FAILED_RECENTLY_S} s`
        : `too many failed or bad-signature requests from ${peer}`;
      return this.#error(NodeErrorCodes.RATE_LIMITED, `${why}; retry later`);
    }
    const reply = await this.#handle(body, notice, peer);
    const code = this.#errorCodes.get(reply);
    if (code === undefined || UNCHARGED.has(code)) return reply;
    // Messages pipelined in one write all pass the entry check before the first is charged: each
    // failure takes its tokens here, and one that finds the bucket empty is not answered either
    // (as a bad-signature deny past the entry check). A failure costs one token per
    // REPLY_TOKEN_BYTES of its message (at least one), as a free reply does per its size: a large
    // junk frame, read whole before it fails, is not one token's worth of work.
    // The global failure bucket is charged the same (abuse.failure_burst): a flood spread over
    // many addresses, each within its own bucket, still empties it.
    const cost = Math.max(1, Math.ceil(body.byteLength / REPLY_TOKEN_BYTES));
    this.#failed(cost);
    if (limiter.fail(peer, cost)) return reply;
    this.#d.metrics.rateLimited.inc();
    return this.#error(NodeErrorCodes.RATE_LIMITED, `too many failed or bad-signature requests from ${peer}; retry later`);
  }

  /**
   * Takes one token of `peer`'s bucket and one of the global deny bucket for a deny the caller
   * causes at will; false (nothing taken) when either is empty.
   */
  #takeDeny(peer: string): boolean {
    const peers = this.#d.limiter;
    const all = this.#d.denyLimiter;
    if (peers !== undefined && !peers.admits(peer)) return false;
    if (all !== undefined && !all.admits('')) return false;
    peers?.take(peer);
    all?.take('');
    return true;
  }

  #denyLimited(peer: string): Uint8Array {
    this.#d.metrics.rateLimited.inc();
    return this.#error(
      NodeErrorCodes.RATE_LIMITED,
      `too many failed, bad-signature or untrusted-root requests from ${peer} (or from all peers); retry later`,
    );
  }

  /** The code of each error reply body this enforcer made (to charge the peer's bucket). */
  readonly #errorCodes = new WeakMap<Uint8Array, string>();

  async #handle(body: Uint8Array, notice: NoticeSink | undefined, peer: string): Promise<Uint8Array> {
    try {
      if (this.#fatal) return this.#error(NodeErrorCodes.LOG_FAILED, 'the receipt log failed; this node is stopping');
      let msg: WireMessage;
      try {
        msg = this.#chains.decode(body);
      } catch (e) {
        if (isJcpError(e)) return this.#error(e.code, e.message);
        throw e;
      }
      if (msg.kind === 'request') return await this.#request(body, msg.request, notice, peer);
      if (msg.kind === 'revoke') return await this.#revoke(msg.revocation, msg.grant);
      if (msg.kind === 'list_tools') return await this.#listTools(peer);
      if (msg.kind === 'amend') return await this.#amend(msg.grant, msg.checkpoint, msg.amendment);
      return this.#error(NodeErrorCodes.UNKNOWN_MESSAGE, `a node does not take '${msg.kind}' messages`);
    } catch (e) {
      this.#d.logger.error({ err: e }, 'internal error on the request path');
      return this.#error(NodeErrorCodes.INTERNAL, `internal error: ${(e as Error)?.message ?? String(e)}`);
    }
  }

  readonly #counters = new Map<string, { inc(): void }>();

  /** The decisions counter for one reason (`none` = allow), its labelled child cached. */
  #decisionCounter(reason: string): { inc(): void } {
    let c = this.#counters.get(reason);
    if (c === undefined) {
      c = this.#d.metrics.decisions.labels(reason === 'none' ? 'allow' : 'deny', reason);
      this.#counters.set(reason, c);
    }
    return c;
  }

  #error(code: WireErrorCode | string, message: string): Uint8Array {
    this.#d.metrics.errors.inc({ code });
    const b = errorBody(code, message);
    this.#errorCodes.set(b, code);
    return b;
  }

  /** Idempotent replays read back from the log, a few at a time per peer and in all (node/ratelimit.ts). */
  readonly #replays = new ReplaySlots();

  /**
   * A reply the node gives without a decision or a debit (an idempotent replay, a `tool_list`):
   * with abuse limits on, it spends max(1, ⌈bytes / 64 KiB⌉) of `peer`'s tokens
   * ({@link PeerLimiter.spend}); a peer with none left gets `rate-limited` instead. One signed
   * request re-sent over and over, or `list_tools` pipelined, otherwise made the node send
   * megabytes per message for nothing (2026-12-06: 428 replays of 6 MB for one debit).
   */
  #freeReply(peer: string, reply: Uint8Array, what: 'replays' | 'tool lists', taken = 0): Uint8Array {
    const limiter = this.#d.limiter;
    // `taken`: tokens this message already took (a list that re-spawns a down upstream took one).
    const owed = Math.max(1, Math.ceil(reply.byteLength / REPLY_TOKEN_BYTES)) - taken;
    if (limiter === undefined || owed <= 0 || limiter.spend(peer, owed)) {
      // Counted as a replay once it is answered (a refused one is counted as rate-limited).
      if (what === 'replays') this.#d.metrics.replays.inc();
      return reply;
    }
    this.#d.metrics.rateLimited.inc();
    return this.#error(NodeErrorCodes.RATE_LIMITED, `too many ${what} from ${peer} (each 64 KiB takes a token); retry later`);
  }

  /** The last `tool_list` body and the tool lists it was made from (re-encoded only when one changed). */
  #toolList: { readonly from: readonly unknown[]; readonly body: Uint8Array } | undefined;

  /** `tool_list`: each endpoint's last known tools, in config order (listing first where none is known). */
  async #listTools(peer: string): Promise<Uint8Array> {
    const bindings = [...this.#d.endpoints.entries()];
    // A list that makes the node (re)connect an upstream it has no list of takes one of the
    // peer's tokens: one address cannot keep a down stdio server re-spawning (the endpoint's
    // back-off bounds it across all peers).
    const limiter = this.#d.limiter;
    const respawns = limiter?.enabled === true && bindings.some(([, b]) => b.endpoint.tools() === undefined);
    if (respawns && !limiter.take(peer)) {
      this.#d.metrics.rateLimited.inc();
      return this.#error(NodeErrorCodes.RATE_LIMITED, `too many list_tools from ${peer} while an upstream is down; retry later`);
    }
    await Promise.all(bindings.map(([, b]) => b.endpoint.ensureTools()));
    // Each endpoint keeps its list as one array until it re-lists, so the same arrays mean the same
    // body (the endpoints, and so the arrays' count and order, are fixed by the config).
    // (An A2A agent's list is its skills; its tools() is a new empty array each time.)
    const from = bindings.map(([, b]) => (b.endpoint.kind === 'a2a' ? b.endpoint.skills?.() : b.endpoint.tools()));
    const kept = this.#toolList;
    let body: Uint8Array;
    if (kept?.from.every((v, i) => v === from[i])) body = kept.body;
    else {
      body = encodeWireMessage({
        kind: 'tool_list',
        resources: bindings.map(([id, b]) => ({
          name: b.name,
          resource: id,
          tools: JSON.stringify(b.endpoint.tools() ?? []),
          ...(b.endpoint.kind === 'a2a' ? { kind: 'a2a' as const, skills: JSON.stringify(b.endpoint.skills?.() ?? []) } : {}),
        })),
      });
      this.#toolList = { from, body };
    }
    // One token per list in all (the re-spawn's counts), and more for a list past 64 KiB.
    return this.#freeReply(peer, body, 'tool lists', respawns ? 1 : 0);
  }

  async #request(body: Uint8Array, req: WireRequest, notice: NoticeSink | undefined, peer: string): Promise<Uint8Array> {
    const t0 = performance.now();
    const clock = this.#d.clockS();
    // Every request moves the index's horizon with the clock (dropping ids no request can match).
    this.#d.requests.advance(clock);
    if (Math.abs(req.now - clock) > this.#d.maxSkewS) {
      return this.#error(
        NodeErrorCodes.CLOCK_SKEW,
        `request.now ${req.now} is ${req.now - clock} s from the node clock (max_skew_s ${this.#d.maxSkewS})`,
      );
    }
    // The index keeps request ids by time (node/requestindex.ts): below its horizon an id may have
    // been dropped, so such a request is refused, never decided a second time.
    const requests = this.#d.requests;
    if (req.now < requests.horizon) {
      return this.#error(
        NodeErrorCodes.CLOCK_SKEW,
        `request.now ${req.now} is older than the request index keeps (${requests.horizon}: the node clock has been ${requests.horizon + requests.windowS})`,
      );
    }
    // The body is canonical (decode re-encoded it byte for byte), so its hash is `requestIdOf(req)`.
    const rid = contentIdOfBytes(body);
    const inflight = this.#inflight.get(rid);
    if (inflight !== undefined) return this.#freeReply(peer, await inflight, 'replays');
    const seq = requests.get(rid, req.now);
    if (seq !== undefined) {
      const replayed = await this.#replays.run(peer, () => this.#fromLog(rid, seq));
      if (replayed !== undefined) return this.#freeReply(peer, replayed, 'replays');
    }
    if (this.#d.resources !== undefined && !this.#d.resources.has(req.frame.resource)) {
      return this.#error(
        NodeErrorCodes.UNKNOWN_RESOURCE,
        `frame.resource ${req.frame.resource} is not a resource this node serves; nothing was decided or debited`,
      );
    }
    const binding = this.#d.endpoints.get(req.frame.resource);
    let args: Record<string, unknown> | undefined;
    if (binding?.endpoint.precheck !== undefined) {
      // An A2A agent (node/a2a.ts, docs/a2a.md): frame kind, payload, skill, task binding, stream bounds.
      const ep = binding.endpoint;
      if (ep.toolStatus(req.frame.action) === 'unlisted') await ep.ensureTools();
      const leaf = req.chain[req.chain.length - 1]?.grant.capability.actions ?? [];
      const r = ep.precheck!(req.frame, req.caller, req.payload, req.notify === 1, leaf, peer);
      if ('code' in r) return this.#error(r.code, r.message);
      args = r.args;
    } else if (binding !== undefined) {
      if (req.frame.kind === 'agent-task') {
        return this.#error(
          NodeErrorCodes.FRAME_KIND_MISMATCH,
          `${binding.name} is an MCP server: it takes tool-call frames, not agent-task`,
        );
      }
      const parsed = parseArgs(req.payload);
      if (typeof parsed === 'string') return this.#error(NodeErrorCodes.PAYLOAD_INVALID, parsed);
      args = parsed;
      let status = binding.endpoint.toolStatus(req.frame.action);
      // No list yet, or a 2026-07-28 list past its ttlMs: read it (again) before deciding.
      if (status === 'unlisted' || binding.endpoint.toolsStale?.() === true) {
        await binding.endpoint.ensureTools();
        status = binding.endpoint.toolStatus(req.frame.action);
      }
      if (status === 'unknown') {
        return this.#error(NodeErrorCodes.UNKNOWN_TOOL, `${binding.name} has no tool ${JSON.stringify(req.frame.action.slice(0, 128))}`);
      }
    }
    const input = parseInput(req.input);
    if (typeof input === 'string') return this.#error(NodeErrorCodes.INPUT_INVALID, input);
    const emit = req.notify === 1 && notice !== undefined ? noticeEmitter(rid, notice) : undefined;
    const io: CallIo = { emit, signal: notice?.closed, peer, ...(input !== undefined ? { input } : {}) };
    // A continuation carries the node's token; responses without one are a new call's (decided and
    // debited like any call: nothing binds them to an earlier round).
    if (input?.state !== undefined) {
      if (binding === undefined || binding.endpoint.kind === 'a2a') {
        return this.#error(NodeErrorCodes.INPUT_INVALID, 'request.input.state continues an MCP tool call; this resource has no MCP server');
      }
      return await this.#continueOnce(body, req, rid, binding, args ?? {}, input.state, io);
    }
    // Registered before deciding starts, so a copy arriving meanwhile waits for this decision.
    let start!: () => void;
    const p = new Promise<void>((r) => {
      start = r;
    }).then(() => this.#decideNew(body, req, rid, t0, binding, args, io));
    this.#inflight.set(rid, p);
    start();
    return await p;
  }

  async #decideNew(
    body: Uint8Array,
    req: WireRequest,
    rid: ContentId,
    t0: number,
    binding: EndpointBinding | undefined,
    args: Record<string, unknown> | undefined,
    io: CallIo,
  ): Promise<Uint8Array> {
    const peer = io.peer;
    let release = true;
    try {
      // A chain whose root no trust root of the resource issued is denied whatever else it
      // carries (§7): a deny its caller causes at will, so it takes a token of the peer and of
      // the global deny bucket before any signature work, and none left means no receipt.
      const root = req.chain[0]?.grant.issuer;
      const trusted = root !== undefined && this.#d.trust.allows(req.frame.resource, root);
      if (!trusted && !this.#takeDeny(peer)) return this.#denyLimited(peer);
      const signed = wireRequestSigningBytesOf(body, req);
      const sigOk = this.#d.pool ? await this.#d.pool.verify(req.caller, signed, req.signature) : callerSignatureOk(req, signed);
      // A refused impersonation is sealed (evidence, §11), and costs the peer a token (abuse limits).
      // The token is taken here, once the check is done, not when the message arrived: requests
      // pipelined or sent on many connections all pass the entry check before any of them is
      // charged, so a peer already out of tokens gets `rate-limited` and no receipt.
      if (!sigOk && trusted && !this.#takeDeny(peer)) return this.#denyLimited(peer);
      if (sigOk && trusted) this.#d.issuerPolicy?.noteDecided(req.chain.map((sg) => sg.grant.issuer));
      if (this.#fatal) return this.#error(NodeErrorCodes.LOG_FAILED, 'the receipt log failed; this node is stopping');
      // --- serialized section: decide, debit, seal (no await until the append is queued) ---
      this.#d.revocations.noteChain(req.chain);
      const priced = binding?.endpoint.kind === 'a2a' ? a2aPriceKey(req.frame.action, args) : req.frame.action;
      const cost = capProvenance(priceCall(req.cost, this.#d.meter.estimateUj(priced)), this.#d.provenanceCeiling ?? 'Estimator');
      const dreq: DecisionRequest = { frame: req.frame, chain: req.chain, caller: req.caller, cost, nowS: req.now };
      let d: Decision = sigOk
        ? decide(dreq, this.#state)
        : denied(dreq, this.#state, { reason: DenyReasons.BAD_SIGNATURE, why: 'the caller signature does not verify' });
      if (d.verdict === 'allow' && this.#d.budgetPolicy !== undefined) {
        const deny = this.#d.budgetPolicy.admit(dreq, d);
        if (deny !== undefined) {
          d = denied(dreq, this.#state, deny);
          // The wire and the receipt carry only the spec's reason; which rule refused is logged.
          this.#d.logger.debug({ grant_id: req.frame.grant_id, reason: deny.reason, why: deny.why }, 'budget policy refused');
        }
      }
      const seq = this.#nextSeq;
      const core = receiptCoreFor(dreq, d, {
        steward: this.#d.steward.did,
        seq,
        ...(this.#headId !== undefined ? { prev: this.#headId } : {}),
        requestId: rid,
      });
      const receipt = sealReceipt(core, this.#d.steward);
      if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);
      this.#nextSeq = seq + 1;
      this.#headId = receiptId(receipt);
      const durable = this.#d.log.appendReceipt(seq, receipt);
      // --- end of the serialized section ---
      try {
        await durable;
      } catch (e) {
        this.#fail(e as Error);
        return this.#error(NodeErrorCodes.LOG_FAILED, `the receipt could not be made durable: ${(e as Error).message}`);
      }
      this.#d.requests.set(rid, seq, req.now);
      const m = this.#d.metrics;
      m.decisionSeconds.observe((performance.now() - t0) / 1000);
      this.#decisionCounter(d.verdict === 'deny' ? d.deny.reason : 'none').inc();
      if (d.verdict === 'deny') {
        return encodeWireResponse({ decision: { verdict: 'deny', deny_reason: d.deny.reason }, receipt });
      }
      m.debitedUj.inc(Number(cost.uj));
      m.debitedJoules.inc(Number(cost.uj) / 1e6);
      this.#d.budgetPolicy?.committed?.(dreq, d, receipt);
      if (binding === undefined) return encodeWireResponse({ decision: { verdict: 'allow' }, receipt });
      const answered = await this.#callAndRecord(binding, req, args, io, rid, seq, receipt, d.chainIds, cost.uj);
      release = !answered.deferred;
      return answered.response;
    } finally {
      if (release) this.#inflight.delete(rid);
    }
  }

  /**
   * After an allowed, durable receipt (seq `seq`): calls the endpoint (§5) and records what
   * happened. An unanswered call (endpoint-unavailable) gets a durable reversal record and the
   * `costUj` µJ debit credited back to `chainIds`, its reply an endpoint-unavailable result;
   * otherwise a measurement record is queued (deferred: `deferred` true, the in-flight entry for
   * `rid` is released when it is written) and the reply carries the endpoint's result. A reversal
   * that cannot be made durable stops the node and answers log-failed.
   */
  async #callAndRecord(
    binding: EndpointBinding,
    req: WireRequest,
    args: Record<string, unknown> | undefined,
    io: CallIo,
    rid: ContentId,
    seq: number,
    receipt: Uint8Array,
    chainIds: ContentId[],
    costUj: Cost['uj'],
  ): Promise<{ response: Uint8Array; deferred: boolean }> {
    const caller = {
      did: req.caller,
      grantId: req.frame.grant_id,
      resource: req.frame.resource,
      peer: io.peer,
      receipt: receiptId(receipt),
    };
    const inv = await this.#invoke(binding, req.frame.action, args ?? {}, { ...io, caller });
    if (inv.unavailable === undefined) inv.result = this.#pend(inv.result, receipt, 1, partyOf(req, args ?? {}));
    const m = this.#d.metrics;
    const steward = this.#d.steward;
    const base = {
      jcp_outcome: OUTCOME_PROFILE as typeof OUTCOME_PROFILE,
      receipt_seq: seq,
      receipt_id: receiptId(receipt),
      steward: steward.did,
      at: Math.floor(this.#d.clockS()),
    };
    const metered =
      // A figure that breaks §5's provenance rules is left out rather than sealed (never expected from meter/).
      inv.metered === undefined || provenanceProblem(inv.metered) !== undefined
        ? {}
        : {
            metered_uj: inv.metered.uj,
            metered_provenance: inv.metered.provenance,
            ...(inv.metered.measured !== undefined ? { metered_measured: inv.metered.measured } : {}),
          };
    if (inv.unavailable !== undefined) {
      // Nothing is charged for a call the endpoint never answered: a durable, steward-signed
      // reversal (replay applies it), then the credit. The receipt stands as the decision's evidence.
      const result = errorResult(
        EndpointErrorCodes.UNAVAILABLE,
        `${inv.unavailable.message}; not charged: the debit of ${costUj} µJ was reversed (reversal record of receipt seq ${seq})`,
        { refunded_uj: String(costUj), receipt_seq: String(seq), phase: inv.unavailable.phase },
      );
      const record = sealOutcome(
        { ...base, kind: 'reversal', outcome: EndpointErrorCodes.UNAVAILABLE, phase: inv.unavailable.phase, ...metered, refund_uj: costUj },
        steward,
      );
      try {
        await this.#d.log.putOutcome('reversal', seq, record, { requestId: rid, bytes: result });
      } catch (e) {
        this.#fail(e as Error);
        return {
          response: this.#error(NodeErrorCodes.LOG_FAILED, `the reversal could not be made durable: ${(e as Error).message}`),
          deferred: false,
        };
      }
      if (this.#d.ledger.credit(chainIds, costUj)) {
        m.reversedUj.inc(Number(costUj));
        m.reversedJoules.inc(Number(costUj) / 1e6);
      }
      return { response: encodeWireResponse({ decision: { verdict: 'allow' }, receipt, result }), deferred: false };
    }
    const result = inv.result;
    const a2a = binding.endpoint.kind === 'a2a';
    // An agent's answer is an agent-reply, tagged data (§6): the record says so.
    const tag = a2a ? { reply_kind: 'agent-reply' as const, reply_trust: 'data' as const } : {};
    const record = sealOutcome({ ...base, kind: 'measurement', outcome: outcomeOf(result, a2a), ...metered, ...tag }, steward);
    // Deferred: no reply waits on it, so it rides with the next receipt's batch instead of
    // putting a second fsync in front of the next decision (the receipt is durable already).
    this.#d.log.putOutcome('measurement', seq, record, { requestId: rid, bytes: result }, { deferred: true }).then(
      () => this.#inflight.delete(rid),
      () => this.#inflight.delete(rid),
    );
    return { response: encodeWireResponse({ decision: { verdict: 'allow' }, receipt, result }), deferred: true };
  }

  /**
   * A continuation of a multi round-trip MCP call (docs/node.md "Multi round-trip calls"): the
   * caller's signature is checked, the pending call of `state` taken for this caller, grant,
   * resource and tool (once), and the tool called again with the client's `inputResponses` and the
   * upstream's own `requestState` — no decision, no debit, no new receipt: the reply carries the
   * first round's receipt. A round that needs input again is kept again (round + 1).
   * Refusals (no receipt, nothing sent upstream): `input-state-invalid` naming why (`bad-signature`,
   * the {@link Continuations.take} refusals, or `revoked`: a link of the chain was revoked or
   * steered since the first round; the pending call is then gone).
   */
  async #continue(body: Uint8Array, req: WireRequest, binding: EndpointBinding, args: Record<string, unknown>, state: string, io: CallIo) {
    const signed = wireRequestSigningBytesOf(body, req);
    const sigOk = this.#d.pool ? await this.#d.pool.verify(req.caller, signed, req.signature) : callerSignatureOk(req, signed);
    if (!sigOk) return this.#error(NodeErrorCodes.INPUT_STATE_INVALID, 'bad-signature: the continuation is not signed by its caller');
    const who = partyOf(req, args);
    const p = this.#continuations.take(state, who);
    if ('refused' in p) {
      const why = {
        malformed: 'input.state is not a continuation token of this node',
        unknown: 'no call waits for this continuation (already continued, waited past abuse.input_pending_ttl_s, or never issued here)',
        mismatch: 'the continuation token does not verify for this caller, grant, resource, tool and arguments (tampered, or another call)',
      }[p.refused];
      return this.#error(NodeErrorCodes.INPUT_STATE_INVALID, `${p.refused}: ${why}; nothing was sent upstream or debited`);
    }
    // A call continues only while its grant stands: a revoked (or steered) link ends it (§4.3).
    const revoked = [req.frame.grant_id, ...req.chain.map((g) => grantId(g.grant))].find((id) => this.#state.revoked.has(id));
    if (revoked !== undefined) {
      return this.#error(
        NodeErrorCodes.INPUT_STATE_INVALID,
        `revoked: grant ${revoked} was revoked after the call's first round; nothing was sent upstream`,
      );
    }
    // Nor past any link's expiry (§4): the call was allowed while it stood, not forever.
    const nowS = this.#d.clockS();
    const lapsed = req.chain.find((g) => g.grant.expiry !== 0 && g.grant.expiry <= nowS);
    if (lapsed !== undefined) {
      return this.#error(
        NodeErrorCodes.INPUT_STATE_INVALID,
        `expired: grant ${grantId(lapsed.grant)} expired after the call's first round; nothing was sent upstream`,
      );
    }
    const caller = { did: req.caller, grantId: req.frame.grant_id, resource: req.frame.resource, peer: io.peer, receipt: p.receiptId };
    const resumed: McpInput = { ...io.input, ...(p.upstreamState !== undefined ? { state: p.upstreamState } : {}) };
    if (p.upstreamState === undefined) delete (resumed as { state?: string }).state;
    const inv = await this.#invoke(binding, req.frame.action, args, { ...io, input: resumed, caller });
    const result = inv.unavailable === undefined ? this.#pend(inv.result, p.receipt, p.round + 1, who, p.firstAtMs) : inv.result;
    return encodeWireResponse({ decision: { verdict: 'allow' }, receipt: p.receipt, result });
  }

  /**
   * A continuation by request id `rid`: the reply kept for a re-send of the same bytes (§11), else
   * {@link #continue}, registered in flight meanwhile; a reply that is not an error is kept.
   */
  async #continueOnce(
    body: Uint8Array,
    req: WireRequest,
    rid: ContentId,
    binding: EndpointBinding,
    args: Record<string, unknown>,
    state: string,
    io: CallIo,
  ): Promise<Uint8Array> {
    const kept = this.#continuedReply(rid);
    if (kept !== undefined) {
      this.#d.metrics.replays.inc();
      return kept;
    }
    const p = this.#continue(body, req, binding, args, state, io);
    this.#inflight.set(rid, p);
    try {
      const reply = await p;
      if (this.#errorCodes.get(reply) === undefined) this.#keepContinued(rid, reply);
      return reply;
    } finally {
      this.#inflight.delete(rid);
    }
  }

  /** The reply kept for continuation `rid` (dropping those past the pending calls' lifetime), or undefined. */
  #continuedReply(rid: ContentId): Uint8Array | undefined {
    const ttl = (this.#d.continuationLimits ?? DEFAULT_CONTINUATION_LIMITS).ttlMs;
    const now = Date.now();
    for (const [k, v] of this.#continued) {
      if (now - v.atMs < ttl) break;
      this.#continued.delete(k);
      this.#continuedBytes -= v.reply.length;
    }
    return this.#continued.get(rid)?.reply;
  }

  /** Keeps a continuation's reply for its re-sends, evicting the oldest past {@link CONTINUED_KEEP_BYTES}. */
  #keepContinued(rid: ContentId, reply: Uint8Array): void {
    this.#continued.set(rid, { reply, atMs: Date.now() });
    this.#continuedBytes += reply.length;
    for (const [k, v] of this.#continued) {
      if (this.#continuedBytes <= CONTINUED_KEEP_BYTES) break;
      this.#continued.delete(k);
      this.#continuedBytes -= v.reply.length;
    }
  }

  /**
   * A result that is an MCP `input_required` result (2026-07-28) is kept as a pending call bound
   * to `receipt` (round `round`), its `requestState` replaced by the node's continuation token;
   * any other result is returned as it is. A call the node cannot keep (its bounds) becomes an
   * `input-limit` endpoint error result.
   */
  #pend(result: Uint8Array, receipt: Uint8Array, round: number, who: ContinuationParty, firstAtMs?: number): Uint8Array {
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(dec.decode(result)) as Record<string, unknown>;
    } catch {
      return result;
    }
    if (typeof v !== 'object' || v === null || v['resultType'] !== 'input_required') return result;
    const upstream = v['requestState'];
    const r = this.#continuations.mint({
      ...who,
      receipt,
      receiptId: receiptId(receipt),
      round,
      upstreamState: typeof upstream === 'string' ? upstream : undefined,
      ...(firstAtMs !== undefined ? { firstAtMs } : {}),
    });
    if ('refused' in r) {
      const why = {
        'caller-limit': 'abuse.input_pending_per_caller',
        'total-limit': 'abuse.input_pending_total',
        'state-too-large': "a requestState above the node's bound",
        'rounds-exceeded': `more rounds than abuse.input_rounds_max (${round - 1} already)`,
        expired: 'past abuse.input_pending_ttl_s from its first round',
      }[r.refused];
      return errorResult(
        EndpointErrorCodes.INPUT_LIMIT,
        `the tool asked for input, and the node cannot keep the call waiting (${r.refused}: ${why})`,
      );
    }
    return enc.encode(JSON.stringify({ ...v, requestState: r.token }));
  }

  /**
   * Calls the endpoint, metered (§5), telling it who called (`caller`: did:key, grant id, receipt id). Resolves to the result bytes and the meter's figure, or to
   * `unavailable` when the endpoint rejected with endpoint-unavailable (the call had no answer;
   * nothing is charged for it). Never rejects.
   */
  async #invoke(
    binding: EndpointBinding,
    tool: string,
    args: Record<string, unknown>,
    io: CallIo & { readonly caller: NonNullable<InvokeOptions['caller']> },
  ): Promise<{ result: Uint8Array; metered?: Cost; unavailable?: { message: string; phase: 'start' | 'call' } }> {
    let result: Uint8Array;
    let metered: Cost | undefined;
    let unavailable: { message: string; phase: 'start' | 'call' } | undefined;
    try {
      // Who called goes to the upstream (docs/node.md "Endpoints and results"), never in the arguments.
      const opts: InvokeOptions = {
        ...(io.input !== undefined ? { input: io.input } : {}),
        ...(io.emit !== undefined ? { onNotification: io.emit } : {}),
        ...(io.signal !== undefined ? { signal: io.signal } : {}),
        caller: io.caller,
      };
      const r = await this.#d.meter.measure(tool, () => binding.endpoint.invoke(tool, args, opts));
      result = r.result;
      metered = r.cost;
    } catch (e) {
      if (e instanceof MeteredError) metered = e.cost;
      const cause = e instanceof MeteredError ? e.cause : e;
      unavailable = endpointUnavailableIn(cause);
      // The receipt stands; the result says why the tool gave no answer (docs/node.md).
      result =
        unavailable !== undefined
          ? errorResult(EndpointErrorCodes.UNAVAILABLE, unavailable.message)
          : cause instanceof EndpointError
            ? errorResult(cause.code, cause.message)
            : errorResult(EndpointErrorCodes.FAILED, `${binding.name}: ${(cause as Error)?.message ?? String(cause)}`);
    }
    if (metered !== undefined) {
      this.#d.metrics.meteredUj.inc({ provenance: metered.provenance }, Number(metered.uj));
      this.#d.metrics.meteredJoules.inc({ provenance: metered.provenance }, Number(metered.uj) / 1e6);
    }
    if (result.length > RESULT_CAP_BYTES) {
      result = errorResult(EndpointErrorCodes.FAILED, `${binding.name}: result of ${result.length} bytes exceeds ${RESULT_CAP_BYTES}`);
    }
    this.#d.metrics.endpointCalls.inc({
      resource: binding.name,
      outcome: unavailable !== undefined ? EndpointErrorCodes.UNAVAILABLE : outcomeOf(result, binding.endpoint.kind === 'a2a'),
    });
    return { result, ...(metered !== undefined ? { metered } : {}), ...(unavailable !== undefined ? { unavailable } : {}) };
  }

  /** The original response of a request decided before (§11 idempotent replay), or undefined if the index entry is not it. */
  async #fromLog(rid: ContentId, seq: number): Promise<Uint8Array | undefined> {
    const receipt = await this.#d.log.getReceipt(seq);
    if (receipt === undefined) return undefined;
    const opened = openReceipt(receipt, this.#d.steward.did);
    if (!opened.ok || opened.value.request_id !== rid) return undefined;
    const core = opened.value;
    if (core.verdict === 'deny') {
      return encodeWireResponse({ decision: { verdict: 'deny', deny_reason: core.deny_reason! }, receipt });
    }
    if (!this.#d.endpoints.has(core.resource)) return encodeWireResponse({ decision: { verdict: 'allow' }, receipt });
    const result =
      (await this.#d.log.getResult(rid)) ??
      errorResult(
        EndpointErrorCodes.RESULT_LOST,
        'the node stopped before this call’s result was kept; the receipt stands, and the tool may or may not have run',
      );
    return encodeWireResponse({ decision: { verdict: 'allow' }, receipt, result });
  }

  async #revoke(sr: SignedRevocation, grant?: Grant): Promise<Uint8Array> {
    let r: Awaited<ReturnType<RevocationStore['submit']>>;
    try {
      r = await this.#d.revocations.submit(sr, grant);
    } catch (e) {
      this.#fail(e as Error);
      return this.#error(NodeErrorCodes.LOG_FAILED, `the revocation could not be made durable: ${(e as Error).message}`);
    }
    if (!r.ok) {
      const code = r.error.code === 'busy' ? NodeErrorCodes.BUSY : r.error.code;
      return this.#error(code, r.error.why);
    }
    this.#d.logger.info({ grant_id: r.value.grantId, admitted: r.value.admitted }, 'revocation recorded');
    await Promise.all((this.#d.revocationOutlets ?? []).map((o) => this.#propagate(o, sr)));
    return encodeWireMessage({ kind: 'revoked', grant_id: r.value.grantId });
  }

  /**
   * Puts an amendment in force at this node (§4.7, node/amendments.ts), reading the steered
   * grant's spend from the ledger the decision reads, in the same turn as the soft revoke takes
   * effect. Used by the jcp/1 `amend` message and by feeds (the cluster's revocation stream).
   * Rejections: the §4.7 codes, `bad-signature`, `already-amended`; a node without an amendment
   * store refuses `unknown-message`.
   * @throws when the record cannot be made durable (the node then stops).
   */
  async applyAmendment(
    grant: SignedGrant,
    cp: SignedCheckpoint,
    sa: SignedAmendment,
    source: 'wire' | 'cluster' = 'cluster',
  ): Promise<Result<WireAmended, AmendmentRejection>> {
    const store = this.#d.amendments;
    if (store === undefined) return err({ code: NodeErrorCodes.UNKNOWN_MESSAGE, why: "this node does not take 'amend' messages" });
    // The record policy (node/issuerpolicy.ts): the steered grant's issuer signs the amendment.
    const policy = this.#d.issuerPolicy;
    const issuer = grant.grant.issuer;
    const refused = (r: RecordRefusal): AmendmentRejection => {
      this.#d.metrics.recordsRefused.inc({ kind: 'amendment', source, reason: r.reason });
      return { code: r.reason === 'issuer' ? NodeErrorCodes.ISSUER_REFUSED : NodeErrorCodes.RECORD_LIMIT, why: r.why };
    };
    if (policy !== undefined) {
      const r = policy.refuses(issuer, encodeWireMessage({ kind: 'amend', grant, checkpoint: cp, amendment: sa }).length);
      if (r !== undefined) return err(refused(r));
      // The count bound: an amendment already in force here is still answered (idempotent).
      const full = store.steered(grantId(grant.grant)) ? undefined : policy.amendmentsFull(issuer, store.size);
      if (full !== undefined) return err(refused(full));
    }
    const admit =
      policy === undefined
        ? undefined
        : () => {
            const r = policy.charge(issuer);
            return r === undefined ? undefined : refused(r);
          };
    try {
      const r = await store.submit(grant, cp, sa, this.#state.ledger, admit);
      if (r.ok) {
        this.#d.logger.info(
          {
            grant_id: r.value.grant_id,
            continuation_id: r.value.continuation_id,
            budget_uj: String(r.value.budget_uj),
            steered_spent_uj: String(r.value.steered_spent_uj),
          },
          'amendment in force',
        );
      }
      return r;
    } catch (e) {
      this.#fail(e as Error);
      throw e;
    }
  }

  /** The jcp/1 `amend` message: applies it, hands it on to the cluster, answers `amended` or `amendment-refused`. */
  async #amend(grant: SignedGrant, cp: SignedCheckpoint, sa: SignedAmendment): Promise<Uint8Array> {
    if (this.#d.amendments === undefined) return this.#error(NodeErrorCodes.UNKNOWN_MESSAGE, "this node does not take 'amend' messages");
    let r: Result<WireAmended, AmendmentRejection>;
    try {
      r = await this.applyAmendment(grant, cp, sa, 'wire');
    } catch (e) {
      return this.#error(NodeErrorCodes.LOG_FAILED, `the amendment could not be made durable: ${(e as Error).message}`);
    }
    if (!r.ok) {
      if (r.error.code === NodeErrorCodes.ISSUER_REFUSED || r.error.code === NodeErrorCodes.RECORD_LIMIT) {
        return this.#error(r.error.code, r.error.why);
      }
      return this.#error(NodeErrorCodes.AMENDMENT_REFUSED, `${r.error.code}: ${r.error.why}`);
    }
    const message = encodeWireMessage({ kind: 'amend', grant, checkpoint: cp, amendment: sa });
    await Promise.all((this.#d.amendmentOutlets ?? []).map((o) => this.#handOnAmendment(o, r.value.grant_id, message)));
    return encodeWireMessage({ kind: 'amended', amended: r.value });
  }

  /** Hands an admitted amendment to one outlet; on failure retries in the background like a revocation (never rejects). */
  async #handOnAmendment(o: AmendmentOutlet, steeredId: ContentId, message: Uint8Array, attempt = 0): Promise<void> {
    try {
      await o.publish(steeredId, message);
    } catch (e) {
      if (this.#retriesStopped) return;
      const delay = Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
      this.#d.logger.warn(
        { grant_id: steeredId, outlet: o.name, attempt, retry_ms: delay, why: (e as Error).message },
        'amendment in force here but not handed on to the cluster yet; retrying',
      );
      const t = setTimeout(() => {
        this.#retryTimers.delete(t);
        void this.#handOnAmendment(o, steeredId, message, attempt + 1);
      }, delay);
      t.unref();
      this.#retryTimers.add(t);
    }
  }

  #retryTimers = new Set<NodeJS.Timeout>();
  #retriesStopped = false;

  /** Hands an accepted revocation to one outlet; on failure keeps retrying in the background (never rejects). */
  async #propagate(
    o: { readonly name: string; publish(sr: SignedRevocation): Promise<void> },
    sr: SignedRevocation,
    attempt = 0,
  ): Promise<void> {
    try {
      await o.publish(sr);
      if (attempt > 0) this.#d.logger.info({ grant_id: sr.body.grant_id, outlet: o.name, attempt }, 'revocation handed on after retrying');
    } catch (e) {
      if (this.#retriesStopped) return;
      const delay = Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
      this.#d.logger.warn(
        { grant_id: sr.body.grant_id, outlet: o.name, attempt, retry_ms: delay, why: (e as Error).message },
        'revocation recorded here but not handed on to the cluster yet; retrying',
      );
      const t = setTimeout(() => {
        this.#retryTimers.delete(t);
        void this.#propagate(o, sr, attempt + 1);
      }, delay);
      t.unref();
      this.#retryTimers.add(t);
    }
  }

  /** Stops background retries of revocation hand-overs (the node is closing). */
  stopRetries(): void {
    this.#retriesStopped = true;
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
  }

  #fail(e: Error): void {
    if (this.#fatal) return;
    this.#fatal = e;
    this.#d.logger.fatal({ err: e }, 'the receipt log failed; stopping');
    this.#d.onFatal(e);
  }
}

/**
 * Error replies that do not charge the peer's bucket: the node's own faults and refusals that are
 * not the peer's doing. Every other error reply is a request that failed before a decision.
 */
const UNCHARGED: ReadonlySet<string> = new Set([
  NodeErrorCodes.LOG_FAILED,
  NodeErrorCodes.INTERNAL,
  NodeErrorCodes.BUSY,
  NodeErrorCodes.RATE_LIMITED,
]);

/** Most bytes of continuation replies kept for re-sends (64 MiB; the oldest go first). */
const CONTINUED_KEEP_BYTES = 64 << 20;

/** What a call needs of its connection: the notice emitter, the caller-gone signal, the peer address. */
interface CallIo {
  readonly emit: ((n: McpNotificationMessage) => void) | undefined;
  readonly signal: AbortSignal | undefined;
  readonly peer: string;
  /** The request's MCP multi round-trip material (capabilities; on a continuation the responses and the upstream's state). */
  readonly input?: McpInput;
}

/** Who continues a call: the request's caller, grant, resource and tool, and the call's arguments. */
function partyOf(req: WireRequest, args: Record<string, unknown>): ContinuationParty {
  return {
    caller: req.caller,
    grantId: req.frame.grant_id,
    resource: req.frame.resource,
    action: req.frame.action,
    argsDigest: argumentsDigest(args),
  };
}

/** The client capabilities the node passes upstream: only these (what an upstream may ask of a client mid-call). */
const INPUT_CAPABILITIES = ['sampling', 'elicitation', 'roots'] as const;

/**
 * A request's `input` (core/wire.ts; the JSON text of `{capabilities?, responses?, state?}`) as
 * {@link McpInput}, keeping only the `sampling`, `elicitation` and `roots` capabilities; undefined
 * when absent; a string saying why when it is not that shape.
 */
export function parseInput(text: string | undefined): McpInput | undefined | string {
  if (text === undefined) return undefined;
  const v = JSON.parse(text) as Record<string, unknown>; // the wire decoder checked it is a JSON object
  for (const k of Object.keys(v))
    if (!['capabilities', 'responses', 'state'].includes(k)) return `request.input: unknown key ${JSON.stringify(k.slice(0, 64))}`;
  const isObj = (x: unknown) => typeof x === 'object' && x !== null && !Array.isArray(x);
  const { capabilities, responses, state } = v;
  if (capabilities !== undefined && !isObj(capabilities)) return 'request.input.capabilities: expected an object';
  if (responses !== undefined && !isObj(responses)) return 'request.input.responses: expected an object';
  if (state !== undefined && typeof state !== 'string') return 'request.input.state: expected a string';
  const caps: Record<string, unknown> = {};
  for (const k of INPUT_CAPABILITIES) {
    const c = (capabilities as Record<string, unknown> | undefined)?.[k];
    if (c !== undefined) caps[k] = c;
  }
  return {
    ...(capabilities !== undefined ? { capabilities: caps } : {}),
    ...(responses !== undefined ? { responses: responses as Record<string, unknown> } : {}),
    ...(state !== undefined ? { state: state as string } : {}),
  };
}

/** Sends each upstream notification of request `rid` as a `notice` (docs/wire.md), in order. */
function noticeEmitter(rid: ContentId, notice: NoticeSink): (n: McpNotificationMessage) => void {
  return (n) => notice(encodeWireMessage({ kind: 'notice', request_id: rid, notification: JSON.stringify(n) }));
}

/** The caller signature check of §11 on this thread (never throws). */
function callerSignatureOk(req: WireRequest, signed: Uint8Array): boolean {
  try {
    return verify(parseDid(req.caller), signed, req.signature);
  } catch {
    return false;
  }
}

/** Tool arguments from a payload: a UTF-8 JSON object (absent payload = no arguments), or why not. */
export function parseArgs(payload: Uint8Array | undefined): Record<string, unknown> | string {
  if (payload === undefined) return {};
  let v: unknown;
  try {
    v = JSON.parse(dec.decode(payload));
  } catch {
    return 'request.payload: the endpoint takes a UTF-8 JSON object of tool arguments';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'request.payload: expected a JSON object of tool arguments';
  return v as Record<string, unknown>;
}

/** What a call's outcome record says of its result: `ok`, `tool-error`, `input-required`, an endpoint error code, or an agent task's end (node/a2a.ts). */
function outcomeOf(result: Uint8Array, a2a = false): string {
  // Cheap peek: our own error results carry jcp_error; anything else is the tool's own answer.
  if (result.length > (a2a ? 1 << 20 : 4096)) return 'ok';
  try {
    const v = JSON.parse(dec.decode(result)) as {
      jcp_error?: { code?: string };
      isError?: boolean;
      resultType?: unknown;
      [AGENT_REPLY_KEY]?: unknown;
    };
    if (v.jcp_error?.code) return v.jcp_error.code;
    // The tool asked for input: the call goes on in continuations (docs/node.md "Multi round-trip calls").
    if (v.resultType === 'input_required') return 'input-required';
    if (a2a && AGENT_REPLY_KEY in v) return agentOutcome(v[AGENT_REPLY_KEY]);
    return v.isError ? 'tool-error' : 'ok';
  } catch {
    return 'ok';
  }
}
