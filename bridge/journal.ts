/**
 * The bridge's call journal: what makes a re-sent `tools/call` the same jcp/1 request, and two
 * real calls two requests.
 *
 * A jcp/1 request's identity is the content id of its signed bytes (spec §11, `request_id`), and
 * Ed25519 signatures are deterministic (RFC 8032), so a call re-signed with the same fields is the
 * same request; the node answers it from its log and never debits it twice. The bridge chooses
 * two things per call: `now` (unix seconds) and the exact payload text. The arguments' JSON text
 * may end in insignificant whitespace (RFC 8259 §2): the tool gets the same arguments, the
 * request is another one. A call's *salt* k is that whitespace: k written in base 4 with the four
 * JSON whitespace characters (space, tab, LF, CR), nothing for k = 0. The journal fixes both:
 *
 * - A call is keyed by its *call key*: the agent, the resource, the tool, the exact argument text
 *   and the MCP request id (or the client's `_meta["jcp/idempotency_key"]` when given, which
 *   replaces the MCP request id). While a call with that key is open (sent, its answer not yet
 *   delivered to the MCP client), a call with the same key reuses its `now` and salt: a re-send.
 * - A fresh call takes `now` from the clock; when an earlier call with the same content (agent,
 *   resource, tool, arguments) used that second (or a later one: a clock that stepped back), it
 *   takes that second and the next salt, so two real calls are never one request and `now`
 *   never runs ahead of the clock by more than a clock step.
 * - An open entry is closed when its answer reached the client; one whose client went away stays
 *   open for `windowS` seconds (default 300; a re-send later than the node's `max_skew_s` is
 *   refused `clock-skew` anyway).
 *
 * With a file, entries are appended as JSON lines and fsync'd before the request leaves, so a
 * bridge restarted with calls in flight replays them when the client re-sends; without one the
 * journal lives in memory (re-sends within one bridge process only).
 */
import { randomInt } from 'node:crypto';
import { closeSync, fdatasyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';

/** One journal line: a call opened (`now` and salt set) or closed (`done`). */
interface Line {
  /** Call key. */
  readonly k: string;
  /** Content key. */
  readonly c: string;
  /** The call's `now`, unix seconds. */
  readonly now: number;
  /** The call's salt (absent: 0). */
  readonly s?: number;
  readonly done?: 1;
}

/** The latest (now, salt) used for one content. */
interface Last {
  readonly now: number;
  readonly salt: number;
}

/** A call's `now` and salt. */
export interface CallStamp {
  /** Unix seconds. */
  readonly nowS: number;
  /** The payload's whitespace salt (see {@link saltText}). */
  readonly salt: number;
  /** True when this is a re-send of an open call. */
  readonly resent: boolean;
}

const WS = [' ', '\t', '\n', '\r'] as const;

/** The insignificant JSON whitespace of salt `k` (RFC 8259 §2): k in base 4, least significant digit first, digits 0–3 written space, tab, LF, CR; "" for 0. */
export function saltText(k: number): string {
  let out = '';
  for (let n = k; n > 0; n = Math.floor(n / 4)) out += WS[n % 4];
  return out;
}

const later = (a: Last | undefined, b: Last): Last => (a === undefined || b.now > a.now || (b.now === a.now && b.salt > a.salt) ? b : a);

/** Options of {@link CallJournal}. */
export interface JournalOptions {
  /** Journal file (JSON lines); absent: in memory. */
  readonly file?: string;
  /** How long an unanswered call stays re-sendable, seconds (default 300). */
  readonly windowS?: number;
  /**
   * The salt a fresh call starts at (default 0). Two bridge processes of one agent share no
   * journal, so with the same start their identical calls in one second would be one request;
   * `jcp bridge` draws a random start per process ({@link randomSaltBase}).
   */
  readonly saltBase?: number;
}

/** A random salt start below 4^10 (at most 10 whitespace characters; see {@link JournalOptions.saltBase}). */
export function randomSaltBase(): number {
  return randomInt(0, 4 ** 10);
}

/** See the module comment. */
export class CallJournal {
  readonly #open = new Map<string, Line>();
  readonly #last = new Map<string, Last>();
  readonly #windowS: number;
  readonly #saltBase: number;
  #fd: number | undefined;

  /**
   * Opens the journal, replaying and compacting its file when given (entries older than the
   * window are dropped). @throws the file system error when the file cannot be read or written.
   */
  constructor(opts: JournalOptions = {}, nowS: number = Math.floor(Date.now() / 1000)) {
    this.#windowS = opts.windowS ?? 300;
    this.#saltBase = opts.saltBase ?? 0;
    if (!Number.isSafeInteger(this.#saltBase) || this.#saltBase < 0) throw new RangeError('saltBase: expected a non-negative integer');
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
      if (l.done === 1) this.#open.delete(l.k);
      else this.#open.set(l.k, l);
      this.#last.set(l.c, later(this.#last.get(l.c), { now: l.now, salt: l.s ?? 0 }));
    }
    this.#prune(nowS);
    const tmp = `${opts.file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const l of this.#open.values()) writeSync(fd, `${JSON.stringify(l)}\n`);
    for (const [c, last] of this.#last) writeSync(fd, `${JSON.stringify({ k: '', c, now: last.now, s: last.salt, done: 1 })}\n`);
    fdatasyncSync(fd);
    closeSync(fd);
    renameSync(tmp, opts.file);
    this.#fd = openSync(opts.file, 'a', 0o600);
  }

  #prune(nowS: number): void {
    for (const [k, l] of this.#open) if (l.now < nowS - this.#windowS) this.#open.delete(k);
    for (const [c, last] of this.#last) if (last.now < nowS - this.#windowS) this.#last.delete(c);
  }

  #append(l: Line): void {
    if (this.#fd === undefined) return;
    writeSync(this.#fd, `${JSON.stringify(l)}\n`);
    fdatasyncSync(this.#fd);
  }

  /**
   * The `now` and salt of a call: the open call's when `callKey` is open (a re-send); else `clockS`
   * and salt 0, or, when a call with `contentKey` already used that second (or a later one), that
   * second and the next salt. Records nothing (see {@link begin}).
   */
  stampFor(callKey: string, contentKey: string, clockS: number): CallStamp {
    const open = this.#open.get(callKey);
    if (open !== undefined) return { nowS: open.now, salt: open.s ?? 0, resent: true };
    const last = this.#last.get(contentKey);
    if (last === undefined || last.now < clockS) return { nowS: clockS, salt: this.#saltBase, resent: false };
    return { nowS: last.now, salt: Math.max(last.salt + 1, this.#saltBase), resent: false };
  }

  /** Records a call as open with its stamp, durably when the journal has a file, before it is sent. */
  begin(callKey: string, contentKey: string, stamp: CallStamp): void {
    const open = this.#open.get(callKey);
    if (open !== undefined && open.now === stamp.nowS && (open.s ?? 0) === stamp.salt) return;
    const l: Line = { k: callKey, c: contentKey, now: stamp.nowS, ...(stamp.salt > 0 ? { s: stamp.salt } : {}) };
    this.#append(l);
    this.#open.set(callKey, l);
    this.#last.set(contentKey, later(this.#last.get(contentKey), { now: stamp.nowS, salt: stamp.salt }));
    this.#prune(stamp.nowS);
  }

  /** Closes a call whose answer reached the client: a later call with its key is a new call. */
  end(callKey: string): void {
    const l = this.#open.get(callKey);
    if (l === undefined) return;
    this.#open.delete(callKey);
    this.#append({ k: callKey, c: l.c, now: l.now, ...(l.s !== undefined ? { s: l.s } : {}), done: 1 });
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
