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
 * SHA-256 of the upstream's state, the caller, the grant, the resource, the tool and the SHA-256
 * of the call's arguments (sorted-key JSON). A token is taken once (a replay finds nothing), only
 * by the caller, grant, resource, tool *and arguments* it was minted for — a continuation is the
 * same call, never another one riding on its debit — and only within
 * {@link ContinuationLimits.ttlMs} of the call's *first* round (a deadline, not renewed by later
 * rounds); any changed byte fails the tag.
 *
 * Everything here is opened by callers, so it is bounded: rounds per call
 * ({@link ContinuationLimits.rounds}), pending calls per caller ({@link ContinuationLimits.perCaller})
 * and in total ({@link ContinuationLimits.total}), their age, and the size of the upstream state
 * kept ({@link ContinuationLimits.stateChars}). A new call past a count bound is kept and the
 * oldest pending call of that caller (per caller) or of the caller holding the most (in total) is
 * dropped: a caller who abandons calls only ever loses its own, never gets locked out, and a
 * crowd of callers cannot push out one who holds a few. Held in memory: a node that restarts
 * forgets its pending calls (their tokens are then refused).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** The bounds of the pending set (see the module comment). */
export interface ContinuationLimits {
  /** Pending calls one caller (did:key) may hold at once. */
  readonly perCaller: number;
  /** Pending calls the node holds at once, all callers together. */
  readonly total: number;
  /** How long after its first round a call may still be continued, ms. */
  readonly ttlMs: number;
  /** Most rounds of one call (the first included) that may ask for input. */
  readonly rounds?: number;
  /** Most characters of an upstream `requestState` the node keeps. */
  readonly stateChars: number;
}

/** The default bounds: 16 per caller, 1,024 in total, 10 minutes, 16 rounds, 64 Ki characters of state. */
export const DEFAULT_CONTINUATION_LIMITS: ContinuationLimits = {
  perCaller: 16,
  total: 1024,
  ttlMs: 600_000,
  rounds: 16,
  stateChars: 65_536,
};

/** The default of {@link ContinuationLimits.rounds}. */
export const DEFAULT_INPUT_ROUNDS = 16;

/** JSON with every object's keys sorted (arrays kept in order): the arguments' text for {@link argumentsDigest}. */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .filter((k) => o[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${sortedJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** SHA-256 (hex) of a call's arguments as sorted-key JSON: what binds a continuation to the same call. */
export function argumentsDigest(args: Record<string, unknown>): string {
  return createHash('sha256').update(sortedJson(args)).digest('hex');
}

/** Who continues a call: the verified caller, the frame's grant, resource and tool, and the call's arguments ({@link argumentsDigest}). */
export interface ContinuationParty {
  readonly caller: string;
  readonly grantId: string;
  readonly resource: string;
  readonly action: string;
  readonly argsDigest: string;
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
  /** When the call's first round asked for input (ms since the epoch): its deadline runs from here. */
  readonly firstAtMs: number;
  /** When it expires (ms since the epoch): first round + {@link ContinuationLimits.ttlMs}. */
  readonly expiresAtMs: number;
}

/** Why a continuation was refused (the `input-state-invalid` message says which). */
export type ContinuationRefusal = 'malformed' | 'unknown' | 'mismatch';

/**
 * Why a pending call could not be kept (the call's result then says so): `state-too-large`,
 * `rounds-exceeded` (the call asked for input more than {@link ContinuationLimits.rounds} times),
 * `expired` (a later round past the first round's deadline), `caller-limit` / `total-limit` only
 * when that bound is 0 (multi round-trip calls off; otherwise the oldest pending call is dropped).
 */
export type PendingRefusal = 'caller-limit' | 'total-limit' | 'state-too-large' | 'rounds-exceeded' | 'expired';

const b64u = (b: Uint8Array): string => Buffer.from(b).toString('base64url');

/** The pending multi round-trip calls of one node process (see the module comment). */
export class Continuations {
  readonly #limits: ContinuationLimits;
  readonly #key = randomBytes(32);
  readonly #now: () => number;
  readonly #byHandle = new Map<string, PendingCall>();
  /** Each caller's pending handles, oldest first. */
  readonly #perCaller = new Map<string, Set<string>>();
  #dropped = 0;

  /** `now`: the clock in ms since the epoch (tests pass their own). */
  constructor(limits: ContinuationLimits = DEFAULT_CONTINUATION_LIMITS, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  /** Pending calls held now (all callers). */
  get size(): number {
    return this.#byHandle.size;
  }

  /** Pending calls dropped so far to make room (their tokens are then `unknown`). */
  get dropped(): number {
    return this.#dropped;
  }

  #tag(handle: string, p: Omit<PendingCall, 'receipt' | 'expiresAtMs' | 'firstAtMs'>): Buffer {
    const digest = createHash('sha256')
      .update(p.upstreamState === undefined ? '\u0000none' : `s${p.upstreamState}`)
      .digest('hex');
    const fields = [
      'jcp1-continuation',
      handle,
      p.receiptId,
      String(p.round),
      digest,
      p.caller,
      p.grantId,
      p.resource,
      p.action,
      p.argsDigest,
    ];
    return createHmac('sha256', this.#key).update(JSON.stringify(fields)).digest();
  }

  /** Drops expired entries (deadlines run from each call's first round, so every entry is looked at: at most `total`). */
  #sweep(): void {
    const now = this.#now();
    for (const [h, p] of this.#byHandle) if (p.expiresAtMs <= now) this.#remove(h, p);
  }

  #remove(handle: string, p: PendingCall): void {
    this.#byHandle.delete(handle);
    const mine = this.#perCaller.get(p.caller);
    mine?.delete(handle);
    if (mine?.size === 0) this.#perCaller.delete(p.caller);
  }

  /** Drops the oldest pending call of `caller` (counted in {@link dropped}). */
  #dropOldestOf(caller: string): void {
    const oldest = this.#perCaller.get(caller)?.values().next().value;
    if (oldest === undefined) return;
    this.#remove(oldest, this.#byHandle.get(oldest)!);
    this.#dropped++;
  }

  /** The caller holding the most pending calls (the first such in the map's order). */
  #largestHolder(): string | undefined {
    let who: string | undefined;
    let most = 0;
    for (const [caller, set] of this.#perCaller) {
      if (set.size > most) {
        most = set.size;
        who = caller;
      }
    }
    return who;
  }

  /**
   * Keeps a call that needs input and returns its continuation token, or why it cannot be kept:
   * an upstream state above {@link ContinuationLimits.stateChars} (`state-too-large`), a round
   * past {@link ContinuationLimits.rounds} (`rounds-exceeded`), a later round past the first
   * round's deadline (`expired`). At the per-caller bound the caller's oldest pending call is
   * dropped; at the total bound the oldest of the caller holding the most.
   * `firstAtMs`: the first round's time (omitted: now, a first round).
   */
  mint(
    p: Omit<PendingCall, 'expiresAtMs' | 'firstAtMs'> & { readonly firstAtMs?: number },
  ): { token: string } | { refused: PendingRefusal } {
    this.#sweep();
    const now = this.#now();
    const firstAtMs = p.firstAtMs ?? now;
    if (p.upstreamState !== undefined && p.upstreamState.length > this.#limits.stateChars) return { refused: 'state-too-large' };
    if (p.round > (this.#limits.rounds ?? DEFAULT_INPUT_ROUNDS)) return { refused: 'rounds-exceeded' };
    if (firstAtMs + this.#limits.ttlMs <= now) return { refused: 'expired' };
    // A bound of 0 keeps nothing: multi round-trip calls are off (nothing to drop to make room).
    if (this.#limits.perCaller < 1) return { refused: 'caller-limit' };
    if (this.#limits.total < 1) return { refused: 'total-limit' };
    while ((this.#perCaller.get(p.caller)?.size ?? 0) >= this.#limits.perCaller) this.#dropOldestOf(p.caller);
    while (this.#byHandle.size >= this.#limits.total) {
      const who = this.#largestHolder();
      if (who === undefined) break;
      this.#dropOldestOf(who);
    }
    const handle = b64u(randomBytes(16));
    this.#byHandle.set(handle, { ...p, firstAtMs, expiresAtMs: firstAtMs + this.#limits.ttlMs });
    const mine = this.#perCaller.get(p.caller) ?? new Set<string>();
    this.#perCaller.set(p.caller, mine.add(handle));
    return { token: `jcp1.${handle}.${b64u(this.#tag(handle, p))}` };
  }

  /**
   * Takes the pending call of `token` for `who` (once: it is gone afterwards), or says why not:
   * `malformed` (not a token), `unknown` (never minted here, already used, expired or dropped:
   * swept first), `mismatch` (the tag fails: a changed token, or another caller, grant, resource,
   * tool or arguments).
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
