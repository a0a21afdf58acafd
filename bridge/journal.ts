/**
 * The bridge's call journal: what makes a re-sent `tools/call` the same jcp/1 request, and two
 * real calls two requests.
 *
 * A jcp/1 request's identity is the content id of its signed bytes (spec §11, `request_id`), and
 * Ed25519 signatures are deterministic (RFC 8032), so a call re-signed with the same fields is the
 * same request; the node answers it from its log and never debits it twice. The bridge chooses
 * two things per call: `now` (unix seconds) and the request's `nonce` (16 random bytes, a signed
 * field of the request: core/wire.ts), so two real calls with the same arguments in one second
 * are two requests. The journal fixes both:
 *
 * - A call is keyed by its *call key*: the agent, the resource, the tool, the exact argument text
 *   and the MCP request id (or the client's `_meta["jcp/idempotency_key"]` when given, which
 *   replaces the MCP request id). While a call with that key is open (sent, its answer not yet
 *   delivered to the MCP client), a call with the same key reuses its `now` and nonce: a re-send.
 * - A fresh call takes `now` from the clock and a fresh random nonce.
 * - An open entry is closed when its answer reached the client; one whose client went away stays
 *   open for `windowS` seconds (default 300).
 * - *Answered*: a closed entry still names the same request for `answeredWindowS` seconds after
 *   its `now` (default 30, the node's default `max_skew_s`: a later re-send of the same bytes would
 *   be refused `clock-skew`) for a call that names itself across answers ({@link AnsweredScope}):
 *   one with an idempotency key, or one from the MCP session that opened it (ids are unique within
 *   a session). So such a call whose answer was lost past the bridge (a proxy's retry), or the
 *   second of two replicas handed it after the first answered, is replayed by the node (the same
 *   result and receipt, no second debit), and a re-sent continuation gets the node's kept reply
 *   (docs/node.md). A call named only by its MCP id with no session (stdio, the stateless
 *   2026-07-28 leg: every client's ids start again at the same number) is a new call once
 *   answered: the same id and arguments then most often come from another client. A re-send later than the node's `max_skew_s` is
 *   refused `clock-skew`; the bridge keeps the entry open then (the original may have been
 *   debited: `result-unknown`, bridge/agent.ts), so the call is not signed afresh within `windowS`.
 *
 * With a file, entries are appended as JSON lines and fsync'd before the request leaves, so a
 * bridge restarted with calls in flight replays them when the client re-sends; without one the
 * journal lives in memory (re-sends within one bridge process only). For a threshold caller,
 * whose signatures are randomized, the entry also keeps the signature the call was sent with, so
 * the re-send after a restart is the same signed bytes ({@link CallJournal.signed}).
 *
 * Bridges that serve one agent from several processes (replicas behind a proxy) share one journal
 * instead: {@link Journal} is what the bridge needs of either, and bridge/journal-nats.ts keeps it in
 * a NATS JetStream KV bucket.
 *
 * Earlier bridges told identical calls apart by a *salt* of insignificant JSON whitespace after
 * the arguments (RFC 8259 §2; {@link saltText}) instead of a nonce. A journal line of theirs (a
 * salt `s`, no nonce `n`) still re-sends as it was signed: the same salt, no nonce.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { closeSync, fdatasyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';

/** One journal line: a call opened (`now`, nonce or salt set), signed (`g` set too) or closed (`done`). */
interface Line {
  /** Call key. */
  readonly k: string;
  /** Content key. */
  readonly c: string;
  /** The call's `now`, unix seconds. */
  readonly now: number;
  /** The call's salt (absent: 0; written by earlier bridges only). */
  readonly s?: number;
  /** The call's nonce, 32 lowercase hex digits (absent in earlier bridges' lines). */
  readonly n?: string;
  /** The signature the call was sent with, 128 lowercase hex digits (threshold callers only: see {@link CallJournal.signed}). */
  readonly g?: string;
  /** The digest of the MCP session that opened the call (32 hex digits; see {@link Journal.open}), when it had one. */
  readonly u?: string;
  readonly done?: 1;
}

/** A call's `now`, nonce and salt. */
export interface CallStamp {
  /** Unix seconds. */
  readonly nowS: number;
  /** The payload's whitespace salt (see {@link saltText}): 0, but for a re-send of an earlier bridge's call. */
  readonly salt: number;
  /** The request's nonce (16 bytes); undefined only for a re-send of an earlier bridge's call, signed without one. */
  readonly nonce: Uint8Array | undefined;
  /** True when this is a re-send of an open call. */
  readonly resent: boolean;
  /** For a re-send: the 64-byte signature the open call was sent with, when the journal kept it ({@link CallJournal.signed}). */
  readonly signature?: Uint8Array;
}

const WS = [' ', '\t', '\n', '\r'] as const;
/** Bytes of a request nonce (core/wire.ts `REQUEST_NONCE_BYTES`). */
const NONCE_BYTES = 16;
const NONCE_HEX = /^[0-9a-f]{32}$/;
const SIGNATURE_HEX = /^[0-9a-f]{128}$/;

/** The insignificant JSON whitespace of salt `k` (RFC 8259 §2): k in base 4, least significant digit first, digits 0–3 written space, tab, LF, CR; "" for 0. */
export function saltText(k: number): string {
  let out = '';
  for (let n = k; n > 0; n = Math.floor(n / 4)) out += WS[n % 4];
  return out;
}

/** Options of {@link CallJournal}. */
export interface JournalOptions {
  /** Journal file (JSON lines); absent: in memory. */
  readonly file?: string;
  /** How long an unanswered call stays re-sendable, seconds (default 300). */
  readonly windowS?: number;
  /** How long after its `now` an answered call is still the same request (see the module comment "Answered"), seconds (default {@link DEFAULT_ANSWERED_WINDOW_S}; 0: never). */
  readonly answeredWindowS?: number;
  /**
   * Kept for the options of earlier bridges, which started each process's salts there; fresh
   * calls now take a random nonce and no salt, so it no longer changes any request.
   */
  readonly saltBase?: number;
}

/**
 * Whether an answered call's key still names it (see the module comment "Answered"), given to
 * {@link Journal.open}: `{}` for a call with an idempotency key, `{session}` for a call named by
 * its MCP id within a session; absent for a call named by its MCP id alone.
 */
export interface AnsweredScope {
  /** The MCP session id; kept only as a digest ({@link sessionDigest}). */
  readonly session?: string;
}

/** The default answered window, seconds: the node's default `max_skew_s` (node/config.ts). */
export const DEFAULT_ANSWERED_WINDOW_S = 30;

/** The digest a journal keeps of an MCP session id (a bearer of the session, never stored as it is): 32 hex digits. */
export function sessionDigest(session: string): string {
  return createHash('sha256').update('jcp-bridge-journal-scope\0').update(session).digest('hex').slice(0, 32);
}

/** Stable codes of {@link JournalError}: why a call was refused before anything was signed or sent. */
export const JournalErrorCodes = {
  /** The shared journal could not be read or written in time (NATS unreachable, no answer): nothing was sent, nothing debited. */
  UNAVAILABLE: 'journal-unavailable',
  /** The shared journal's bucket is at its byte bound: nothing was sent, nothing debited (a fresh stamp would risk a double debit). */
  FULL: 'journal-full',
} as const;

/** A call the journal could not record, with a stable {@link JournalErrorCodes} code; the call was neither signed nor sent. */
export class JournalError extends Error {
  override readonly name = 'JournalError';
  readonly code: (typeof JournalErrorCodes)[keyof typeof JournalErrorCodes];
  constructor(code: JournalError['code'], message: string, options?: ErrorOptions) {
    super(`${code}: ${message}`, options);
    this.code = code;
  }
}

/**
 * What a {@link BridgeAgent} needs of a call journal (bridge/agent.ts), kept in memory or a file
 * ({@link CallJournal}) or shared by replicas (bridge/journal-nats.ts `NatsCallJournal`). Each
 * method may answer at once or with a promise; a rejection is a {@link JournalError}.
 */
export interface Journal {
  /**
   * The stamp of a call, recorded as open before it is signed: the open call's stamp when
   * `callKey` is open and opened no more than the window before `clockS` (a re-send), else a fresh
   * one (`clockS`, a random nonce). Two callers racing on one key get the same stamp. With
   * `answered`, a closed (answered) call's stamp is returned too while `clockS` is within the
   * answered window of its `now` and `answered.session` is the session it was opened with (both
   * absent, or equal): see the module comment "Answered".
   * @throws JournalError `journal-unavailable`, `journal-full` (shared journals only).
   */
  open(callKey: string, contentKey: string, clockS: number, answered?: AnsweredScope): CallStamp | Promise<CallStamp>;
  /**
   * Records the 64-byte signature an open call is sent with (threshold callers), before it leaves.
   * Returns the signature to send: `signature`, or one recorded first for the same call by another
   * replica (the same fields, so the same request when it verifies); undefined means `signature`.
   * @throws JournalError as {@link open}: the call must then not be sent.
   */
  signed(callKey: string, signature: Uint8Array): Uint8Array | undefined | Promise<Uint8Array | undefined>;
  /** Closes a call whose answer reached the client; never throws (a close that is lost leaves the call re-sendable within the window). */
  end(callKey: string): void | Promise<void>;
  /** Frees the journal's file or connection. */
  close(): void | Promise<void>;
  /**
   * True for a journal others can read (bridge/journal-nats.ts): the agent then hands it call keys
   * keyed with its journal secret (bridge/agent.ts `keyedCallKey`), never the bare ones.
   */
  readonly shared?: boolean;
}

/** A random salt start below 4^10 (see {@link JournalOptions.saltBase}: no longer changes any request). */
export function randomSaltBase(): number {
  return randomInt(0, 4 ** 10);
}

/** See the module comment: the journal of one process, in memory or in a file. */
export class CallJournal implements Journal {
  readonly #open = new Map<string, Line>();
  /** Closed calls within the answered window, by call key. */
  readonly #answered = new Map<string, Line>();
  readonly #windowS: number;
  readonly #answeredS: number;
  #fd: number | undefined;
  /** The second {@link #prune} last ran for. */
  #prunedAt = Number.NEGATIVE_INFINITY;

  /**
   * Opens the journal, replaying and compacting its file when given (entries older than the
   * window are dropped). @throws the file system error when the file cannot be read or written.
   */
  constructor(opts: JournalOptions = {}, nowS: number = Math.floor(Date.now() / 1000)) {
    this.#windowS = opts.windowS ?? 300;
    this.#answeredS = opts.answeredWindowS ?? DEFAULT_ANSWERED_WINDOW_S;
    if (!Number.isSafeInteger(this.#answeredS) || this.#answeredS < 0)
      throw new RangeError('answeredWindowS: expected a non-negative integer');
    const base = opts.saltBase ?? 0;
    if (!Number.isSafeInteger(base) || base < 0) throw new RangeError('saltBase: expected a non-negative integer');
    if (opts.file === undefined) return;
    let text = '';
    try {
      text = readFileSync(opts.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    for (const raw of text.split('\n')) {
      if (raw.length === 0) continue;
      let l: Line;
      try {
        l = JSON.parse(raw) as Line;
      } catch {
        continue; // a torn last line: the call it began never left (the line is fsync'd first)
      }
      if (typeof l.k !== 'string' || typeof l.c !== 'string' || !Number.isSafeInteger(l.now)) continue;
      if (l.s !== undefined && !Number.isSafeInteger(l.s)) continue;
      if (l.n !== undefined && !(typeof l.n === 'string' && NONCE_HEX.test(l.n))) continue;
      if (l.g !== undefined && !(typeof l.g === 'string' && SIGNATURE_HEX.test(l.g))) continue;
      if (l.u !== undefined && !(typeof l.u === 'string' && NONCE_HEX.test(l.u))) continue;
      if (l.done === 1) {
        this.#open.delete(l.k);
        // Earlier bridges' close lines carry no stamp: nothing to replay.
        if (l.k !== '' && (l.n !== undefined || l.s !== undefined)) this.#answered.set(l.k, l);
      } else if (l.k !== '') {
        this.#open.set(l.k, l);
        this.#answered.delete(l.k);
      }
    }
    this.#prune(nowS);
    const tmp = `${opts.file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const l of this.#answered.values()) writeSync(fd, `${JSON.stringify(l)}\n`);
    for (const l of this.#open.values()) writeSync(fd, `${JSON.stringify(l)}\n`);
    fdatasyncSync(fd);
    closeSync(fd);
    renameSync(tmp, opts.file);
    this.#fd = openSync(opts.file, 'a', 0o600);
  }

  /**
   * Drops open calls past the window and answered calls past the answered window, as of `nowS`.
   * Stamps are whole seconds, so nothing more can expire while the clock stays on the second last
   * pruned for: one pass per second of clock, not per call (a pass per call scanned every answered
   * call of the last 30 s, ~9,000 at one client's rate, on each new call). Any other second prunes,
   * earlier ones too: a clock that stepped ahead and came back must not stop the pruning.
   */
  #prune(nowS: number): void {
    if (nowS === this.#prunedAt) return;
    this.#prunedAt = nowS;
    for (const [k, l] of this.#open) if (l.now < nowS - this.#windowS) this.#open.delete(k);
    for (const [k, l] of this.#answered) if (l.now < nowS - this.#answeredS) this.#answered.delete(k);
  }

  #append(l: Line): void {
    if (this.#fd === undefined) return;
    writeSync(this.#fd, `${JSON.stringify(l)}\n`);
    fdatasyncSync(this.#fd);
  }

  /**
   * The stamp of a call: the open call's `now`, nonce and salt when `callKey` is open (a
   * re-send) and opened no more than `windowS` seconds before `clockS`; else `clockS`, a fresh
   * random nonce and salt 0 (an entry past the window is dropped). An answered call's stamp while
   * within the answered window for `answered` ({@link Journal.open}). Records nothing
   * (see {@link begin}). `contentKey` (agent, resource, tool, arguments) is recorded with the call.
   */
  stampFor(callKey: string, _contentKey: string, clockS: number, answered?: AnsweredScope): CallStamp {
    let open = this.#open.get(callKey) ?? this.#answeredFor(callKey, clockS, answered);
    if (open !== undefined && open.now < clockS - this.#windowS) {
      // Past the replay window: dropped (as a restart would), so the call is a new one.
      this.#open.delete(callKey);
      open = undefined;
    }
    if (open !== undefined) {
      return {
        nowS: open.now,
        salt: open.s ?? 0,
        nonce: open.n !== undefined ? Uint8Array.from(Buffer.from(open.n, 'hex')) : undefined,
        resent: true,
        ...(open.g !== undefined ? { signature: Uint8Array.from(Buffer.from(open.g, 'hex')) } : {}),
      };
    }
    return { nowS: clockS, salt: 0, nonce: new Uint8Array(randomBytes(NONCE_BYTES)), resent: false };
  }

  /** The answered call with `callKey` when `clockS` is within the answered window of its `now` and `answered` names its session. */
  #answeredFor(callKey: string, clockS: number, answered: AnsweredScope | undefined): Line | undefined {
    const l = this.#answered.get(callKey);
    if (answered === undefined || l === undefined || this.#answeredS === 0 || l.now < clockS - this.#answeredS) return undefined;
    return l.u === (answered.session === undefined ? undefined : sessionDigest(answered.session)) ? l : undefined;
  }

  /**
   * {@link stampFor} and {@link begin} in one step ({@link Journal.open}); an answered call
   * replayed stays closed. @throws the file system error of {@link begin}.
   */
  open(callKey: string, contentKey: string, clockS: number, answered?: AnsweredScope): CallStamp {
    const stamp = this.stampFor(callKey, contentKey, clockS, answered);
    if (stamp.resent && !this.#open.has(callKey)) return stamp;
    this.begin(callKey, contentKey, stamp, answered?.session);
    return stamp;
  }

  /** Records a call as open with its stamp (and the digest of its MCP session, when given), durably when the journal has a file, before it is sent. */
  begin(callKey: string, contentKey: string, stamp: CallStamp, session?: string): void {
    const n = stamp.nonce !== undefined ? Buffer.from(stamp.nonce).toString('hex') : undefined;
    const open = this.#open.get(callKey);
    if (open !== undefined && open.now === stamp.nowS && (open.s ?? 0) === stamp.salt && open.n === n) return;
    const l: Line = {
      k: callKey,
      c: contentKey,
      now: stamp.nowS,
      ...(stamp.salt > 0 ? { s: stamp.salt } : {}),
      ...(n !== undefined ? { n } : {}),
      ...(session !== undefined ? { u: sessionDigest(session) } : {}),
    };
    this.#append(l);
    this.#open.set(callKey, l);
    this.#answered.delete(callKey);
    this.#prune(stamp.nowS);
  }

  /**
   * Records the 64-byte signature an open call is sent with, durably when the journal has a file,
   * before the request leaves: a signer whose signatures are randomized (a FROST group, RFC 9591)
   * would sign a re-send after a restart differently, which is another request (§11 request id)
   * and a second debit. A re-send's stamp then carries it ({@link CallStamp.signature}).
   */
  signed(callKey: string, signature: Uint8Array): undefined {
    const open = this.#open.get(callKey);
    if (open === undefined) return;
    const g = Buffer.from(signature).toString('hex');
    if (open.g === g) return;
    const l: Line = { ...open, g };
    this.#append(l);
    this.#open.set(callKey, l);
  }

  /** Closes a call whose answer reached the client: a later call with its key is a new call, but within the answered window (module comment). */
  end(callKey: string): void {
    const l = this.#open.get(callKey);
    if (l === undefined) return;
    this.#open.delete(callKey);
    const done: Line = { ...l, done: 1 };
    this.#append(done);
    if (this.#answeredS > 0) this.#answered.set(callKey, done);
  }

  /** Calls open now (sent, answer not delivered). */
  get openCalls(): number {
    return this.#open.size;
  }

  /** Closes the file. */
  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }
}
