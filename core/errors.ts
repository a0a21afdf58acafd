/**
 * Stable error codes for malformed input (as opposed to protocol denies, see `deny.ts`).
 *
 * Every decoder and verifier in `core/` refuses bad input by throwing a {@link JcpError} whose
 * `code` is one of {@link ErrorCodes}; callers switch on the code, never on the message text.
 */
export const ErrorCodes = {
  /** Bytes are not well-formed CBOR (truncated, bad major type, trailing bytes…). */
  CBOR_MALFORMED: 'cbor-malformed',
  /** Well-formed CBOR that is not in det-CBOR canonical form (§3): unsorted/duplicate keys, long-form ints, indefinite lengths. */
  CBOR_NON_CANONICAL: 'cbor-non-canonical',
  /** A type forbidden in a signed core (§3): float, bool, null, undefined, or an unexpected tag. */
  CBOR_FORBIDDEN_TYPE: 'cbor-forbidden-type',
  /** A did:key that does not parse, is not Ed25519, or whose key is non-canonical or of small order (§2). */
  DID_INVALID: 'did-invalid',
  /** An object whose fields do not match the expected schema. */
  SCHEMA: 'schema',
  /** A key, signature or hash of the wrong length or encoding. */
  BAD_LENGTH: 'bad-length',
  /** jcp/1 frame declares a length above the receiver's cap (§11). */
  FRAME_TOO_LARGE: 'frame-too-large',
  /** jcp/1 stream ended in the middle of a frame (§11). */
  FRAME_TRUNCATED: 'frame-truncated',
  /** jcp/1 frame whose body buffer the receiver could not allocate (out of memory or address space; §11). */
  FRAME_UNALLOCATABLE: 'frame-unallocatable',
  /** COSE_Sign1 structure is not the JCR-1 profile (§8): wrong tag, header, or alg. */
  COSE_INVALID: 'cose-invalid',
  /** COSE algorithm or key type other than EdDSA over Ed25519 (e.g. Ed448, ES256): not supported (§8). */
  COSE_UNSUPPORTED: 'cose-unsupported',
  /** A signature did not verify. */
  SIGNATURE_INVALID: 'signature-invalid',
  /** An attempt that the protocol forbids at mint/author time (amplification, over-sum shards…). */
  REFUSED: 'refused',
  /** A chain file whose readable `grant` view disagrees with its signed `cbor` (budget, actions, subject…). */
  CHAIN_FILE_MISMATCH: 'chain-file-mismatch',
  /** A transparency-log index or tree size past the tree (RFC 9162 §2.1.3, §2.1.4): a proof for a seq the log does not hold. */
  TLOG_RANGE: 'tlog-range',
  /** An RFC 9162 inclusion or consistency proof that does not verify against the root(s) given. */
  PROOF_INVALID: 'proof-invalid',
  /** Text that is not a C2SP signed note or tlog-checkpoint (missing lines, bad base64, bad size). */
  NOTE_MALFORMED: 'note-malformed',
  /** A signed note with no valid signature by the expected key (signed by another key, or altered). */
  NOTE_UNVERIFIED: 'note-unverified',
  /** A C2SP tlog-cosignature that does not verify over the checkpoint given (another checkpoint, another key). */
  COSIGNATURE_INVALID: 'cosignature-invalid',
} as const;

/** One of the stable error code strings. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** The one error class thrown for bad input anywhere in the protocol core. */
export class JcpError extends Error {
  override readonly name = 'JcpError';
  readonly code: ErrorCode;
  /** Optional structured detail (field name, offsets, limits) for people and logs. */
  readonly detail: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, detail?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.detail = detail;
  }

  /** Wire form `{code, message}` as carried in a jcp/1 error reply (§11, docs/design.md "Encodings"). */
  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

/** True when `e` is a {@link JcpError} (optionally with the given code). */
export function isJcpError(e: unknown, code?: ErrorCode): e is JcpError {
  return e instanceof JcpError && (code === undefined || e.code === code);
}

/** Throws a SCHEMA error naming `field` unless `cond` holds. A titled assert in the noble style. */
export function check(cond: unknown, field: string, what: string): asserts cond {
  if (!cond) throw new JcpError(ErrorCodes.SCHEMA, `${field}: ${what}`, { field });
}
