/**
 * Pending MCP multi round-trip calls (MCP 2026-07-28, SEP-2322 "multi round-trip requests";
 * docs/node.md "Multi round-trip calls"). An upstream tool that needs input mid-call answers with
 * an `input_required` result (`inputRequests`, maybe its own `requestState`). The node's call is
 * then not over: the node keeps what the next round needs here (the first round's receipt, the
 * round number, the upstream's `requestState`, who may continue it) and hands the caller a
 * continuation token in its place. A continuation request carrying the token (and the MCP
 * client's `inputResponses`) is sent upstream with the upstream's own state, with no second
 * decision and no second debit: the call stays bound to the first round's receipt.
 *
 * The token is `jcp1.<handle>.<tag>` (base64url): a random 16-byte handle and an HMAC-SHA-256
 * (RFC 2104, a key of this process) over the handle, the first receipt's id, the round, the
 * SHA-256 of the upstream's state, the caller, the grant, the resource and the tool. A token is
 * taken once (a replay finds nothing), only by the caller, grant, resource and tool it was minted
 * for, and only within {@link ContinuationLimits.ttlMs}; any changed byte fails the tag.
 *
 * Everything here is opened by callers, so it is bounded: pending calls per caller
 * ({@link ContinuationLimits.perCaller}) and in total ({@link ContinuationLimits.total}), their
 * age, and the size of the upstream state kept ({@link ContinuationLimits.stateChars}). Held in
 * memory: a node that restarts forgets its pending calls (their tokens are then refused).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** The bounds of the pending set (see the module comment). */
export interface ContinuationLimits {
  /** Pending calls one caller (did:key) may hold at once. */
  readonly perCaller: number;
  /** Pending calls the node holds at once, all callers together. */
  readonly total: number;
  /** How long a pending call may wait for its continuation, ms. */
  readonly ttlMs: number;
  /** Most characters of an upstream `requestState` the node keeps. */
  readonly stateChars: number;
}

/** The default bounds: 16 per caller, 1,024 in total, 10 minutes, 64 Ki characters of state. */
export const DEFAULT_CONTINUATION_LIMITS: ContinuationLimits = { perCaller: 16, total: 1024, ttlMs: 600_000, stateChars: 65_536 };

/** Who continues a call: the verified caller and the frame's grant, resource and tool. */
export interface ContinuationParty {
  readonly caller: string;
  readonly grantId: string;
  readonly resource: string;
  readonly action: string;
}

/** A call waiting for its continuation. */
export interface PendingCall extends ContinuationParty {
  /** The first round's receipt (COSE bytes) and its id: every round is bound to it. */
  readonly receipt: Uint8Array;
  readonly receiptId: string;
  /** The round the upstream's `input_required` answered (1 for the first call). */
  readonly round: number;
  /** The upstream's own `requestState`, or undefined when it sent none. */
  readonly upstreamState: string | undefined;
  /** When it expires (ms since the epoch). */
  readonly expiresAtMs: number;
}

/** Why a continuation was refused (the `input-state-invalid` message says which). */
export type ContinuationRefusal = 'malformed' | 'unknown' | 'mismatch';

/** Why a pending call could not be kept (the call's result then says so). */
export type PendingRefusal = 'caller-limit' | 'total-limit' | 'state-too-large';

const b64u = (b: Uint8Array): string => Buffer.from(b).toString('base64url');

/** The pending multi round-trip calls of one node process (see the module comment). */
export class Continuations {
  readonly #limits: ContinuationLimits;
  readonly #key = randomBytes(32);
  readonly #now: () => number;
  readonly #byHandle = new Map<string, PendingCall>();
  readonly #perCaller = new Map<string, number>();

  /** `now`: the clock in ms since the epoch (tests pass their own). */
  constructor(limits: ContinuationLimits = DEFAULT_CONTINUATION_LIMITS, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  /** Pending calls held now (all callers). */
  get size(): number {
    return this.#byHandle.size;
  }

  #tag(handle: string, p: Omit<PendingCall, 'receipt' | 'expiresAtMs'>): Buffer {
    const digest = createHash('sha256')
      .update(p.upstreamState === undefined ? '\u0000none' : `s${p.upstreamState}`)
      .digest('hex');
    const fields = ['jcp1-continuation', handle, p.receiptId, String(p.round), digest, p.caller, p.grantId, p.resource, p.action];
    return createHmac('sha256', this.#key).update(JSON.stringify(fields)).digest();
  }

  /** Drops expired entries (the map is in mint order and every entry lives as long). */
  #sweep(): void {
    const now = this.#now();
    for (const [h, p] of this.#byHandle) {
      if (p.expiresAtMs > now) break;
      this.#remove(h, p);
    }
  }

  #remove(handle: string, p: PendingCall): void {
    this.#byHandle.delete(handle);
    const n = (this.#perCaller.get(p.caller) ?? 1) - 1;
    if (n <= 0) this.#perCaller.delete(p.caller);
    else this.#perCaller.set(p.caller, n);
  }

  /**
   * Keeps a call that needs input and returns its continuation token, or why it cannot be kept
   * (the caller's or the node's pending calls at their bound, or an upstream state above
   * {@link ContinuationLimits.stateChars}).
   */
  mint(p: Omit<PendingCall, 'expiresAtMs'>): { token: string } | { refused: PendingRefusal } {
    this.#sweep();
    if (p.upstreamState !== undefined && p.upstreamState.length > this.#limits.stateChars) return { refused: 'state-too-large' };
    if ((this.#perCaller.get(p.caller) ?? 0) >= this.#limits.perCaller) return { refused: 'caller-limit' };
    if (this.#byHandle.size >= this.#limits.total) return { refused: 'total-limit' };
    const handle = b64u(randomBytes(16));
    this.#byHandle.set(handle, { ...p, expiresAtMs: this.#now() + this.#limits.ttlMs });
    this.#perCaller.set(p.caller, (this.#perCaller.get(p.caller) ?? 0) + 1);
    return { token: `jcp1.${handle}.${b64u(this.#tag(handle, p))}` };
  }

  /**
   * Takes the pending call of `token` for `who` (once: it is gone afterwards), or says why not:
   * `malformed` (not a token), `unknown` (never minted here, already used, or expired: swept
   * first), `mismatch` (the tag fails: a changed token, or another caller, grant, resource or tool).
   * A token that fails its tag leaves the pending call in place for its rightful caller.
   */
  take(token: string, who: ContinuationParty): PendingCall | { refused: ContinuationRefusal } {
    this.#sweep();
    const parts = token.split('.');
    if (parts.length !== 3 || parts[0] !== 'jcp1') return { refused: 'malformed' };
    const [, handle, tagText] = parts as [string, string, string];
    const p = this.#byHandle.get(handle);
    if (p === undefined) return { refused: 'unknown' };
    const want = this.#tag(handle, { ...p, ...who });
    const got = Buffer.from(tagText, 'base64url');
    if (got.length !== want.length || !timingSafeEqual(got, want) || b64u(got) !== tagText) return { refused: 'mismatch' };
    this.#remove(handle, p);
    return p;
  }
}
