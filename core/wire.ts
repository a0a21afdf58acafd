/**
 * The jcp/1 wire binding (spec §11; conformance C8 codec part, C13 caller signature), pure:
 * framing, the canonical message codec, and the caller signature. Sockets live in `node/`.
 *
 * Framing: a 4-byte big-endian length, then one canonical det-CBOR message (§3). The declared
 * length is checked against the receiver's cap BEFORE any buffer is allocated, the body buffer then
 * grows with the bytes that arrive ({@link FrameReader}), and a body whose bytes are not the canonical encoding of their value is refused, so a message
 * has exactly one wire form.
 *
 * Messages are maps; `docs/wire.md` lists them all. Which message a map is follows from its keys:
 * - request `{frame, chain, caller, cost, now, signature, payload?, notify?, nonce?, input?}` (WireRequest, §11);
 * - response `{decision: {verdict, deny_reason?}, receipt, result?}` (WireResponse, §11);
 * - error `{error: {code, message}}` (never reached a decision; no receipt);
 * - revoke `{revoke: SignedRevocation}` → answered by revoked `{revoked: {grant_id}}` or an error.
 * - revoke_grant `{revoke_grant: {revocation: SignedRevocation, grant: Grant}}`: the same, carrying
 *   the revoked grant so the node checks authority at once (§4.3) instead of letting the
 *   revocation wait for the grant; answered like revoke.
 * - list_tools `{list_tools: {}}` → tool_list `{tool_list: {resources: [{name, resource, tools, kind?, skills?}]}}`
 *   (the MCP tools behind each resource, or for an A2A agent `kind: "a2a"` and its card's `skills`;
 *   no receipt, no debit);
 * - notice `{notice: {request_id, notification}}`: an MCP notification (progress, logging) the
 *   upstream sent during an allowed call of a request that asked for them with `notify: 1`; sent
 *   before that request's response.
 *
 * MCP JSON (tool schemas, results, notifications) has floats, bools and null, which canonical CBOR
 * forbids (§3), so it travels as UTF-8 JSON text inside CBOR text strings.
 * - amend `{amend: {grant: SignedGrant, checkpoint: SignedCheckpoint, amendment: SignedAmendment}}`
 *   (§4.7): the steered grant's issuer steers a run at a checkpoint; answered by amended
 *   `{amended: {grant_id, continuation_id, budget_uj, steered_spent_uj}}` or an error.
 *
 * Caller signature (§11): Ed25519 by `caller` over `canonical_cbor` of the request map without
 * `signature` (payload included when present). The payload is bound by `frame.payload_hash`
 * = content id of the payload byte string's CBOR encoding (an absent payload hashes as the empty
 * byte string); a request whose hash does not match its payload is refused at decode.
 *
 * Decoding never throws anything but a JcpError: `frame-too-large`, `frame-unallocatable`, `frame-truncated`,
 * `cbor-malformed`, `cbor-non-canonical`, `cbor-forbidden-type`, `schema`, `did-invalid`, `bad-length`.
 */
import type { Actor } from './actor.ts';
import { bytesEqual } from './bytes.ts';
import {
  concatItems,
  decode,
  encode,
  headBytes,
  itemAt,
  MAJOR,
  skipItem,
  stringItemLength,
  withoutMapEntry,
  writeHead,
  writeRaw,
  writeStringItem,
} from './cbor.ts';
import { type DenyReason, isDenyReason } from './deny.ts';
import { type Did, parseDid } from './didkey.ts';
import { sign, verify } from './ed25519.ts';
import { type Cost, costToCbor, readCost } from './energy.ts';
import { ErrorCodes, JcpError, check } from './errors.ts';
import { type Frame, frameToCbor, readFrame } from './frame.ts';
import { type Grant, type SignedGrant, grantToCbor, readGrant, readSignedGrant, signedGrantToCbor } from './grant.ts';
import { type ContentId, contentId } from './hash.ts';
import {
  readSignedAmendment,
  readSignedCheckpoint,
  type SignedAmendment,
  type SignedCheckpoint,
  signedAmendmentToCbor,
  signedCheckpointToCbor,
} from './checkpoint.ts';
import { type SignedRevocation, readSignedRevocation, signedRevocationToCbor } from './revocation.ts';
import { asArray, asBytes, asCid, asDid, asEnum, asObj, asSafeUint, asText, asUint, type Obj, uintOut } from './schema.ts';

/** Bytes in the length prefix (§11). */
export const FRAME_HEADER_BYTES = 4;
/** The largest length a 4-byte prefix can declare (4 GiB − 1). */
export const MAX_DECLARABLE_LENGTH = 0xffff_ffff;
/** Default cap on one message body: 1 MiB. A receiver MUST refuse longer messages (§11). */
export const DEFAULT_FRAME_CAP = 1 << 20;
/** The most links a wire request may carry (the decision denies chains over 32 as `chain-broken`). */
export const MAX_WIRE_CHAIN = 256;

function checkCap(cap: number): void {
  if (!Number.isSafeInteger(cap) || cap < 1 || cap > MAX_DECLARABLE_LENGTH) {
    throw new RangeError(`jcp/1: cap must be an integer in 1..${MAX_DECLARABLE_LENGTH}, got ${cap}`);
  }
}

function tooLarge(length: number, cap: number): JcpError {
  return new JcpError(ErrorCodes.FRAME_TOO_LARGE, `jcp/1: message of ${length} bytes exceeds the cap of ${cap} bytes`, {
    length,
    cap,
  });
}

/**
 * Frames one message body: 4-byte big-endian length ‖ body (§11).
 * @throws JcpError `frame-too-large` when the body is longer than `cap` (default {@link DEFAULT_FRAME_CAP}).
 */
export function frameMessage(body: Uint8Array, cap = DEFAULT_FRAME_CAP): Uint8Array {
  checkCap(cap);
  if (body.length > cap) throw tooLarge(body.length, cap);
  const out = new Uint8Array(FRAME_HEADER_BYTES + body.length);
  new DataView(out.buffer).setUint32(0, body.length, false);
  out.set(body, FRAME_HEADER_BYTES);
  return out;
}

/** The body buffer a {@link FrameReader} allocates first for a declared length, and grows by doubling: 64 KiB. */
export const FRAME_INITIAL_RESERVE = 64 << 10;

/** Allocates a body buffer of `n` bytes (a test may inject one that fails). */
export type FrameAllocator = (n: number) => Uint8Array;

/** Options of a {@link FrameReader}. */
export interface FrameReaderOptions {
  /** Body buffer allocator; default `new Uint8Array(n)`. A throw becomes `frame-unallocatable`. */
  readonly alloc?: FrameAllocator;
}

/**
 * Incremental jcp/1 deframer (§11): feed it stream chunks of any size, get whole message bodies.
 * The declared length is compared with the cap as soon as its 4 bytes are in, before the body
 * buffer is allocated. The body buffer then grows with the bytes that arrive (at most
 * {@link FRAME_INITIAL_RESERVE} at first, doubled as needed, never past the declared length), so a
 * peer that declares a large length and sends nothing more holds at most 64 KiB, not the length
 * it declared. A buffer that cannot be allocated fails the reader with `frame-unallocatable`
 * (never a thrown RangeError). After an error the stream cannot be resynchronised: the reader
 * stays failed and every later `push` throws the same error (the caller replies and closes).
 */
export class FrameReader {
  readonly cap: number;
  readonly #alloc: FrameAllocator;
  readonly #header = new Uint8Array(FRAME_HEADER_BYTES);
  #headerFill = 0;
  /** The declared length of the body being read; -1 while reading a header. */
  #length = -1;
  #body: Uint8Array | undefined;
  #bodyFill = 0;
  #failed: JcpError | undefined;

  /**
   * @param cap the largest body accepted, in bytes (default {@link DEFAULT_FRAME_CAP}).
   * @throws RangeError when `cap` is not an integer in 1..2^32−1.
   */
  constructor(cap = DEFAULT_FRAME_CAP, opts: FrameReaderOptions = {}) {
    checkCap(cap);
    this.cap = cap;
    this.#alloc = opts.alloc ?? ((n) => new Uint8Array(n));
  }

  /**
   * Consumes `chunk` and returns every message body it completes (possibly none).
   * @throws JcpError `frame-too-large` when a declared length exceeds the cap (nothing allocated),
   *   `frame-unallocatable` when a body buffer cannot be allocated; bodies the same chunk
   *   completed before are dropped: use {@link read} to keep them.
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const r = this.read(chunk);
    if (r.error) throw r.error;
    return r.bodies;
  }

  /** A buffer of `n` bytes holding the body read so far, or the reader failed `frame-unallocatable`. */
  #grow(n: number): Uint8Array | undefined {
    let next: Uint8Array;
    try {
      next = this.#alloc(n);
    } catch (e) {
      this.#failed = new JcpError(
        ErrorCodes.FRAME_UNALLOCATABLE,
        `jcp/1: cannot allocate ${n} bytes for a message of ${this.#length} bytes: ${(e as Error)?.message ?? String(e)}`,
        { length: this.#length },
      );
      this.#body = undefined;
      this.#length = -1;
      return undefined;
    }
    if (this.#body !== undefined && this.#bodyFill > 0) next.set(this.#body.subarray(0, this.#bodyFill));
    this.#body = next;
    return next;
  }

  /**
   * Consumes `chunk`: every message body it completes, in order, and — when a declared length
   * in it exceeds the cap (`frame-too-large`, nothing allocated) or a body buffer cannot be
   * allocated (`frame-unallocatable`) — that error, which comes after those bodies in the stream.
   * Once failed, the reader stays failed: each later call returns the same error and no bodies.
   *
   * With `maxBodies`, reading stops once that many bodies are complete: the bytes of `chunk` not
   * consumed yet come back as `rest` (a view of `chunk`, absent when all were consumed), for the
   * caller to pass to a later `read` once it can take more: a peer's pipelined messages are then
   * taken one at a time against the caller's limit, never a whole chunk's worth at once.
   */
  read(
    chunk: Uint8Array,
    maxBodies = Number.POSITIVE_INFINITY,
  ): { readonly bodies: Uint8Array[]; readonly error?: JcpError; readonly rest?: Uint8Array } {
    if (this.#failed) return { bodies: [], error: this.#failed };
    const out: Uint8Array[] = [];
    let off = 0;
    while (off < chunk.length) {
      if (out.length >= maxBodies) return { bodies: out, rest: chunk.subarray(off) };
      if (this.#length < 0) {
        const take = Math.min(FRAME_HEADER_BYTES - this.#headerFill, chunk.length - off);
        this.#header.set(chunk.subarray(off, off + take), this.#headerFill);
        this.#headerFill += take;
        off += take;
        if (this.#headerFill < FRAME_HEADER_BYTES) break;
        const length = new DataView(this.#header.buffer).getUint32(0, false);
        if (length > this.cap) {
          this.#headerFill = 0;
          this.#failed = tooLarge(length, this.cap);
          return { bodies: out, error: this.#failed };
        }
        if (length === 0) {
          this.#headerFill = 0;
          out.push(new Uint8Array(0)); // an empty body: complete now (the decoder refuses it)
          continue;
        }
        // The header stays counted (headerFill) until the body completes: a header-only
        // connection is a partial frame, under the read timeout.
        this.#length = length;
        this.#body = undefined;
        this.#bodyFill = 0;
      }
      const length = this.#length;
      const want = Math.min(length - this.#bodyFill, chunk.length - off);
      let body = this.#body;
      if (body === undefined || body.length < this.#bodyFill + want) {
        let size = body === undefined ? Math.min(length, FRAME_INITIAL_RESERVE) : body.length;
        while (size < this.#bodyFill + want) size = Math.min(length, size * 2);
        const grown = this.#grow(size);
        if (grown === undefined) return { bodies: out, error: this.#failed! };
        body = grown;
      }
      body.set(chunk.subarray(off, off + want), this.#bodyFill);
      this.#bodyFill += want;
      off += want;
      if (this.#bodyFill === length) {
        out.push(body);
        this.#body = undefined;
        this.#length = -1;
        this.#headerFill = 0;
      }
    }
    return { bodies: out };
  }

  /**
   * The body length the message being read declares, once its header is complete; undefined while
   * a header is read (a caller may refuse a message on its length before taking its body).
   */
  get declared(): number | undefined {
    return this.#length < 0 ? undefined : this.#length;
  }

  /** Bytes received of the incomplete message (header and body so far); 0 between messages. */
  get buffered(): number {
    return this.#headerFill + (this.#length < 0 ? 0 : this.#bodyFill);
  }

  /**
   * Bytes this reader holds allocated for the incomplete message: the header buffer's fill plus
   * the body buffer's capacity (at most twice the body bytes received, or 64 KiB, whichever is
   * larger; never more than the declared length). 0 between messages.
   */
  get reserved(): number {
    return this.#headerFill + (this.#body === undefined ? 0 : this.#body.length);
  }

  /**
   * Declares the end of the stream.
   * @throws JcpError `frame-truncated` when it ends inside a message.
   */
  end(): void {
    if (this.#failed) throw this.#failed;
    if (this.#headerFill > 0 || this.#length >= 0) {
      throw new JcpError(ErrorCodes.FRAME_TRUNCATED, 'jcp/1: stream ended inside a message', { buffered: this.buffered });
    }
  }
}

/** A WireRequest (§11). `now` in unix seconds; `payload` is the call's arguments, bound by `frame.payload_hash`. */
export interface WireRequest {
  readonly frame: Frame;
  /** The full delegation chain, root first (one link for an un-delegated grant). */
  readonly chain: readonly SignedGrant[];
  readonly caller: Did;
  readonly cost: Cost;
  /** Decision time the caller asserts, unix seconds (the node bounds its skew). */
  readonly now: number;
  readonly payload?: Uint8Array;
  /**
   * `1` asks the node to forward the upstream's progress and logging notifications of this call
   * as `notice` messages before the response; absent = none. Signed like every field.
   */
  readonly notify?: 1;
  /**
   * {@link REQUEST_NONCE_BYTES} bytes the caller chooses so that two calls with the same fields
   * in the same second are two requests (§11: the request id is the content id of the signed
   * request, so without it they would be one, and the second an idempotent replay of the first).
   * Signed like every field; absent in requests that need none (the request bytes are then what
   * they were before the field existed).
   */
  readonly nonce?: Uint8Array;
  /**
   * MCP multi round-trip material (MCP 2026-07-28, SEP-2322; docs/wire.md "MCP tools behind a
   * node"): the UTF-8 JSON text of an object `{capabilities?, responses?, state?}` — the MCP
   * client's declared capabilities (`sampling`, `elicitation`, `roots`), and on a continuation
   * the client's `inputResponses` and the node's continuation token (`requestState`). At most
   * {@link REQUEST_INPUT_MAX_CHARS} characters. Signed like every field; absent in a request
   * without any (its bytes are then what they were before the field existed).
   */
  readonly input?: string;
  /** Ed25519 by `caller` over {@link wireRequestSigningBytes}; 64 bytes. */
  readonly signature: Uint8Array;
}

/** A WireRequest before the caller signs it. */
export type UnsignedWireRequest = Omit<WireRequest, 'signature'>;

/** `frame.payload_hash` for a payload (§11, DESIGN): content id of the byte string; absent = empty bytes. */
export function payloadHash(payload?: Uint8Array): ContentId {
  return contentId(payload ?? new Uint8Array(0));
}

function unsignedToCbor(r: UnsignedWireRequest): Obj {
  const o: Obj = {
    frame: frameToCbor(r.frame),
    chain: r.chain.map(signedGrantToCbor),
    caller: r.caller,
    cost: costToCbor(r.cost),
    now: r.now,
  };
  if (r.payload !== undefined) o['payload'] = r.payload;
  if (r.notify !== undefined) o['notify'] = r.notify;
  if (r.nonce !== undefined) o['nonce'] = r.nonce;
  if (r.input !== undefined) o['input'] = r.input;
  return o;
}

/** The plain CBOR map of a (signed) WireRequest. */
export function wireRequestToCbor(r: WireRequest): Obj {
  return { ...unsignedToCbor(r), signature: r.signature };
}

/** The bytes the caller signs (§11): canonical det-CBOR of the request map without `signature`. */
export function wireRequestSigningBytes(r: UnsignedWireRequest): Uint8Array {
  return encode(unsignedToCbor(r));
}

/** Who signs a request: an Actor, or a function over the signing bytes (a remote or FROST threshold signer, §2.2). */
export type WireSigner = Actor | ((msg: Uint8Array) => Uint8Array | Promise<Uint8Array>);

/**
 * Signs a request as its caller (§11, C13). With an Actor, its did must be `unsigned.caller`.
 * A function signer may be asynchronous (a threshold signing session).
 * @throws JcpError `schema` (actor is not the caller, or the signer returned other than 64 bytes).
 */
export async function signWireRequest(unsigned: UnsignedWireRequest, signer: WireSigner): Promise<WireRequest> {
  if (typeof signer !== 'function') return signWireRequestSync(unsigned, signer);
  const signature = await signer(wireRequestSigningBytes(unsigned));
  check(signature instanceof Uint8Array && signature.length === 64, 'signature', 'the signer must return 64 bytes');
  return { ...unsigned, signature };
}

/**
 * Signs a request as its caller with a local key (§11).
 * @throws JcpError `schema` when `actor.did` is not `unsigned.caller`.
 */
export function signWireRequestSync(unsigned: UnsignedWireRequest, actor: Actor): WireRequest {
  check(actor.did === unsigned.caller, 'caller', 'the signing actor is not the caller');
  return { ...unsigned, signature: sign(actor.key, wireRequestSigningBytes(unsigned)) };
}

/** True when the caller's signature verifies over the request (§11). Never throws. */
export function verifyWireRequestSignature(r: WireRequest): boolean {
  try {
    return verify(parseDid(r.caller), wireRequestSigningBytes(r), r.signature);
  } catch {
    return false;
  }
}

/** Canonical det-CBOR bytes of a WireRequest (a message body, not yet framed). */
export function encodeWireRequest(r: WireRequest): Uint8Array {
  return encode(wireRequestToCbor(r));
}

/** The request id (§11, idempotent replay): content id of the canonical request map, signature included. */
export function requestIdOf(r: WireRequest): ContentId {
  return contentId(wireRequestToCbor(r));
}

/** The decision as a response carries it (§11). */
export interface WireDecision {
  readonly verdict: 'allow' | 'deny';
  /** Present exactly on deny: the spec's deny-reason string. */
  readonly deny_reason?: DenyReason;
}

/** A refusal that never reached a decision (too long, non-canonical, malformed…): no receipt. */
export interface WireError {
  /** A stable code (`ErrorCodes`, or a node code such as `clock-skew`). */
  readonly code: string;
  readonly message: string;
}

/** A decided response (§11): the decision, the sealed receipt, and the endpoint's result on allow. */
export interface WireDecisionResponse {
  readonly decision: WireDecision;
  /** The COSE_Sign1 receipt bytes (`receipt.ts`). */
  readonly receipt: Uint8Array;
  /** The endpoint's output, returned as data; only on allow. */
  readonly result?: Uint8Array;
}

/** A WireResponse: a decided response, or an error. */
export type WireResponse = WireDecisionResponse | { readonly error: WireError };

/** One resource's tools in a `tool_list` message. */
export interface ToolListEntry {
  /** The resource's name in the node's config (for people; at most {@link MAX_NAME} characters). */
  readonly name: string;
  /** The resource's content id (what a grant's `capability.resource` names). */
  readonly resource: ContentId;
  /**
   * The JSON text of the upstream's `tools/list` `tools` array (all pages, MCP `Tool` objects);
   * `[]` when the node does not know them (the upstream never answered).
   */
  readonly tools: string;
  /** `a2a` when an A2A agent stands behind the resource (docs/a2a.md); absent for an MCP server. */
  readonly kind?: 'a2a';
  /** A2A only: the JSON text of the agent card's `skills` array; `[]` before the card was read. */
  readonly skills?: string;
}

/** An MCP notification forwarded during a call (`notice`). */
export interface WireNotice {
  /** The request id ({@link requestIdOf}) of the call the notification belongs to. */
  readonly request_id: ContentId;
  /** The JSON-RPC notification object (`{jsonrpc, method, params?}`) as JSON text. */
  readonly notification: string;
}

/** Every jcp/1 message, tagged by `kind` (its top-level key, see `docs/wire.md`). */
export type WireMessage =
  | { readonly kind: 'request'; readonly request: WireRequest }
  | { readonly kind: 'response'; readonly response: WireDecisionResponse }
  | { readonly kind: 'error'; readonly error: WireError }
  | { readonly kind: 'revoke'; readonly revocation: SignedRevocation; readonly grant?: Grant }
  | { readonly kind: 'revoked'; readonly grant_id: ContentId }
  | { readonly kind: 'list_tools' }
  | { readonly kind: 'tool_list'; readonly resources: readonly ToolListEntry[] }
  | ({ readonly kind: 'notice' } & WireNotice)
  | { readonly kind: 'amend'; readonly grant: SignedGrant; readonly checkpoint: SignedCheckpoint; readonly amendment: SignedAmendment }
  | { readonly kind: 'amended'; readonly amended: WireAmended };

/**
 * What a node answers to an amendment it applied (§4.7): the steered grant (now refused there,
 * `revoked`), the continuation's id, the continuation's effective cap at this node
 * (`budget_uj` = min(amendment budget, steered budget − steered spend), µJ) and the steered
 * grant's spend at this node when the amendment took effect (µJ).
 */
export interface WireAmended {
  readonly grant_id: ContentId;
  readonly continuation_id: ContentId;
  readonly budget_uj: bigint;
  readonly steered_spent_uj: bigint;
}

/** Most characters of a resource name in a `tool_list`. */
export const MAX_NAME = 256;
/** Most resources in one `tool_list`. */
export const MAX_TOOL_LIST_RESOURCES = 4096;

/** The most bytes of an error message we carry. */
export const MAX_ERROR_MESSAGE = 1024;

/** Canonical det-CBOR body of any message. @throws JcpError `cbor-forbidden-type` on unencodable content. */
export function encodeWireMessage(m: WireMessage): Uint8Array {
  switch (m.kind) {
    case 'request':
      return encodeWireRequest(m.request);
    case 'response':
      return encodeDecisionResponse(m.response);
    case 'error':
      return encode({ error: { code: m.error.code, message: m.error.message.slice(0, MAX_ERROR_MESSAGE) } });
    case 'revoke':
      return m.grant === undefined
        ? encode({ revoke: signedRevocationToCbor(m.revocation) })
        : encode({ revoke_grant: { revocation: signedRevocationToCbor(m.revocation), grant: grantToCbor(m.grant) } });
    case 'revoked':
      return encode({ revoked: { grant_id: m.grant_id } });
    case 'list_tools':
      return encode({ list_tools: {} });
    case 'tool_list':
      return encode({
        tool_list: {
          resources: m.resources.map((r) => ({
            name: r.name,
            resource: r.resource,
            tools: r.tools,
            ...(r.kind !== undefined ? { kind: r.kind } : {}),
            ...(r.skills !== undefined ? { skills: r.skills } : {}),
          })),
        },
      });
    case 'notice':
      return encode({ notice: { request_id: m.request_id, notification: m.notification } });
    case 'amend':
      return encode({
        amend: {
          grant: signedGrantToCbor(m.grant),
          checkpoint: signedCheckpointToCbor(m.checkpoint),
          amendment: signedAmendmentToCbor(m.amendment),
        },
      });
    case 'amended':
      return encode({
        amended: {
          grant_id: m.amended.grant_id,
          continuation_id: m.amended.continuation_id,
          budget_uj: uintOut(m.amended.budget_uj),
          steered_spent_uj: uintOut(m.amended.steered_spent_uj),
        },
      });
  }
}

const TEXT = new TextEncoder();

/** Encoded map keys of a decided response (`result` < `receipt` < `decision`, and `verdict` < `deny_reason`: RFC 8949 §4.2.1). */
const KEY = {
  result: encode('result'),
  receipt: encode('receipt'),
  decision: encode('decision'),
  verdict: encode('verdict'),
  deny_reason: encode('deny_reason'),
};

/**
 * The canonical det-CBOR of a decided response, assembled in one buffer: the bytes
 * the general encoder gives for `{decision: {verdict, deny_reason?}, receipt, result?}`
 * (test/core/wire.test.ts holds the two equal), without
 * the general encoder's per-object work on the node's reply path.
 */
function encodeDecisionResponse(r: WireDecisionResponse): Uint8Array {
  const verdict = TEXT.encode(r.decision.verdict);
  const reason = r.decision.deny_reason === undefined ? undefined : TEXT.encode(r.decision.deny_reason);
  let n =
    1 +
    KEY.receipt.length +
    stringItemLength(r.receipt.length) +
    KEY.decision.length +
    1 +
    KEY.verdict.length +
    stringItemLength(verdict.length);
  if (reason !== undefined) n += KEY.deny_reason.length + stringItemLength(reason.length);
  if (r.result !== undefined) n += KEY.result.length + stringItemLength(r.result.length);
  const out = new Uint8Array(n);
  let off = writeHead(out, 0, MAJOR.map, r.result === undefined ? 2 : 3);
  if (r.result !== undefined) off = writeStringItem(out, writeRaw(out, off, KEY.result), MAJOR.bytes, r.result);
  off = writeStringItem(out, writeRaw(out, off, KEY.receipt), MAJOR.bytes, r.receipt);
  off = writeHead(out, writeRaw(out, off, KEY.decision), MAJOR.map, reason === undefined ? 1 : 2);
  off = writeStringItem(out, writeRaw(out, off, KEY.verdict), MAJOR.text, verdict);
  if (reason !== undefined) off = writeStringItem(out, writeRaw(out, off, KEY.deny_reason), MAJOR.text, reason);
  return out;
}

/** Canonical det-CBOR body of a WireResponse (decided or error). */
export function encodeWireResponse(r: WireResponse): Uint8Array {
  return 'error' in r ? encodeWireMessage({ kind: 'error', error: r.error }) : encodeWireMessage({ kind: 'response', response: r });
}

/** The error message for a JcpError (what a node sends when a message never reached a decision). */
export function errorResponseOf(e: JcpError): WireResponse {
  return { error: { code: e.code, message: e.message.slice(0, MAX_ERROR_MESSAGE) } };
}

/**
 * Decodes one message body (§11): strict canonical det-CBOR, then the schema of the message its
 * keys name. Signatures are not checked here (the caller's by {@link verifyWireRequestSignature},
 * the grants' by the decision).
 * @throws JcpError `cbor-malformed` | `cbor-non-canonical` | `cbor-forbidden-type` (bytes),
 *   `schema` (unknown message, missing/unknown field, payload hash mismatch, …), `did-invalid`, `bad-length`.
 */
export function decodeWireMessage(bytes: Uint8Array): WireMessage {
  const v = decode(bytes);
  check(typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array), 'message', 'expected a map');
  const o = v as Obj;
  if ('frame' in o) return { kind: 'request', request: readWireRequest(o) };
  if ('decision' in o) return { kind: 'response', response: readDecisionResponse(o) };
  if ('error' in o) {
    const e = asObj(asObj(o, 'message', ['error'])['error'], 'error', ['code', 'message']);
    return {
      kind: 'error',
      error: { code: asText(e['code'], 'error.code', 64), message: asText(e['message'], 'error.message', MAX_ERROR_MESSAGE) },
    };
  }
  if ('revoke' in o) {
    return { kind: 'revoke', revocation: readSignedRevocation(asObj(o, 'message', ['revoke'])['revoke'], 'revoke') };
  }
  if ('revoke_grant' in o) {
    const r = asObj(asObj(o, 'message', ['revoke_grant'])['revoke_grant'], 'revoke_grant', ['revocation', 'grant']);
    return {
      kind: 'revoke',
      revocation: readSignedRevocation(r['revocation'], 'revoke_grant.revocation'),
      grant: readGrant(r['grant'], 'revoke_grant.grant'),
    };
  }
  if ('revoked' in o) {
    const r = asObj(asObj(o, 'message', ['revoked'])['revoked'], 'revoked', ['grant_id']);
    return { kind: 'revoked', grant_id: asCid(r['grant_id'], 'revoked.grant_id') };
  }
  if ('list_tools' in o) {
    asObj(asObj(o, 'message', ['list_tools'])['list_tools'], 'list_tools', []);
    return { kind: 'list_tools' };
  }
  if ('tool_list' in o) {
    const t = asObj(asObj(o, 'message', ['tool_list'])['tool_list'], 'tool_list', ['resources']);
    const resources = asArray(t['resources'], 'tool_list.resources', MAX_TOOL_LIST_RESOURCES).map((e, i) => {
      const where = `tool_list.resources[${i}]`;
      const r = asObj(e, where, ['name', 'resource', 'tools'], ['kind', 'skills']);
      const tools = asText(r['tools'], `${where}.tools`, Number.MAX_SAFE_INTEGER);
      check(Array.isArray(jsonOrUndefined(tools)), `${where}.tools`, 'expected the JSON text of an array of MCP tools');
      const kind = r['kind'] === undefined ? undefined : asEnum(r['kind'], `${where}.kind`, ['a2a'] as const);
      const skills = r['skills'] === undefined ? undefined : asText(r['skills'], `${where}.skills`, Number.MAX_SAFE_INTEGER);
      check(
        skills === undefined || Array.isArray(jsonOrUndefined(skills)),
        `${where}.skills`,
        'expected the JSON text of an array of agent skills',
      );
      return {
        name: asText(r['name'], `${where}.name`, MAX_NAME),
        resource: asCid(r['resource'], `${where}.resource`),
        tools,
        ...(kind !== undefined ? { kind } : {}),
        ...(skills !== undefined ? { skills } : {}),
      };
    });
    return { kind: 'tool_list', resources };
  }
  if ('notice' in o) {
    const n = asObj(asObj(o, 'message', ['notice'])['notice'], 'notice', ['request_id', 'notification']);
    const notification = asText(n['notification'], 'notice.notification', Number.MAX_SAFE_INTEGER);
    const v = jsonOrUndefined(notification) as { method?: unknown } | undefined;
    check(
      typeof v === 'object' && v !== null && !Array.isArray(v) && typeof v.method === 'string',
      'notice.notification',
      'expected the JSON text of a JSON-RPC notification object (with a string method)',
    );
    return { kind: 'notice', request_id: asCid(n['request_id'], 'notice.request_id'), notification };
  }
  if ('amend' in o) {
    const a = asObj(asObj(o, 'message', ['amend'])['amend'], 'amend', ['grant', 'checkpoint', 'amendment']);
    return {
      kind: 'amend',
      grant: readSignedGrant(a['grant'], 'amend.grant'),
      checkpoint: readSignedCheckpoint(a['checkpoint'], 'amend.checkpoint'),
      amendment: readSignedAmendment(a['amendment'], 'amend.amendment'),
    };
  }
  if ('amended' in o) {
    const a = asObj(asObj(o, 'message', ['amended'])['amended'], 'amended', [
      'grant_id',
      'continuation_id',
      'budget_uj',
      'steered_spent_uj',
    ]);
    return {
      kind: 'amended',
      amended: {
        grant_id: asCid(a['grant_id'], 'amended.grant_id'),
        continuation_id: asCid(a['continuation_id'], 'amended.continuation_id'),
        budget_uj: asUint(a['budget_uj'], 'amended.budget_uj'),
        steered_spent_uj: asUint(a['steered_spent_uj'], 'amended.steered_spent_uj'),
      },
    };
  }
  throw new JcpError(ErrorCodes.SCHEMA, 'message: not a jcp/1 message (see docs/wire.md)', { field: 'message' });
}

/** The optional fields of a request map. */
export const REQUEST_OPTIONAL: readonly string[] = ['payload', 'notify', 'nonce', 'input'];

/** Most characters of a request's optional `input` (the JSON text of the MCP input material). */
export const REQUEST_INPUT_MAX_CHARS = 1_048_576;

/** Length of a request's optional `nonce` (bytes). */
export const REQUEST_NONCE_BYTES = 16;

/** A parsed JSON text, or undefined when it is not JSON. */
function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Reads a decoded map as a WireRequest (§11), checking every field and that `frame.payload_hash`
 * binds the payload.
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readWireRequest(v: unknown): WireRequest {
  const o = asObj(v, 'request', ['frame', 'chain', 'caller', 'cost', 'now', 'signature'], REQUEST_OPTIONAL);
  const chain = asArray(o['chain'], 'request.chain', MAX_WIRE_CHAIN).map((g, i) => readSignedGrant(g, `request.chain[${i}]`));
  check(chain.length > 0, 'request.chain', 'at least one grant');
  return readWireRequestFields(o, chain);
}

/**
 * Reads every field of a request map but `chain` (which the caller has read and passes in), with
 * the rules of `readWireRequest`: the payload, the frame (whose `payload_hash` must bind the
 * payload), caller, cost, `now` and the signature, in that order.
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readWireRequestFields(o: Obj, chain: readonly SignedGrant[]): WireRequest {
  const payload = o['payload'] === undefined ? undefined : asBytes(o['payload'], 'request.payload');
  const frame = readFrame(o['frame'], 'request.frame');
  check(frame.payload_hash === payloadHash(payload), 'request.frame.payload_hash', 'does not match the payload');
  if (o['notify'] !== undefined) check(o['notify'] === 1, 'request.notify', 'expected the unsigned integer 1 (or absent)');
  if (o['input'] !== undefined) {
    const t = o['input'];
    check(
      typeof t === 'string' && t.length <= REQUEST_INPUT_MAX_CHARS,
      'request.input',
      `text of at most ${REQUEST_INPUT_MAX_CHARS} characters`,
    );
    const v = jsonOrUndefined(t as string);
    check(typeof v === 'object' && v !== null && !Array.isArray(v), 'request.input', 'the JSON text of an object');
  }
  return {
    frame,
    chain,
    caller: asDid(o['caller'], 'request.caller'),
    cost: readCost(o['cost'], 'request.cost'),
    now: asSafeUint(o['now'], 'request.now'),
    ...(payload !== undefined ? { payload } : {}),
    ...(o['notify'] !== undefined ? { notify: 1 as const } : {}),
    ...(o['nonce'] !== undefined ? { nonce: asBytes(o['nonce'], 'request.nonce', REQUEST_NONCE_BYTES) } : {}),
    ...(o['input'] !== undefined ? { input: o['input'] as string } : {}),
    signature: asBytes(o['signature'], 'request.signature', 64),
  };
}

/** The first byte of a request map: 6 required fields, plus `payload`, `notify`, `nonce` and `input` when present. */
const REQUEST_HEAD_MIN = headBytes(MAJOR.map, 6)[0]!;
const REQUEST_HEAD_MAX = headBytes(MAJOR.map, 10)[0]!;
/** `now`, `cost`, `chain`: the first three keys of every request map in canonical key order (§3, length first). */
const NOW_KEY = encode('now');
const COST_KEY = encode('cost');
const CHAIN_KEY = encode('chain');

/** Where the `chain` entry of a request body is: its key's offset, its value's start and end. */
export interface RequestChainEntry {
  readonly keyAt: number;
  readonly valueAt: number;
  readonly end: number;
}

/**
 * Finds the `chain` entry of a request-shaped body (a 6- to 10-entry map whose first keys are
 * `now`, `cost`, `chain`) by walking the item structure only; undefined for any other shape.
 * Nothing is checked canonical here: the caller still decodes the body strictly
 * ({@link decodeWireRequestWithChain} or {@link decodeWireMessage}).
 */
export function requestChainEntry(body: Uint8Array): RequestChainEntry | undefined {
  const h = body[0];
  if (h === undefined || h < REQUEST_HEAD_MIN || h > REQUEST_HEAD_MAX) return undefined;
  let off = 1;
  if (!itemAt(body, off, NOW_KEY)) return undefined;
  off = skipItem(body, off + NOW_KEY.length);
  if (off < 0 || !itemAt(body, off, COST_KEY)) return undefined;
  off = skipItem(body, off + COST_KEY.length);
  if (off < 0 || !itemAt(body, off, CHAIN_KEY)) return undefined;
  const valueAt = off + CHAIN_KEY.length;
  const end = skipItem(body, valueAt);
  return end < 0 ? undefined : { keyAt: off, valueAt, end };
}

/**
 * Decodes a request body whose chain (the entry at `entry`) the caller already holds decoded,
 * e.g. from a cache keyed by the chain's exact bytes: the body without that entry is decoded
 * strictly (canonical-checked, §3) and read with the field rules of {@link readWireRequest};
 * `chain` is used as is (its grants are not read again).
 * @throws JcpError `cbor-*` (the rest is not canonical det-CBOR), `schema` / `did-invalid` /
 *   `bad-length` (a field), `schema` when `entry` does not lie inside a small map. On any error
 *   the caller decodes the whole body with {@link decodeWireMessage} for the verdict to report.
 */
export function decodeWireRequestWithChain(body: Uint8Array, entry: RequestChainEntry, chain: readonly SignedGrant[]): WireRequest {
  const rest = withoutMapEntry(body, entry.keyAt, entry.end);
  if (rest === undefined)
    throw new JcpError(ErrorCodes.SCHEMA, 'request: the chain entry is not inside a request map', { field: 'request' });
  const o = asObj(decode(rest), 'request', ['frame', 'caller', 'cost', 'now', 'signature'], REQUEST_OPTIONAL);
  return readWireRequestFields(o, chain);
}

/** `"signature"` as a text key, then the head of a 64-byte string: how every request body ends. */
const SIGNATURE_TAIL = concatItems([encode('signature'), headBytes(MAJOR.bytes, 64)]);
const SIGNATURE_TAIL_BYTES = SIGNATURE_TAIL.length + 64;

/**
 * The bytes the caller signed (§11), taken from a canonical request `body` decoded as `req`:
 * `signature` is the longest key of a request, so in canonical key order (length first) it is
 * the map's last entry, and dropping it (with the entry count one less) gives exactly
 * `canonical_cbor(request without signature)` without encoding the request again. Falls back to
 * {@link wireRequestSigningBytes} when the body has another shape (not a 6- to 10-entry map
 * ending with `req.signature`). Either way equal to `wireRequestSigningBytes(req)`. Never throws
 * for a `req` that encodes.
 */
export function wireRequestSigningBytesOf(body: Uint8Array, req: WireRequest): Uint8Array {
  const head = body[0];
  const at = body.length - SIGNATURE_TAIL_BYTES;
  if (head !== undefined && head >= REQUEST_HEAD_MIN && head <= REQUEST_HEAD_MAX && at > 1 && itemAt(body, at, SIGNATURE_TAIL)) {
    if (bytesEqual(body.subarray(at + SIGNATURE_TAIL.length), req.signature)) {
      const out = withoutMapEntry(body, at, body.length);
      if (out !== undefined) return out;
    }
  }
  return wireRequestSigningBytes(req);
}

function readDecisionResponse(o: Obj): WireDecisionResponse {
  asObj(o, 'response', ['decision', 'receipt'], ['result']);
  const d = asObj(o['decision'], 'response.decision', ['verdict'], ['deny_reason']);
  const verdict = asEnum(d['verdict'], 'response.decision.verdict', ['allow', 'deny'] as const);
  let decision: WireDecision;
  if (verdict === 'deny') {
    check(isDenyReason(d['deny_reason']), 'response.decision.deny_reason', 'a deny carries one of the spec deny reasons');
    decision = { verdict, deny_reason: d['deny_reason'] };
  } else {
    check(d['deny_reason'] === undefined, 'response.decision.deny_reason', 'must be omitted on allow');
    decision = { verdict };
  }
  const receipt = asBytes(o['receipt'], 'response.receipt');
  if (o['result'] !== undefined) check(verdict === 'allow', 'response.result', 'only an allow carries a result');
  return {
    decision,
    receipt,
    ...(o['result'] !== undefined ? { result: asBytes(o['result'], 'response.result') } : {}),
  };
}

/**
 * Decodes a response body: a decided response or an error.
 * @throws JcpError as {@link decodeWireMessage}, and `schema` for a message that is not a response.
 */
export function decodeWireResponse(bytes: Uint8Array): WireResponse {
  const m = decodeWireMessage(bytes);
  if (m.kind === 'response') return m.response;
  if (m.kind === 'error') return { error: m.error };
  throw new JcpError(ErrorCodes.SCHEMA, `message: expected a response, got ${m.kind}`, { field: 'message' });
}
