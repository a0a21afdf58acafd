/**
 * The bridge's stdio transport (newline-delimited JSON-RPC on stdin/stdout, MCP "stdio"). It
 * differs from the SDK's `StdioServerTransport` in one way: a line is handed on as parsed JSON
 * without the SDK's JSON-RPC schema check, so the bridge's guard (bridge/server.ts) answers a
 * request the schema would refuse (an object `progressToken`, a malformed request) with a coded
 * JSON-RPC error instead of the SDK dropping it unanswered, which leaves the client waiting for
 * ever. A line that is not JSON is reported to `onerror` and dropped (it names no request).
 * A message past {@link STDIO_MAX_BUFFER} bytes clears the buffer and reports
 * `ReadBuffer exceeded maximum size of <n> bytes` to `onerror`, then closes, as the SDK does.
 */
// v1 SDK types: the 2025 face's transport interface (the v1 server reads this pipe).
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The most bytes one unread stdio message may take (the SDK's default, 10 MiB). */
export const STDIO_MAX_BUFFER = 10 * 1024 * 1024;

/** See the module comment. */
export class BridgeStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #in: NodeJS.ReadableStream;
  readonly #out: NodeJS.WritableStream;
  #buf: Buffer | undefined;
  #started = false;

  constructor(stdin: NodeJS.ReadableStream = process.stdin, stdout: NodeJS.WritableStream = process.stdout) {
    this.#in = stdin;
    this.#out = stdout;
  }

  readonly #onData = (chunk: Buffer): void => {
    const size = (this.#buf?.length ?? 0) + chunk.length;
    if (size > STDIO_MAX_BUFFER) {
      this.#buf = undefined;
      this.onerror?.(new Error(`ReadBuffer exceeded maximum size of ${STDIO_MAX_BUFFER} bytes`));
      void this.close();
      return;
    }
    this.#buf = this.#buf === undefined ? chunk : Buffer.concat([this.#buf, chunk]);
    for (;;) {
      const buf: Buffer | undefined = this.#buf;
      const nl = buf?.indexOf(10) ?? -1;
      if (buf === undefined || nl < 0) return;
      const line = buf.toString('utf8', 0, nl).replace(/\r$/, '');
      this.#buf = buf.subarray(nl + 1);
      if (line.trim() === '') continue;
      let message: unknown;
      try {
        message = JSON.parse(line);
      } catch (e) {
        this.onerror?.(new Error(`Parse error: ${(e as Error).message}`));
        continue;
      }
      this.onmessage?.(message as JSONRPCMessage);
    }
  };

  readonly #onError = (e: Error): void => {
    this.onerror?.(e);
  };

  /** Starts reading stdin. @throws Error when already started. */
  async start(): Promise<void> {
    if (this.#started) throw new Error('BridgeStdioTransport already started');
    this.#started = true;
    this.#in.on('data', this.#onData);
    this.#in.on('error', this.#onError);
  }

  /** Writes one message as a line; resolves once it is handed to stdout (after `drain` when full). */
  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.#out.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.#out.once('drain', resolve);
    });
  }

  /** Stops reading and calls `onclose` (once). */
  async close(): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    this.#in.off('data', this.#onData);
    this.#in.off('error', this.#onError);
    if (this.#in.listenerCount('data') === 0) this.#in.pause();
    this.#buf = undefined;
    this.onclose?.();
  }
}
