/**
 * The bridge's call journal: what makes a re-sent `tools/call` the same jcp/1 request.
 *
 * A jcp/1 request's identity is the content id of its signed bytes (spec §11, `request_id`), and
 * Ed25519 signatures are deterministic (RFC 8032), so a call re-signed with the same fields is the
 * same request; the node answers it from its log and never debits it twice. The only field the
 * bridge chooses is `now` (unix seconds). The journal fixes it per call:
 *
 * - A call is keyed by its *call key*: the agent, the tool, the exact argument text and the MCP
 *   request id (or the client's `_meta["jcp/idempotency_key"]` when given, which replaces the MCP
 *   request id). While a call with that key is open (sent, its answer not yet delivered to the
 *   MCP client), a call with the same key reuses its `now`: it is a re-send.
 * - A fresh call whose content (agent, tool, arguments) equals an earlier call's gets a `now`
 *   strictly above the latest one used for that content, so two real calls are never one request
 *   (a burst of N identical calls in one second moves `now` up to N seconds ahead of the clock;
 *   past the node's `max_skew_s` the node refuses with `clock-skew`, nothing debited).
 * - An open entry is closed when its answer reached the client; one whose client went away stays
 *   open for `windowS` seconds (default 300, the node's default `max_skew_s`: a later re-send
 *   would be refused `clock-skew` anyway).
 *
 * With a file, entries are appended as JSON lines and fsync'd before the request leaves, so a
 * bridge restarted with calls in flight replays them when the client re-sends; without one the
 * journal lives in memory (re-sends within one bridge process only).
 */
import { closeSync, fdatasyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';

/** One journal line: a call opened (`now` set) or closed (`done`). */
interface Line {
  /** Call key. */
  readonly k: string;
  /** Content key. */
  readonly c: string;
  /** The call's `now`, unix seconds. */
  readonly now: number;
  readonly done?: 1;
}

/** Options of {@link CallJournal}. */
export interface JournalOptions {
  /** Journal file (JSON lines); absent: in memory. */
  readonly file?: string;
  /** How long an unanswered call stays re-sendable, seconds (default 300). */
  readonly windowS?: number;
}

/** See the module comment. */
export class CallJournal {
  readonly #open = new Map<string, Line>();
  readonly #lastNow = new Map<string, number>();
  readonly #windowS: number;
  #fd: number | undefined;

  /**
   * Opens the journal, replaying and compacting its file when given (entries older than the
   * window are dropped). @throws the file system error when the file cannot be read or written.
   */
  constructor(opts: JournalOptions = {}, nowS: number = Math.floor(Date.now() / 1000)) {
    this.#windowS = opts.windowS ?? 300;
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
      if (l.done === 1) this.#open.delete(l.k);
      else this.#open.set(l.k, l);
      this.#lastNow.set(l.c, Math.max(this.#lastNow.get(l.c) ?? 0, l.now));
    }
    this.#prune(nowS);
    const tmp = `${opts.file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const l of this.#open.values()) writeSync(fd, `${JSON.stringify(l)}\n`);
    for (const [c, now] of this.#lastNow) if (![...this.#open.values()].some((l) => l.c === c)) writeSync(fd, `${JSON.stringify({ k: '', c, now, done: 1 })}\n`);
    fdatasyncSync(fd);
    closeSync(fd);
    renameSync(tmp, opts.file);
    this.#fd = openSync(opts.file, 'a', 0o600);
  }

  #prune(nowS: number): void {
    for (const [k, l] of this.#open) if (l.now < nowS - this.#windowS) this.#open.delete(k);
    for (const [c, now] of this.#lastNow) if (now < nowS - this.#windowS) this.#lastNow.delete(c);
  }

  #append(l: Line): void {
    if (this.#fd === undefined) return;
    writeSync(this.#fd, `${JSON.stringify(l)}\n`);
    fdatasyncSync(this.#fd);
  }

  /**
   * The `now` of a call: the open call's when `callKey` is open (a re-send), else a fresh one, at
   * least `clockS` and above every `now` used for `contentKey`. Records nothing (see {@link begin}).
   */
  nowFor(callKey: string, contentKey: string, clockS: number): { nowS: number; resent: boolean } {
    const open = this.#open.get(callKey);
    if (open !== undefined) return { nowS: open.now, resent: true };
    const last = this.#lastNow.get(contentKey);
    return { nowS: last !== undefined && last >= clockS ? last + 1 : clockS, resent: false };
  }

  /** Records a call as open with `nowS`, durably when the journal has a file, before it is sent. */
  begin(callKey: string, contentKey: string, nowS: number): void {
    if (this.#open.get(callKey)?.now === nowS) return;
    const l: Line = { k: callKey, c: contentKey, now: nowS };
    this.#append(l);
    this.#open.set(callKey, l);
    this.#lastNow.set(contentKey, Math.max(this.#lastNow.get(contentKey) ?? 0, nowS));
    this.#prune(nowS);
  }

  /** Closes a call whose answer reached the client: a later call with its key is a new call. */
  end(callKey: string): void {
    const l = this.#open.get(callKey);
    if (l === undefined) return;
    this.#open.delete(callKey);
    this.#append({ k: callKey, c: l.c, now: l.now, done: 1 });
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
