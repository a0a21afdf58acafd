/**
 * The request path of the enforcement node (spec §11, §7, §8.1; DESIGN "The way data flows"),
 * from one decoded jcp/1 message body to the response body, in this order:
 *
 *  1. canonical check and schema check (`decodeWireMessage`, or `ChainCache` for a chain seen
 *     before; the frame cap was checked by the connection's `FrameReader` before any
 *     allocation) → error reply, no receipt;
 *  2. skew check: `|request.now − node clock| > max_skew_s` → error `clock-skew`;
 *  3. idempotent replay by `request_id`: a request decided before gets its original response
 *     back (the receipt from the log, the kept result), and nothing is debited twice;
 *  4. payload check for a resource with an endpoint (a JSON object of tool arguments) → error
 *     `payload-invalid`; then the tool name against the upstream's `tools/list` → error
 *     `unknown-tool` (when the node has no list yet it connects to get one; an upstream it cannot
 *     reach has no list, and the call goes on to the decision);
 *  5. caller signature (on a worker thread when the node has them): a failure is a sealed
 *     `bad-signature` deny (`denied()`), evidence like any other decision;
 *  6. the decision with the chain (`decide`, §4.2, §7), priced at no less than the node's own
 *     estimate for the action, then the budget policy hook; the debit on allow;
 *  7. the receipt sealed (`seq`, `prev`, `request_id`, `at`) and appended to the log; the reply is
 *     sent only once the receipt's batch is durable (fsync'd);
 *  8. on allow, the endpoint is invoked (metered) and its result goes back as data (§6); a request
 *     with `notify: 1` gets the upstream's progress and logging notifications as `notice`
 *     messages first.
 *
 * `{list_tools: {}}` is answered with every endpoint's known tools (`tool_list`), no receipt.
 *
 * Steps 6–7 run synchronously, one request at a time, so the ledger, `seq` and the `prev` chain
 * are consistent; everything that waits (signature workers, fsync, endpoints) happens outside
 * that section, so a slow request never holds up the others.
 */
import type { Logger } from 'pino';
import type { Actor } from '../core/actor.ts';
import { type Decision, type DecisionRequest, type DecisionState, decide, denied } from '../core/decision.ts';
import { DenyReasons } from '../core/deny.ts';
import { isJcpError } from '../core/errors.ts';
import { type ContentId, contentIdOfBytes } from '../core/hash.ts';
import type { Ledger } from '../core/ledger.ts';
import { openReceipt, receiptCoreFor, receiptId, sealReceipt } from '../core/receipt.ts';
import type { SignedRevocation } from '../core/revocation.ts';
import type { TrustRoots } from '../core/trust.ts';
import { parseDid } from '../core/didkey.ts';
import { verify } from '../core/ed25519.ts';
import type { Grant } from '../core/grant.ts';
import { MAX_ERROR_MESSAGE, type WireMessage, type WireRequest, encodeWireMessage, encodeWireResponse } from '../core/wire.ts';
import { MeteredError } from '../meter/index.ts';
import { ChainCache } from './chaincache.ts';
import { NodeErrorCodes, type WireErrorCode } from './codes.ts';
import { type Endpoint, EndpointError, EndpointErrorCodes, type McpNotificationMessage, errorResult } from './endpoint.ts';
import type { NoticeSink } from './server.ts';
import type { BudgetPolicy } from './hooks.ts';
import type { NodeMetrics } from './metrics.ts';
import { type NodeMeter, priceCall } from './pricing.ts';
import type { ReceiptLog } from './receiptlog.ts';
import type { RequestIndex } from './requestindex.ts';
import type { RevocationStore } from './revocations.ts';
import { signingBytesOf } from './signing.ts';
import type { WorkerPool } from './workers.ts';

/** Results larger than this (bytes) are replaced by an `endpoint-failed` error result. */
export const RESULT_CAP_BYTES = 8 << 20;

/** A guarded resource's endpoint as the enforcer sees it. */
export interface EndpointBinding {
  readonly name: string;
  readonly endpoint: Endpoint;
}

/** Everything the request path uses. */
export interface EnforcerDeps {
  readonly steward: Actor;
  readonly log: ReceiptLog;
  readonly ledger: Ledger;
  readonly requests: RequestIndex;
  /** Next `seq` to seal, and the id of the last receipt (the log head). */
  readonly nextSeq: number;
  readonly headId: ContentId | undefined;
  readonly trust: TrustRoots;
  readonly revocations: RevocationStore;
  readonly meter: NodeMeter;
  /** resource content id → endpoint. */
  readonly endpoints: ReadonlyMap<ContentId, EndpointBinding>;
  readonly metrics: NodeMetrics;
  readonly logger: Logger;
  /** Largest accepted |now − clock|, seconds. */
  readonly maxSkewS: number;
  /** The node's clock, unix seconds. */
  readonly clockS: () => number;
  /** Signature workers; undefined = verify on this thread. */
  readonly pool?: WorkerPool | undefined;
  readonly budgetPolicy?: BudgetPolicy | undefined;
  /** Called once when the log can no longer be written: the node must stop. */
  readonly onFatal: (e: Error) => void;
}

const dec = new TextDecoder('utf-8', { fatal: true });

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
  #nextSeq: number;
  #headId: ContentId | undefined;
  #fatal: Error | undefined;

  constructor(deps: EnforcerDeps) {
    this.#d = deps;
    this.#nextSeq = deps.nextSeq;
    this.#headId = deps.headId;
    this.#state = { ledger: deps.ledger, revoked: deps.revocations, trust: deps.trust };
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
   * Handles one message body and resolves to the response body. `notice` sends the `notice`
   * messages of a request that asked for them (`notify: 1`) before its response. Never rejects.
   */
  async handle(body: Uint8Array, notice?: NoticeSink): Promise<Uint8Array> {
    try {
      if (this.#fatal) return this.#error(NodeErrorCodes.LOG_FAILED, 'the receipt log failed; this node is stopping');
      let msg: WireMessage;
      try {
        msg = this.#chains.decode(body);
      } catch (e) {
        if (isJcpError(e)) return this.#error(e.code, e.message);
        throw e;
      }
      if (msg.kind === 'request') return await this.#request(body, msg.request, notice);
      if (msg.kind === 'revoke') return await this.#revoke(msg.revocation, msg.grant);
      if (msg.kind === 'list_tools') return await this.#listTools();
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
    return errorBody(code, message);
  }

  /** `tool_list`: each endpoint's last known tools, in config order (listing first where none is known). */
  async #listTools(): Promise<Uint8Array> {
    const bindings = [...this.#d.endpoints.entries()];
    await Promise.all(bindings.map(([, b]) => b.endpoint.ensureTools()));
    return encodeWireMessage({
      kind: 'tool_list',
      resources: bindings.map(([id, b]) => ({ name: b.name, resource: id, tools: JSON.stringify(b.endpoint.tools() ?? []) })),
    });
  }

  async #request(body: Uint8Array, req: WireRequest, notice: NoticeSink | undefined): Promise<Uint8Array> {
    const t0 = performance.now();
    const clock = this.#d.clockS();
    if (Math.abs(req.now - clock) > this.#d.maxSkewS) {
      return this.#error(
        NodeErrorCodes.CLOCK_SKEW,
        `request.now ${req.now} is ${req.now - clock} s from the node clock (max_skew_s ${this.#d.maxSkewS})`,
      );
    }
    // The body is canonical (decode re-encoded it byte for byte), so its hash is `requestIdOf(req)`.
    const rid = contentIdOfBytes(body);
    const inflight = this.#inflight.get(rid);
    if (inflight !== undefined) {
      this.#d.metrics.replays.inc();
      return await inflight;
    }
    const seq = this.#d.requests.get(rid);
    if (seq !== undefined) {
      const replayed = await this.#fromLog(rid, seq);
      if (replayed !== undefined) {
        this.#d.metrics.replays.inc();
        return replayed;
      }
    }
    const binding = this.#d.endpoints.get(req.frame.resource);
    let args: Record<string, unknown> | undefined;
    if (binding !== undefined) {
      const parsed = parseArgs(req.payload);
      if (typeof parsed === 'string') return this.#error(NodeErrorCodes.PAYLOAD_INVALID, parsed);
      args = parsed;
      let status = binding.endpoint.toolStatus(req.frame.action);
      if (status === 'unlisted') {
        await binding.endpoint.ensureTools();
        status = binding.endpoint.toolStatus(req.frame.action);
      }
      if (status === 'unknown') {
        return this.#error(NodeErrorCodes.UNKNOWN_TOOL, `${binding.name} has no tool ${JSON.stringify(req.frame.action.slice(0, 128))}`);
      }
    }
    const emit = req.notify === 1 && notice !== undefined ? noticeEmitter(rid, notice) : undefined;
    // Registered before deciding starts, so a copy arriving meanwhile waits for this decision.
    let start!: () => void;
    const p = new Promise<void>((r) => {
      start = r;
    }).then(() => this.#decideNew(body, req, rid, t0, binding, args, emit));
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
    emit: ((n: McpNotificationMessage) => void) | undefined,
  ): Promise<Uint8Array> {
    let release = true;
    try {
      const signed = signingBytesOf(body, req);
      const sigOk = this.#d.pool ? await this.#d.pool.verify(req.caller, signed, req.signature) : callerSignatureOk(req, signed);
      if (this.#fatal) return this.#error(NodeErrorCodes.LOG_FAILED, 'the receipt log failed; this node is stopping');
      // --- serialized section: decide, debit, seal (no await until the append is queued) ---
      this.#d.revocations.noteChain(req.chain);
      const cost = priceCall(req.cost, this.#d.meter.estimateUj(req.frame.action));
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
      this.#d.requests.set(rid, seq);
      const m = this.#d.metrics;
      m.decisionSeconds.observe((performance.now() - t0) / 1000);
      this.#decisionCounter(d.verdict === 'deny' ? d.deny.reason : 'none').inc();
      if (d.verdict === 'deny') {
        return encodeWireResponse({ decision: { verdict: 'deny', deny_reason: d.deny.reason }, receipt });
      }
      m.debitedUj.inc(Number(cost.uj));
      this.#d.budgetPolicy?.committed?.(dreq, d, receipt);
      if (binding === undefined) return encodeWireResponse({ decision: { verdict: 'allow' }, receipt });
      const result = await this.#invoke(binding, req.frame.action, args ?? {}, emit);
      release = false;
      this.#d.log.putResult(rid, result).then(
        () => this.#inflight.delete(rid),
        () => this.#inflight.delete(rid),
      );
      return encodeWireResponse({ decision: { verdict: 'allow' }, receipt, result });
    } finally {
      if (release) this.#inflight.delete(rid);
    }
  }

  async #invoke(
    binding: EndpointBinding,
    tool: string,
    args: Record<string, unknown>,
    emit: ((n: McpNotificationMessage) => void) | undefined,
  ): Promise<Uint8Array> {
    let result: Uint8Array;
    try {
      const opts = emit !== undefined ? { onNotification: emit } : {};
      const metered = await this.#d.meter.measure(tool, () => binding.endpoint.invoke(tool, args, opts));
      result = metered.result;
      this.#d.metrics.meteredUj.inc({ provenance: metered.cost.provenance }, Number(metered.cost.uj));
    } catch (e) {
      if (e instanceof MeteredError) this.#d.metrics.meteredUj.inc({ provenance: e.cost.provenance }, Number(e.cost.uj));
      const cause = e instanceof MeteredError ? e.cause : e;
      // The receipt stands; the result says why the tool gave no answer (docs/node.md).
      result =
        cause instanceof EndpointError
          ? errorResult(cause.code, cause.message)
          : errorResult(EndpointErrorCodes.FAILED, `${binding.name}: ${(cause as Error)?.message ?? String(cause)}`);
    }
    if (result.length > RESULT_CAP_BYTES) {
      result = errorResult(EndpointErrorCodes.FAILED, `${binding.name}: result of ${result.length} bytes exceeds ${RESULT_CAP_BYTES}`);
    }
    this.#d.metrics.endpointCalls.inc({ resource: binding.name, outcome: outcomeOf(result) });
    return result;
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
      return this.#error(r.error.code === 'busy' ? NodeErrorCodes.BUSY : NodeErrorCodes.REVOCATION_REFUSED, r.error.why);
    }
    this.#d.logger.info({ grant_id: r.value.grantId, admitted: r.value.admitted }, 'revocation recorded');
    return encodeWireMessage({ kind: 'revoked', grant_id: r.value.grantId });
  }

  #fail(e: Error): void {
    if (this.#fatal) return;
    this.#fatal = e;
    this.#d.logger.fatal({ err: e }, 'the receipt log failed; stopping');
    this.#d.onFatal(e);
  }
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

function outcomeOf(result: Uint8Array): string {
  // Cheap peek: our own error results carry jcp_error; anything else is the tool's own answer.
  if (result.length > 4096) return 'ok';
  try {
    const v = JSON.parse(dec.decode(result)) as { jcp_error?: { code?: string }; isError?: boolean };
    if (v.jcp_error?.code) return v.jcp_error.code;
    return v.isError ? 'tool-error' : 'ok';
  } catch {
    return 'ok';
  }
}
