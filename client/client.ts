/**
 * The typed jcp/1 client (spec §11): connects to a node, builds and signs requests (with an
 * Actor, or any signer function — a FROST threshold session, §2.2), and returns the decision, the
 * receipt and the endpoint's result.
 *
 * Replies come back in request order on a connection, so calls are matched FIFO and may be
 * pipelined. When the connection drops, the client reconnects and re-sends every unanswered
 * request byte for byte: a request carries its own identity (`request_id`, §11), so the node
 * answers a re-sent one with its original response and never debits it twice. The same holds
 * for two calls whose fields are all equal (same chain, action, payload, cost and second): they
 * are one request. Vary the payload to make a new call within the same second.
 *
 * `listTools()` asks the node which MCP tools stand behind its resources (`list_tools`); a call
 * with `onNotice` asks for the upstream's progress and logging notifications (`notify: 1`), which
 * the node sends as `notice` messages before the response; they are routed by request id, not
 * FIFO (docs/wire.md).
 *
 * Timeouts: with `timeoutS` (per client, or per call), a call whose reply has not come within
 * that many seconds fails with {@link CallTimeout} (code `timeout`), and so does a connect that
 * does not complete in time. The node may still decide a timed-out request (and debit it): its
 * reply is discarded, the connection is replaced (a stream whose next reply is late cannot be
 * trusted to be in step), and the other unanswered requests are re-sent on the new one, where
 * the node answers them from its log. To learn a timed-out call's outcome, send the same request
 * again ({@link JcpClient.callRequest} with `CallTimeout.request`): it is answered, never
 * debited twice.
 */
import { type Socket, isIP, connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import {
  type Actor,
  type ContentId,
  contentIdOfBytes,
  type Cost,
  decodeWireMessage,
  type Did,
  encodeWireMessage,
  encodeWireRequest,
  type FrameKind,
  frameMessage,
  FrameReader,
  type Grant,
  grantId,
  MAX_DECLARABLE_LENGTH,
  payloadHash,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  type SignedRevocation,
  signWireRequest,
  type Trust,
  type WireAmended,
  type WireDecision,
  type WireMessage,
  type WireRequest,
  type WireResponse,
} from '../core/index.ts';

/** Who signs requests: an Actor, or a did with a signing function (local, remote or threshold). */
export type ClientSigner = Actor | { readonly did: Did; readonly sign: (msg: Uint8Array) => Uint8Array | Promise<Uint8Array> };

/** Options of {@link JcpClient.connect}. */
export interface ClientOptions {
  readonly host: string;
  readonly port: number;
  /** Signs requests made with {@link JcpClient.call}. */
  readonly signer?: ClientSigner;
  /**
   * Reconnect attempts before pending calls fail with ConnectionLost (default 10), counted from
   * the last reply: a node that takes each new connection and closes it unanswered (a TLS node
   * reached without `tls`) uses them up instead of being retried until the call's timeout.
   */
  readonly reconnectAttempts?: number;
  /** First reconnect delay, doubled per attempt up to 2 s (default 50 ms). */
  readonly reconnectDelayMs?: number;
  /**
   * Largest reply accepted, bytes (default 64 MiB). A larger one fails its call with JcpError
   * `frame-too-large`; the connection is then replaced and the calls behind it re-sent.
   */
  readonly replyCap?: number;
  /** The clock for `now`, unix seconds (default wall clock). */
  readonly clockS?: () => number;
  /**
   * Seconds a call waits for its reply (and a connect for the connection) before failing with
   * {@link CallTimeout}; a positive finite number. Default: no timeout (wait as long as the
   * connection lives).
   */
  readonly timeoutS?: number;
  /**
   * jcp/1 over TLS (docs/tls.md): the node's certificate is verified against `ca` (PEM; default
   * the system CAs) for `servername` (default `host`); `cert`/`key` (PEM) present a client
   * certificate to a node that asks for one. A client certificate only opens the connection:
   * every request is still signed by the caller (§11). Undefined = plain TCP.
   */
  readonly tls?: ClientTlsOptions;
}

/** TLS settings of a {@link JcpClient} (PEM contents, not file names). */
export interface ClientTlsOptions {
  readonly ca?: string | Buffer;
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  /** The name the node's certificate must carry (default: the host). */
  readonly servername?: string;
}

/** One call: the chain (root first) and what to do; the frame is built from the leaf. */
export interface CallParams {
  readonly chain: readonly SignedGrant[];
  readonly action: string;
  /** Tool arguments: bytes as given, or an object sent as UTF-8 JSON. */
  readonly payload?: Uint8Array | Record<string, unknown>;
  /** The claimed cost (default 0 µJ, Estimator; the node prices at no less than its estimate). */
  readonly cost?: Cost;
  readonly kind?: FrameKind;
  readonly trust?: Trust;
  /** Default: the leaf's resource. */
  readonly resource?: ContentId;
  /** Default: the leaf's id. */
  readonly grantId?: ContentId;
  /** Default: the client's clock. */
  readonly now?: number;
  /** Default: the signer's did. */
  readonly caller?: Did;
  /**
   * Asks the node for the upstream's notifications during the call (`notify: 1`, signed). Set
   * when `onNotice` is given to {@link JcpClient.call}.
   */
  readonly notify?: boolean;
  /**
   * The request's `nonce` (16 bytes, signed; core/wire.ts): two calls with the same fields in
   * the same second are two requests only when their nonces differ. Absent: no nonce.
   */
  readonly nonce?: Uint8Array;
  /**
   * The request's `input` (signed; core/wire.ts WireRequest.input): the JSON text of the MCP
   * multi round-trip material `{capabilities?, responses?, state?}`. Absent: none.
   */
  readonly input?: string;
  /**
   * Called with each MCP notification (the JSON-RPC object: `notifications/progress` with the
   * node's progress token, `notifications/message`) the upstream sent during this call, in order
   * and before the call resolves. Only for allowed calls; a deny gets none.
   */
  readonly onNotice?: (notification: McpNotification) => void;
  /** Seconds to wait for this call's reply; default the client's {@link ClientOptions.timeoutS}. */
  readonly timeoutS?: number;
  /**
   * Signs this request instead of the client's {@link ClientOptions.signer} (its did is the
   * default caller): e.g. a signer that hands back a signature kept from before a restart.
   */
  readonly signer?: ClientSigner;
}

/** A JSON-RPC notification object as the upstream MCP server sent it (`{jsonrpc, method, params?}`). */
export type McpNotification = { readonly method: string; readonly params?: Record<string, unknown> } & Record<string, unknown>;

/** One resource of a node and the MCP tools behind it ({@link JcpClient.listTools}). */
export interface ListedResource {
  /** The resource's name in the node's config. */
  readonly name: string;
  /** The resource's content id (a grant's `capability.resource`). */
  readonly resource: ContentId;
  /** The upstream's `tools/list` `tools` (MCP `Tool` objects, all pages); `[]` when unknown. */
  readonly tools: readonly Record<string, unknown>[];
  /** The same, as the JSON text the node sent. */
  readonly toolsJson: string;
  /** `a2a` when an A2A agent stands behind the resource (docs/a2a.md); absent for an MCP server. */
  readonly kind?: 'a2a';
  /** A2A only: the agent card's `skills` (A2A `AgentSkill` JSON objects); `[]` before the card was read. */
  readonly skills?: readonly Record<string, unknown>[];
}

/** The A2A v1.0 methods of an `agent-task` request (docs/a2a.md). */
export type AgentTaskMethod = 'SendMessage' | 'SendStreamingMessage' | 'GetTask' | 'CancelTask' | 'SubscribeToTask' | 'ListTasks';

/** One `agent-task` request to an A2A agent behind a node ({@link JcpClient.agentTask}; docs/a2a.md). */
export interface AgentTaskParams {
  /** The chain (root first); its leaf grants the resource of the agent and the skill. */
  readonly chain: readonly SignedGrant[];
  /** The skill id: the frame's action (for a send, also the message's `metadata.skill`). */
  readonly skill: string;
  readonly method: AgentTaskMethod;
  /**
   * The A2A v1.0 request object of `method`, JSON form: `{message: {messageId, role: "ROLE_USER",
   * parts: [{text}], metadata?}}` for a send, `{id}` for GetTask/CancelTask/SubscribeToTask, `{}`
   * or filters for ListTasks.
   */
  readonly params: Record<string, unknown>;
  /** Streaming methods: each A2A stream event (StreamResponse JSON), in order, before the call resolves. */
  readonly onEvent?: (event: Record<string, unknown>) => void;
  /** As {@link CallParams}. */
  readonly cost?: Cost;
  readonly now?: number;
  readonly nonce?: Uint8Array;
  readonly timeoutS?: number;
  readonly signer?: ClientSigner;
  /** Default: the leaf's resource. */
  readonly resource?: ContentId;
}

/** A decided agent task: the call's decision and receipt, and on allow the agent's reply (data, §6) or the node's error. */
export interface AgentTaskResult extends CallResult {
  /** On allow: the `agent-reply` JSON (SendMessage: `{task}`|`{message}`; a stream: its last event; GetTask/CancelTask: the task; ListTasks: `{tasks, …}`). */
  readonly reply?: unknown;
  /** On allow, when the agent gave no reply: the node's `jcp_error` (`endpoint-unavailable` with `refunded_uj`, `endpoint-timeout`, `caller-gone`, …). */
  readonly error?: { readonly code: string; readonly message: string } & Record<string, unknown>;
}

/** Options of {@link JcpClient.callRequest} (a bare number is `timeoutS`, the older form). */
export interface CallRequestOptions {
  /** As {@link CallParams.onNotice}; the request must carry `notify: 1` to get any. */
  readonly onNotice?: (notification: McpNotification) => void;
  /** Seconds to wait for the reply; default the client's {@link ClientOptions.timeoutS}. */
  readonly timeoutS?: number;
  /**
   * Sends the request on a connection of its own, opened for it and closed after it (same
   * options as this client). jcp/1 answers a connection's requests in order, so a long call
   * (an A2A stream) on the shared connection would hold every call behind it.
   */
  readonly ownConnection?: boolean;
  /**
   * With `ownConnection`: aborting closes that connection, so the node sees the caller gone and
   * ends the call's upstream stream (the request may still have been decided: re-send it to learn
   * the outcome). The call then rejects with {@link ConnectionLost}.
   */
  readonly signal?: AbortSignal;
}

/** A decided call (§11): the decision, the receipt bytes, and the endpoint's result on allow. */
export interface CallResult {
  readonly decision: WireDecision;
  readonly receipt: Uint8Array;
  readonly result?: Uint8Array;
  readonly requestId: ContentId;
  readonly request: WireRequest;
}

/** An error reply from the node (`{error: {code, message}}`): the call never reached a decision. */
export class WireErrorReply extends Error {
  override readonly name = 'WireErrorReply';
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

/** The connection to a node is gone and could not be re-established. */
export class ConnectionLost extends Error {
  override readonly name = 'ConnectionLost';
}

/**
 * No reply (or no connection) within the timeout (seconds). The node may still have decided the
 * request: re-send `request` to learn the outcome without a second debit.
 */
export class CallTimeout extends Error {
  override readonly name = 'CallTimeout';
  /** The stable code, `timeout`. */
  readonly code = 'timeout';
  /** The timeout that fired, in seconds. */
  readonly timeoutS: number;
  /** The signed request that went unanswered, when it was a call. */
  request?: WireRequest;
  constructor(message: string, timeoutS: number) {
    super(message);
    this.timeoutS = timeoutS;
  }
}

/** Checks a timeout in seconds: positive and finite. @throws RangeError naming `field`. */
function checkTimeoutS(v: number | undefined, field: string): number | undefined {
  if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new RangeError(`${field}: a number of seconds > 0, got ${v}`);
  return v;
}

interface Waiter {
  readonly frame: Uint8Array;
  readonly resolve: (body: Uint8Array) => void;
  readonly reject: (e: Error) => void;
  /** Set when the caller stopped waiting (timeout): its reply, if it comes, is dropped. */
  abandoned?: boolean;
}

const enc = new TextEncoder();

/** `{notice: …}` as det-CBOR begins: a 1-entry map, then the text key "notice". */
const NOTICE_PREFIX = Uint8Array.of(0xa1, 0x66, 0x6e, 0x6f, 0x74, 0x69, 0x63, 0x65);

function isNoticeBody(b: Uint8Array): boolean {
  if (b.length < NOTICE_PREFIX.length) return false;
  for (let i = 0; i < NOTICE_PREFIX.length; i++) if (b[i] !== NOTICE_PREFIX[i]) return false;
  return true;
}

/** A jcp/1 client over one TCP connection. */
export class JcpClient {
  readonly #opts: ClientOptions;
  #sock: Socket | undefined;
  #reader: FrameReader;
  #waiting: Waiter[] = [];
  #closed = false;
  #reconnecting: Promise<void> | undefined;
  /**
   * Reconnect attempts since the last reply, and the next delay: kept across drops, so a node
   * that takes each connection and closes it unanswered (a TLS port reached in plaintext) ends
   * the attempts instead of starting them afresh on every connection.
   */
  #attempts = 0;
  #delay: number | undefined;
  /** A connection was made since the last reply and closed without one. */
  #closedUnanswered = false;
  /** request id → notice handler of a call in flight that asked for notices. */
  readonly #noticeHandlers = new Map<ContentId, Set<(n: McpNotification) => void>>();

  private constructor(opts: ClientOptions) {
    checkTimeoutS(opts.timeoutS, 'timeoutS');
    this.#opts = opts;
    this.#reader = new FrameReader(opts.replyCap ?? 64 << 20);
  }

  /**
   * Connects to a node. @throws the socket error when the node cannot be reached;
   * {@link CallTimeout} when `timeoutS` is set and the connection is not made in time;
   * RangeError for a `timeoutS` that is not a positive number.
   */
  static async connect(opts: ClientOptions): Promise<JcpClient> {
    const c = new JcpClient(opts);
    await c.#open();
    return c;
  }

  #open(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const t = this.#opts.tls;
      const sock: Socket =
        t === undefined
          ? netConnect({ host: this.#opts.host, port: this.#opts.port, noDelay: true })
          : tlsConnect({
              host: this.#opts.host,
              port: this.#opts.port,
              // RFC 6066: SNI carries host names only; an IP address is checked against the certificate's IP SANs.
              ...(t.servername !== undefined || isIP(this.#opts.host) === 0 ? { servername: t.servername ?? this.#opts.host } : {}),
              ...(t.ca !== undefined ? { ca: t.ca } : {}),
              ...(t.cert !== undefined ? { cert: t.cert } : {}),
              ...(t.key !== undefined ? { key: t.key } : {}),
              minVersion: 'TLSv1.2',
            }).setNoDelay(true);
      const ready = t === undefined ? 'connect' : 'secureConnect';
      const timeoutS = this.#opts.timeoutS;
      const timer =
        timeoutS === undefined
          ? undefined
          : setTimeout(() => {
              sock.destroy();
              reject(new CallTimeout(`no connection to ${this.#opts.host}:${this.#opts.port} within ${timeoutS} s`, timeoutS));
            }, timeoutS * 1000);
      const onError = (e: Error) => {
        clearTimeout(timer);
        reject(e);
      };
      sock.once('error', onError);
      sock.once(ready, () => {
        clearTimeout(timer);
        sock.off('error', onError);
        if (this.#closed) {
          // closed while this connection was being made: nothing may hold it open
          sock.destroy();
          reject(new ConnectionLost('client closed'));
          return;
        }
        this.#reader = new FrameReader(this.#opts.replyCap ?? 64 << 20);
        this.#sock = sock;
        sock.on('data', (chunk: Buffer) => this.#onData(chunk));
        sock.on('error', () => undefined);
        sock.on('close', () => this.#onClose(sock));
        resolve();
      });
    });
  }

  #onData(chunk: Buffer): void {
    const { bodies, error } = this.#reader.read(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    // Replies completed before a bad length in the same chunk are still delivered, in order.
    for (const b of bodies) {
      if (isNoticeBody(b)) this.#onNotice(b);
      else {
        this.#attempts = 0;
        this.#delay = undefined;
        this.#closedUnanswered = false;
        const w = this.#waiting.shift();
        if (w !== undefined && !w.abandoned) w.resolve(b);
      }
    }
    if (error) {
      // The next reply in line declared more than `replyCap`: its caller gets `frame-too-large`.
      // A stream cannot be resynchronised after a bad length, so the connection is dropped and
      // the requests behind it are re-sent on a new one (the node answers them from its log).
      this.#waiting.shift()?.reject(error);
      this.#sock?.destroy();
    }
  }

  /** Routes a notice to its call's handler; one for no call in flight (or malformed) is dropped. */
  #onNotice(body: Uint8Array): void {
    let m: WireMessage;
    try {
      m = decodeWireMessage(body);
    } catch {
      return;
    }
    if (m.kind !== 'notice') return;
    const handlers = this.#noticeHandlers.get(m.request_id);
    if (handlers === undefined) return;
    const n = JSON.parse(m.notification) as McpNotification;
    for (const h of handlers) {
      try {
        h(n);
      } catch {
        // a throwing handler must not break the reply stream
      }
    }
  }

  #onClose(sock: Socket): void {
    if (this.#sock !== sock) return;
    this.#sock = undefined;
    // A new connection starts a new reply order: requests whose callers gave up are not re-sent.
    this.#waiting = this.#waiting.filter((w) => !w.abandoned);
    if (this.#closed) {
      for (const w of this.#waiting.splice(0)) w.reject(new ConnectionLost('client closed'));
      return;
    }
    if (this.#waiting.length > 0) {
      // a connection the attempts made, closed with requests on it and no reply
      if (this.#attempts > 0) this.#closedUnanswered = true;
      void this.#reconnect();
    }
  }

  #reconnect(): Promise<void> {
    this.#reconnecting ??= (async () => {
      const attempts = this.#opts.reconnectAttempts ?? 10;
      while (this.#attempts < attempts && !this.#closed) {
        const delay = this.#delay ?? this.#opts.reconnectDelayMs ?? 50;
        await new Promise((r) => setTimeout(r, delay));
        this.#delay = Math.min(delay * 2, 2000);
        this.#attempts++;
        try {
          await this.#open();
          // Re-send every unanswered request, in order; the node answers re-sent ones from its log.
          this.#waiting = this.#waiting.filter((w) => !w.abandoned);
          for (const w of this.#waiting) this.#sock!.write(w.frame);
          return;
        } catch {
          // try again
        }
      }
      const e = new ConnectionLost(
        this.#closedUnanswered
          ? `${this.#opts.host}:${this.#opts.port} closed the connection before answering, again on each of ${this.#attempts} reconnects (a TLS node needs the client's tls option, jcp call's --ca)`
          : `cannot reach ${this.#opts.host}:${this.#opts.port}`,
      );
      this.#attempts = 0;
      this.#delay = undefined;
      this.#closedUnanswered = false;
      for (const w of this.#waiting.splice(0)) w.reject(e);
    })().finally(() => {
      this.#reconnecting = undefined;
    });
    return this.#reconnecting;
  }

  /**
   * Sends one message body and resolves to the reply body (raw).
   * @throws CallTimeout after `timeoutS` seconds (default the client's) without a reply.
   */
  async roundTrip(body: Uint8Array, timeoutS?: number): Promise<Uint8Array> {
    return this.roundTripFrame(frameMessage(body, MAX_DECLARABLE_LENGTH), timeoutS);
  }

  /**
   * Sends pre-framed bytes (exactly one frame) and resolves to the reply body.
   * @throws CallTimeout after `timeoutS` seconds (default the client's) without a reply: the
   *   connection is then replaced and the other unanswered requests re-sent.
   */
  roundTripFrame(frame: Uint8Array, timeoutS: number | undefined = this.#opts.timeoutS): Promise<Uint8Array> {
    if (this.#closed) return Promise.reject(new ConnectionLost('client closed'));
    checkTimeoutS(timeoutS, 'timeoutS');
    return new Promise<Uint8Array>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const w: Waiter = {
        frame,
        resolve: (b) => {
          clearTimeout(timer);
          resolve(b);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      if (timeoutS !== undefined) {
        timer = setTimeout(() => {
          w.abandoned = true;
          reject(new CallTimeout(`no reply from ${this.#opts.host}:${this.#opts.port} within ${timeoutS} s`, timeoutS));
          // The late reply would arrive out of step with the calls behind it: start afresh.
          this.#sock?.destroy();
        }, timeoutS * 1000);
      }
      this.#waiting.push(w);
      if (this.#sock) this.#sock.write(frame);
      else void this.#reconnect();
    });
  }

  /** Sends a signed request; resolves to the response (decided, or an error reply). */
  async send(req: WireRequest): Promise<WireResponse> {
    const reply = decodeWireMessage(await this.roundTrip(encodeWireRequest(req)));
    if (reply.kind === 'response') return reply.response;
    if (reply.kind === 'error') return { error: reply.error };
    throw new WireErrorReply('schema', `expected a response, got ${reply.kind}`);
  }

  /** Builds, signs and sends a request (see {@link CallParams}). */
  async request(p: CallParams): Promise<WireRequest> {
    const signer = p.signer ?? this.#opts.signer;
    if (signer === undefined) throw new Error('JcpClient: no signer configured');
    const leaf = p.chain[p.chain.length - 1];
    if (leaf === undefined) throw new Error('JcpClient: the chain is empty');
    const payload =
      p.payload === undefined ? undefined : p.payload instanceof Uint8Array ? p.payload : enc.encode(JSON.stringify(p.payload));
    const now = p.now ?? (this.#opts.clockS ?? (() => Math.floor(Date.now() / 1000)))();
    const unsigned = {
      frame: {
        kind: p.kind ?? 'tool-call',
        trust: p.trust ?? 'control',
        grant_id: p.grantId ?? grantId(leaf.grant),
        action: p.action,
        resource: p.resource ?? leaf.grant.capability.resource,
        payload_hash: payloadHash(payload),
      },
      chain: p.chain,
      caller: p.caller ?? signer.did,
      cost: p.cost ?? { uj: 0n, provenance: 'Estimator' as const },
      now,
      ...(payload !== undefined ? { payload } : {}),
      ...(p.notify === true || p.onNotice !== undefined ? { notify: 1 as const } : {}),
      ...(p.nonce !== undefined ? { nonce: p.nonce } : {}),
      ...(p.input !== undefined ? { input: p.input } : {}),
    };
    return await signWireRequest(unsigned, 'sign' in signer ? signer.sign : signer);
  }

  /**
   * Builds, signs and sends a call; resolves to the decision, receipt and result.
   * @throws WireErrorReply when the node answers with an error (no decision, no receipt);
   *   CallTimeout (code `timeout`, carrying the request) after `timeoutS` seconds without a reply.
   */
  async call(p: CallParams): Promise<CallResult> {
    return this.callRequest(await this.request(p), {
      ...(p.onNotice !== undefined ? { onNotice: p.onNotice } : {}),
      ...(p.timeoutS !== undefined ? { timeoutS: p.timeoutS } : {}),
    });
  }

  /**
   * Sends an already signed request; `onNotice` gets its notices (when it carries `notify: 1`).
   * `opts` may be a number: the `timeoutS` (the form before notices; still taken).
   * @throws WireErrorReply on an error reply; CallTimeout (carrying `req`) after `timeoutS`
   *   seconds (default the client's) without a reply.
   */
  async callRequest(req: WireRequest, opts: CallRequestOptions | number = {}): Promise<CallResult> {
    const o: CallRequestOptions = typeof opts === 'number' ? { timeoutS: opts } : opts;
    if (o.ownConnection === true) return this.#callAlone(req, o);
    const body = encodeWireRequest(req);
    const rid = contentIdOfBytes(body);
    const onNotice = o.onNotice;
    const timeoutS = o.timeoutS ?? this.#opts.timeoutS;
    const send = async (): Promise<Uint8Array> => {
      try {
        return await this.roundTrip(body, timeoutS);
      } catch (e) {
        if (e instanceof CallTimeout) e.request = req;
        throw e;
      }
    };
    let reply: WireMessage;
    if (onNotice === undefined) reply = decodeWireMessage(await send());
    else {
      // Two identical calls in flight are one request: both see its notices.
      const set = this.#noticeHandlers.get(rid) ?? new Set<(n: McpNotification) => void>();
      this.#noticeHandlers.set(rid, set);
      const mine = (n: McpNotification) => onNotice(n); // a distinct entry even for a shared function
      set.add(mine);
      try {
        reply = decodeWireMessage(await send());
      } finally {
        set.delete(mine);
        if (set.size === 0 && this.#noticeHandlers.get(rid) === set) this.#noticeHandlers.delete(rid);
      }
    }
    if (reply.kind === 'error') throw new WireErrorReply(reply.error.code, reply.error.message);
    if (reply.kind !== 'response') throw new WireErrorReply('schema', `expected a response, got ${reply.kind}`);
    const r = reply.response;
    return {
      decision: r.decision,
      receipt: r.receipt,
      ...(r.result !== undefined ? { result: r.result } : {}),
      requestId: rid,
      request: req,
    };
  }

  /** {@link callRequest} on a connection of its own, closed after the call or when `o.signal` aborts. */
  async #callAlone(req: WireRequest, o: CallRequestOptions): Promise<CallResult> {
    o.signal?.throwIfAborted();
    const side = await JcpClient.connect(this.#opts);
    const abort = () => void side.close();
    o.signal?.addEventListener('abort', abort, { once: true });
    try {
      const { ownConnection: _own, signal: _signal, ...rest } = o;
      return await side.callRequest(req, rest);
    } finally {
      o.signal?.removeEventListener('abort', abort);
      await side.close();
    }
  }

  /**
   * Sends an `agent-task` request (trust `control`, action = the skill, payload `{method, params}`)
   * to the A2A agent behind the chain's resource (docs/a2a.md); streaming methods ask for notices
   * (`notify: 1`) and hand each `a2a/event` to `onEvent`. The reply is data (§6), never an
   * instruction to the caller.
   * @throws WireErrorReply for a refusal before the decision (`unknown-skill`, `skill-required`,
   *   `skill-mismatch`, `task-not-found`, `frame-kind-mismatch`, `stream-limit`, `payload-invalid`, …);
   *   CallTimeout as {@link call}.
   */
  async agentTask(p: AgentTaskParams): Promise<AgentTaskResult> {
    const streaming = p.method === 'SendStreamingMessage' || p.method === 'SubscribeToTask';
    const onEvent = p.onEvent;
    const r = await this.call({
      chain: p.chain,
      action: p.skill,
      kind: 'agent-task',
      trust: 'control',
      payload: { method: p.method, params: p.params },
      notify: streaming || onEvent !== undefined,
      ...(onEvent !== undefined
        ? { onNotice: (n: McpNotification) => n.method === 'a2a/event' && onEvent((n.params ?? {}) as Record<string, unknown>) }
        : {}),
      ...(p.cost !== undefined ? { cost: p.cost } : {}),
      ...(p.now !== undefined ? { now: p.now } : {}),
      ...(p.nonce !== undefined ? { nonce: p.nonce } : {}),
      ...(p.timeoutS !== undefined ? { timeoutS: p.timeoutS } : {}),
      ...(p.signer !== undefined ? { signer: p.signer } : {}),
      ...(p.resource !== undefined ? { resource: p.resource } : {}),
    });
    const v = resultJson(r.result) as Record<string, unknown> | undefined;
    if (typeof v !== 'object' || v === null) return r;
    if ('agent-reply' in v) return { ...r, reply: v['agent-reply'] };
    const e = v['jcp_error'] as AgentTaskResult['error'];
    return e !== undefined ? { ...r, error: e } : r;
  }

  /**
   * Sends a signed revocation (§4.3). With `grant` (the revoked grant), the node checks authority
   * at once; without it, a revocation of a grant the node has not seen waits for that grant.
   * @throws WireErrorReply when the node refuses it (`revocation-refused`, `busy`).
   */
  async revoke(sr: SignedRevocation, grant?: Grant): Promise<ContentId> {
    const msg: WireMessage = grant === undefined ? { kind: 'revoke', revocation: sr } : { kind: 'revoke', revocation: sr, grant };
    const reply = decodeWireMessage(await this.roundTrip(encodeWireMessage(msg)));
    if (reply.kind === 'error') throw new WireErrorReply(reply.error.code, reply.error.message);
    if (reply.kind !== 'revoked') throw new WireErrorReply('schema', `expected revoked, got ${reply.kind}`);
    return reply.grant_id;
  }

  /**
   * The resources the node serves and the MCP tools behind each (`list_tools`, docs/wire.md), in
   * the order of the node's config. No receipt, no debit; any peer may ask.
   * @throws WireErrorReply when the node answers with an error (an old node: `unknown-message`).
   */
  async listTools(): Promise<ListedResource[]> {
    const reply = decodeWireMessage(await this.roundTrip(encodeWireMessage({ kind: 'list_tools' })));
    if (reply.kind === 'error') throw new WireErrorReply(reply.error.code, reply.error.message);
    if (reply.kind !== 'tool_list') throw new WireErrorReply('schema', `expected tool_list, got ${reply.kind}`);
    return reply.resources.map((r) => ({
      name: r.name,
      resource: r.resource,
      tools: JSON.parse(r.tools) as Record<string, unknown>[],
      toolsJson: r.tools,
      ...(r.kind !== undefined ? { kind: r.kind } : {}),
      ...(r.skills !== undefined ? { skills: JSON.parse(r.skills) as Record<string, unknown>[] } : {}),
    }));
  }

  /**
   * Sends an amendment (§4.7) with the steered grant and its checkpoint; resolves to what the node
   * applied (the continuation's id and its cap there, µJ).
   * @throws WireErrorReply when the node refuses it (`amendment-refused` naming the §4.7 code).
   */
  async amend(grant: SignedGrant, checkpoint: SignedCheckpoint, amendment: SignedAmendment): Promise<WireAmended> {
    const reply = decodeWireMessage(await this.roundTrip(encodeWireMessage({ kind: 'amend', grant, checkpoint, amendment })));
    if (reply.kind === 'error') throw new WireErrorReply(reply.error.code, reply.error.message);
    if (reply.kind !== 'amended') throw new WireErrorReply('schema', `expected amended, got ${reply.kind}`);
    return reply.amended;
  }

  /** Unanswered requests. */
  get pending(): number {
    return this.#waiting.length;
  }

  /** Closes the connection; unanswered calls fail with {@link ConnectionLost}. */
  async close(): Promise<void> {
    this.#closed = true;
    const sock = this.#sock;
    if (!sock) {
      for (const w of this.#waiting.splice(0)) w.reject(new ConnectionLost('client closed'));
      return;
    }
    await new Promise<void>((resolve) => {
      sock.once('close', () => resolve());
      sock.end();
      setTimeout(() => sock.destroy(), 1000).unref();
    });
  }
}

/** A plain reading of a JSON result (§6: data, never control): the parsed value, or the raw text. */
export function resultJson(result: Uint8Array | undefined): unknown {
  if (result === undefined) return undefined;
  const text = new TextDecoder().decode(result);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
