/**
 * Stable error codes of the enforcement node (spec §11, docs/design.md "Encodings"): what a jcp/1 error
 * reply `{error: {code, message}}` can carry, besides the core codes of `core/errors.ts`
 * (`frame-too-large`, `cbor-malformed`, `cbor-non-canonical`, `cbor-forbidden-type`, `schema`,
 * `did-invalid`, `bad-length`, …). An error reply never carries a receipt: the message never
 * reached a decision, so nothing was debited.
 */
import type { ErrorCode } from '../core/index.ts';

/** Node-level error codes, one const table; callers switch on the code, never the message. */
export const NodeErrorCodes = {
  /** The request's `now` is further than `max_skew_s` from the node's clock (docs/design.md "Decisions and the ledger"). */
  CLOCK_SKEW: 'clock-skew',
  /** A well-formed message whose top-level key the node does not serve. */
  UNKNOWN_MESSAGE: 'unknown-message',
  /** A partial frame was not completed within the read timeout; the connection is closed. */
  READ_TIMEOUT: 'read-timeout',
  /** The node is at its connection limit or shutting down; retry later. */
  BUSY: 'busy',
  /** The payload is not what the resource's endpoint takes (a JSON object of tool arguments). */
  PAYLOAD_INVALID: 'payload-invalid',
  /**
   * The frame names a resource this node does not serve (not in its config's `resources`): no
   * enforcement point guards it here, so the request is refused before any decision, debit or
   * receipt.
   */
  UNKNOWN_RESOURCE: 'unknown-resource',
  /** A revocation failed its authority check (§4.3): wrong grant, not the issuer, bad signature. */
  REVOCATION_REFUSED: 'revocation-refused',
  /** An amendment was not admitted (§4.7): the message names the refusal (`not-issuer: …`, `widening: …`, `already-amended: …`). */
  AMENDMENT_REFUSED: 'amendment-refused',
  /**
   * An amendment or revocation whose issuer is outside the node's record policy (config
   * `abuse.record_policy`, node/issuerpolicy.ts): not a trust root of a served resource, not an
   * issuer of a grant the node decided, not in `abuse.record_issuers`. Not stored, not relayed.
   */
  ISSUER_REFUSED: 'issuer-refused',
  /**
   * An amendment or revocation over a record limit (node/issuerpolicy.ts): larger than
   * `abuse.record_max_bytes`, its issuer's bucket empty (`abuse.record_burst`), or the revocation
   * set at `abuse.max_revocations`. Not stored, not relayed; retry later.
   */
  RECORD_LIMIT: 'record-limit',
  /** The receipt could not be made durable; nothing was replied as decided. */
  LOG_FAILED: 'log-failed',
  /**
   * The frame's action is not a tool the resource's MCP server lists (`tools/list`); refused before
   * the decision: no receipt, no debit.
   */
  UNKNOWN_TOOL: 'unknown-tool',
  /**
   * A request's `input` (MCP multi round-trip material, docs/wire.md) is not what it must be: not
   * `{capabilities?, responses?, state?}` with an object, an object and a string, or a `state` on a
   * resource that is not an MCP server. No receipt, no debit.
   */
  INPUT_INVALID: 'input-invalid',
  /**
   * A continuation whose `input.state` (the node's continuation token) the node does not hold for
   * this caller, grant, resource and tool: tampered, replayed (each token continues one round
   * once), expired, minted by another node, or the request's signature does not verify
   * (docs/node.md "Multi round-trip calls"). No receipt, no debit, nothing sent upstream.
   */
  INPUT_STATE_INVALID: 'input-state-invalid',
  /**
   * An `agent-task` frame names a skill the A2A agent's card does not list (as `unknown-tool` for an
   * MCP server; docs/a2a.md); refused before the decision: no receipt, no debit.
   */
  UNKNOWN_SKILL: 'unknown-skill',
  /**
   * A `SendMessage`/`SendStreamingMessage` whose message names no skill in `metadata.skill`, while
   * the grant allows more than one skill of the agent (docs/a2a.md); refused before the decision.
   */
  SKILL_REQUIRED: 'skill-required',
  /**
   * The skill a message names (`metadata.skill`), or the skill a task started under, is not the
   * frame's action (docs/a2a.md); refused before the decision.
   */
  SKILL_MISMATCH: 'skill-mismatch',
  /**
   * The frame's kind does not fit the resource: a `tool-call` (or any kind but `agent-task`) to an
   * A2A agent, or an `agent-task` to an MCP server (docs/a2a.md); refused before the decision.
   */
  FRAME_KIND_MISMATCH: 'frame-kind-mismatch',
  /**
   * A follow-up (`GetTask`, `CancelTask`, `SubscribeToTask`, a message continuing or referencing a
   * task) names a task this node did not see started by this caller under this leaf grant: the
   * same answer whether the task is unknown or another caller's (docs/a2a.md); no receipt.
   */
  TASK_NOT_FOUND: 'task-not-found',
  /**
   * The A2A agent already has as many streams open as its endpoint allows, for this caller
   * (`max_streams_per_peer`), for this peer address (max of that and half of `max_streams`) or in
   * total (`max_streams`); refused before the decision; retry later.
   */
  STREAM_LIMIT: 'stream-limit',
  /** An unexpected fault inside the node (a bug); the message never reached a decision. */
  INTERNAL: 'internal',
  /**
   * The peer address sent too many requests that failed before a decision, bad-signature or
   * untrusted-root requests, or all peers together sent too many of the latter two (config
   * `abuse`, `abuse.deny_burst`): refused, no receipt; retry later (node/ratelimit.ts).
   */
  RATE_LIMITED: 'rate-limited',
} as const;

/** One node-level error code. */
export type NodeErrorCode = (typeof NodeErrorCodes)[keyof typeof NodeErrorCodes];

/** Any code a jcp/1 error reply can carry. */
export type WireErrorCode = ErrorCode | NodeErrorCode;

/**
 * Typed failures of the node's own machinery (config, key file, receipt log). They stop the node
 * at start with the field or file named; they never reach the wire.
 */
export const NodeFaultCodes = {
  /** The config file is missing, not JSON, or a field is wrong (the field is named). */
  CONFIG_INVALID: 'config-invalid',
  /** The steward key file is unreadable, malformed, or readable by others than its owner. */
  KEY_FILE_INVALID: 'key-file-invalid',
  /** The receipt log exists but cannot be opened or read (corrupt, unreadable). */
  LOG_CORRUPT: 'log-corrupt',
  /**
   * Boot replay found receipts that fail verification or a continuity break (a missing, reordered
   * or replaced receipt). Starting would hand their spend back; the operator decides
   * (`jcp receipts verify`, then `jcp node start --accept-damaged-log`).
   */
  LOG_DAMAGED: 'log-damaged',
  /** The receipt log is open in another process (a running node holds its LevelDB lock). */
  LOG_LOCKED: 'log-locked',
  /** The data folder says a log was created here, but the log is gone: it is never recreated empty. */
  LOG_MISSING: 'log-missing',
  /** The log was written by another steward key than the one configured. */
  LOG_STEWARD_MISMATCH: 'log-steward-mismatch',
  /** The listen (or metrics) address could not be bound: in use, not local, not permitted. */
  LISTEN_FAILED: 'listen-failed',
} as const;

/** One node fault code. */
export type NodeFaultCode = (typeof NodeFaultCodes)[keyof typeof NodeFaultCodes];

/** A typed failure of the node's machinery, with a stable `code` and (when it applies) the field or path. */
export class NodeFault extends Error {
  override readonly name = 'NodeFault';
  readonly code: NodeFaultCode;
  /** The config field, file or folder at fault. */
  readonly where: string | undefined;

  constructor(code: NodeFaultCode, message: string, where?: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.where = where;
  }
}
