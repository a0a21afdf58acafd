/**
 * The node's reader of a stdio MCP upstream's stdout, put in place of the SDK's `ReadBuffer` in
 * `StdioClientTransport` (its `_readBuffer`: `append(chunk)`, `readMessage()`, `clear()`;
 * node/endpoint.ts). It reads newline-delimited JSON-RPC as the SDK does (each line decoded as
 * UTF-8, a trailing `\r` dropped, parsed and checked by the SDK's own `deserializeMessage`, a line
 * that is not JSON skipped), with one difference: the read cap applies to one line, not to the
 * whole buffer, and a line past it does not have to end the connection.
 *
 * A line longer than the cap is not kept: the reader keeps its first {@link OVERSIZED_HEAD_BYTES}
 * and last {@link OVERSIZED_TAIL_BYTES} bytes until its newline, then looks there for the
 * top-level JSON-RPC `id` of a response ({@link oversizedResponseId}). When the reader is told to
 * ({@link StdioReader.spare}: the node does once the upstream's tool list was read) and the id is
 * found, the line is replaced by a JSON-RPC error response for that id (code
 * {@link OVERSIZED_ERROR_CODE}, "result larger than the stdio read cap of N bytes"): that request
 * fails as the server's protocol error while the connection and every other request on it carry
 * on. Otherwise `append` throws `ReadBuffer exceeded maximum size of N bytes`, the SDK's own
 * error, and the transport closes as with the SDK's reader. Memory per upstream: at most one
 * line of up to the cap plus one chunk, and about 1 KiB while a long line is discarded.
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/client';

/** Bytes kept of the start of a line past the cap (where a Python-SDK response has its `id`). */
export const OVERSIZED_HEAD_BYTES = 512;
/** Bytes kept of the end of a line past the cap (where a TypeScript-SDK response has its `id`). */
export const OVERSIZED_TAIL_BYTES = 512;
/** The JSON-RPC error code of the error put in place of a response past the cap (-32603, internal error). */
export const OVERSIZED_ERROR_CODE = -32603;

/** A JSON-RPC id as the reader finds it: a number or a string. */
export type RpcId = number | string;

/** A response line past the cap, as reported to {@link StdioReaderOptions.onOversized}. */
export interface OversizedLine {
  /** The response's JSON-RPC id. */
  readonly id: RpcId;
  /** The line's length in bytes (without its newline). */
  readonly bytes: number;
  /** The cap it went past (bytes). */
  readonly capBytes: number;
}

/** How a {@link StdioReader} reads. */
export interface StdioReaderOptions {
  /** The longest line read (bytes, without its newline). */
  readonly capBytes: number;
  /**
   * Parses and checks one line (the SDK's `deserializeMessage`: `JSON.parse`, then its
   * `JSONRPCMessage` schema); throws `SyntaxError` for a line that is not JSON (skipped).
   */
  readonly parse: (line: string) => JSONRPCMessage;
  /** Called when a response past the cap is replaced by an error (for the node's log). */
  readonly onOversized?: (line: OversizedLine) => void;
}

/** What {@link StdioReader} has ready: a line to parse, or a message already made. */
type Ready = Buffer | JSONRPCMessage;

/** One scalar member of a JSON object as written by a JSON serializer: `"key":<integer|plain string>`. */
const SCALAR = String.raw`(-?\d{1,20}|"[^"\\]{0,256}")`;
/** The head of a response: `{`, then `jsonrpc`/`id` members with scalar values, then `"result":` or `"error":`. */
const HEAD_MEMBER = new RegExp(String.raw`\s*"(jsonrpc|id)"\s*:\s*${SCALAR}\s*,`, 'y');
const HEAD_OPEN = /^\s*\{/y;
const HEAD_BODY = /\s*"(result|error)"\s*:/y;
/** The tail of an object: `jsonrpc`/`id` members with scalar values, each after a comma, then the closing `}`. */
const TAIL = new RegExp(String.raw`((?:,\s*"(?:jsonrpc|id)"\s*:\s*${SCALAR.replace('(', '(?:')}\s*)+)\}\s*$`);
const TAIL_MEMBER = new RegExp(String.raw`,\s*"(jsonrpc|id)"\s*:\s*${SCALAR}`, 'g');

/**
 * The top-level JSON-RPC `id` of a response line, seen only through its first and last bytes, or
 * undefined when it cannot be told for sure. The line must open as a response object: `{`, then
 * only `jsonrpc` and `id` members with plain scalar values, then `result` or `error` (so a request
 * or notification from the server, whose ids live in another id space, is never answered). The id
 * is then read either from those leading members (`{"jsonrpc":"2.0","id":7,"result":…`, the
 * Python SDK's order) or from the members that end the object (`…,"jsonrpc":"2.0","id":7}`, the
 * TypeScript SDK's `{result, jsonrpc, id}`), never both, and `"jsonrpc":"2.0"` must be among them.
 *
 * An `"id"` nested inside the result cannot match: a match at the end needs the line's last `}`
 * right after the member, so the member belongs to the outermost object; and in JSON text a
 * quote inside a string is always escaped, so a comma followed by `"id"` (or by `"jsonrpc"`) is
 * never inside a string. Integer ids only (what clients send); a string id without escapes.
 */
export function oversizedResponseId(head: string, tail: string): RpcId | undefined {
  HEAD_OPEN.lastIndex = 0;
  if (!HEAD_OPEN.test(head)) return undefined;
  const lead = new Map<string, string>();
  let at = HEAD_OPEN.lastIndex;
  for (;;) {
    HEAD_MEMBER.lastIndex = at;
    const m = HEAD_MEMBER.exec(head);
    if (m === null) break;
    if (lead.has(m[1]!)) return undefined;
    lead.set(m[1]!, m[2]!);
    at = HEAD_MEMBER.lastIndex;
  }
  HEAD_BODY.lastIndex = at;
  if (!HEAD_BODY.test(head)) return undefined;
  const trail = new Map<string, string>();
  const t = TAIL.exec(tail);
  if (t !== null) {
    for (const m of t[1]!.matchAll(TAIL_MEMBER)) {
      if (trail.has(m[1]!)) return undefined;
      trail.set(m[1]!, m[2]!);
    }
  }
  const id = lead.get('id') ?? trail.get('id');
  if (id === undefined || (lead.has('id') && trail.has('id'))) return undefined;
  if ((lead.get('jsonrpc') ?? trail.get('jsonrpc')) !== '"2.0"') return undefined;
  return id.startsWith('"') ? id.slice(1, -1) : Number(id);
}

/**
 * A line reader for a stdio MCP transport (the SDK `ReadBuffer`'s interface). `append` takes the
 * bytes as they come and splits lines; `readMessage` hands them out one at a time, as messages.
 * @throws Error `ReadBuffer exceeded maximum size of N bytes` from `append`: a line past the cap
 *   that is not replaced (before {@link spare} is set, or no response id found); the SDK then
 *   closes the transport. The reader then ignores input until {@link clear}.
 */
export class StdioReader {
  readonly #cap: number;
  readonly #parse: (line: string) => JSONRPCMessage;
  readonly #onOversized: ((line: OversizedLine) => void) | undefined;
  /**
   * Whether a response past the cap is replaced by an error for its id (true) or ends the
   * connection (false: the SDK's behaviour, kept until the upstream's tool list was read).
   */
  spare = false;
  /** The current line's bytes so far (while it is within the cap) and their total length. */
  #partial: Buffer[] = [];
  #partialBytes = 0;
  /** While a line past the cap is discarded: its first and last bytes, and its length so far. */
  #discard: { head: Buffer; tail: Buffer; bytes: number } | undefined;
  /** Lines (and replaced responses) ready for {@link readMessage}. */
  #ready: Ready[] = [];
  /** Set after a throw: input is ignored until {@link clear} (the transport is closing). */
  #dead = false;

  constructor(opts: StdioReaderOptions) {
    this.#cap = opts.capBytes;
    this.#parse = opts.parse;
    this.#onOversized = opts.onOversized;
  }

  /** Takes the next bytes from the server's stdout. @throws Error past the cap (see the class). */
  append(chunk: Buffer): void {
    if (this.#dead) return;
    let off = 0;
    while (off < chunk.length) {
      const nl = chunk.indexOf(10, off);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(off, end);
      if (this.#discard !== undefined) this.#keep(piece);
      else if (this.#partialBytes + piece.length > this.#cap) {
        if (!this.spare) this.#fail();
        this.#startDiscard(piece);
      } else {
        this.#partial.push(piece);
        this.#partialBytes += piece.length;
      }
      if (nl === -1) return;
      this.#endLine();
      off = nl + 1;
    }
  }

  /** The next message, or null when no whole line is waiting. @throws the SDK schema's error for a JSON line that is not JSON-RPC (that line is dropped). */
  readMessage(): JSONRPCMessage | null {
    for (;;) {
      const next = this.#ready.shift();
      if (next === undefined) return null;
      if (!Buffer.isBuffer(next)) return next;
      try {
        return this.#parse(next.toString('utf8').replace(/\r$/, ''));
      } catch (e) {
        if (e instanceof SyntaxError) continue;
        throw e;
      }
    }
  }

  /** Forgets everything buffered (the transport closed) and reads again. */
  clear(): void {
    this.#partial = [];
    this.#partialBytes = 0;
    this.#discard = undefined;
    this.#ready = [];
    this.#dead = false;
  }

  /** Gives up on the stream as the SDK's reader does. @throws Error always */
  #fail(): never {
    this.clear();
    this.#dead = true;
    throw new Error(`ReadBuffer exceeded maximum size of ${this.#cap} bytes`);
  }

  /** The current line went past the cap with `piece`: keep only its head and tail from now on. */
  #startDiscard(piece: Buffer): void {
    // The head: the first bytes of the parts kept so far, then of `piece` (copied: no view keeps a chunk alive).
    const first: Buffer[] = [];
    let want = OVERSIZED_HEAD_BYTES;
    for (const p of [...this.#partial, piece]) {
      if (want === 0) break;
      first.push(p.subarray(0, want));
      want -= Math.min(want, p.length);
    }
    this.#discard = { head: Buffer.concat(first), tail: Buffer.alloc(0), bytes: this.#partialBytes };
    for (const p of this.#partial) this.#keep(p, false);
    this.#partial = [];
    this.#partialBytes = 0;
    this.#keep(piece);
  }

  /** Adds `piece` of a discarded line to its tail (the last {@link OVERSIZED_TAIL_BYTES} bytes kept) and its length. */
  #keep(piece: Buffer, count = true): void {
    const d = this.#discard!;
    if (count) d.bytes += piece.length;
    if (piece.length >= OVERSIZED_TAIL_BYTES) d.tail = Buffer.from(piece.subarray(piece.length - OVERSIZED_TAIL_BYTES));
    else d.tail = Buffer.concat([d.tail, piece]).subarray(-OVERSIZED_TAIL_BYTES);
  }

  /** A newline: the line so far is ready, or a discarded line is replaced by an error (or ends the stream). */
  #endLine(): void {
    const d = this.#discard;
    if (d === undefined) {
      this.#ready.push(this.#partial.length === 1 ? this.#partial[0]! : Buffer.concat(this.#partial));
      this.#partial = [];
      this.#partialBytes = 0;
      return;
    }
    this.#discard = undefined;
    const id = oversizedResponseId(d.head.toString('utf8'), d.tail.toString('utf8'));
    if (id === undefined) this.#fail();
    this.#ready.push({
      jsonrpc: '2.0',
      id,
      error: {
        code: OVERSIZED_ERROR_CODE,
        message: `result larger than the stdio read cap of ${this.#cap} bytes (${d.bytes} bytes); not read`,
      },
    } as JSONRPCMessage);
    this.#onOversized?.({ id, bytes: d.bytes, capBytes: this.#cap });
  }
}
