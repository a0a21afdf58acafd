/**
 * Threshold-actor failures (spec §2.2): one `const` table of stable codes, a {@link FrostFault}
 * value that names who misbehaved (pure rounds return it inside a `Result`), and
 * {@link FrostError}, the same fault thrown at the edges (actors, share files, the CLI).
 *
 * Callers switch on `code`, never on the message text. A fault that blames somebody lists the
 * blamed participants in `culprits` (FROST identifier and, where known, did:key), so "who" is
 * data, as in noble's aggregate error.
 */
import type { Did } from '../core/index.ts';

/** Every failure a threshold actor reports, by stable code. */
export const FrostErrorCodes = {
  /** Threshold parameters out of range (need 2 ≤ min ≤ max ≤ MAX_PARTICIPANTS). */
  BAD_PARAMS: 'frost-bad-params',
  /** A message that is not a well-formed, correctly signed jcp-frost/1 envelope. */
  BAD_MESSAGE: 'frost-bad-message',
  /** A message for another session, another round, or another recipient (replayed or misrouted). */
  MISROUTED: 'frost-misrouted',
  /** The same sender sent two different messages for one session and round (evidence kept). */
  EQUIVOCATION: 'frost-equivocation',
  /** A participant did not answer within the round's deadline; the session was aborted. */
  PARTICIPANT_LOST: 'frost-participant-lost',
  /** Fewer participants than needed answered (at invite or commitment time). */
  NOT_ENOUGH_PARTICIPANTS: 'frost-not-enough-participants',
  /** The session as a whole ran past its deadline. */
  TIMEOUT: 'frost-timeout',
  /** Another party aborted the session; `culprits` are the ones it blamed. */
  ABORTED: 'frost-aborted',
  /** A DKG round-1 package whose proof of knowledge or commitment is invalid. */
  BAD_COMMITMENT: 'frost-bad-commitment',
  /** A DKG round-2 share that does not match its sender's commitment (vss_verify failed; evidence kept). */
  INCONSISTENT_SHARE: 'frost-inconsistent-share',
  /** An encrypted round-2 share that does not decrypt under the session's pairwise key. */
  UNDECRYPTABLE_SHARE: 'frost-undecryptable-share',
  /** Participants ended a DKG with different group keys or public packages. */
  GROUP_MISMATCH: 'frost-group-mismatch',
  /** A signing package a participant refuses to sign (its commitment missing or altered, duplicate or zero identifier, identity element…). */
  BAD_PACKAGE: 'frost-bad-package',
  /** A signing commitment was already consumed (a replayed package or a second use). */
  NONCE_USED: 'frost-nonce-used',
  /** A signing package names a commitment this participant never issued (or issued for another session). */
  NONCE_UNKNOWN: 'frost-nonce-unknown',
  /** A signature share that fails RFC 9591 §5.4 verification. */
  BAD_SIGNATURE_SHARE: 'frost-bad-signature-share',
  /** The aggregate did not verify as an Ed25519 signature under the group key. */
  BAD_SIGNATURE: 'frost-bad-signature',
  /** A participant refused to take part (policy, unknown group, busy). */
  REFUSED: 'frost-refused',
  /** The group's public package is unknown to the registry or inconsistent with its did:key. */
  UNKNOWN_GROUP: 'frost-unknown-group',
  /** A share or identity file that is not a jcp-frost file, or is structurally broken. */
  FILE_MALFORMED: 'frost-file-malformed',
  /** A share file whose contents were altered (digest, AEAD tag or share/commitment check failed). */
  FILE_TAMPERED: 'frost-file-tampered',
  /** A sealed file opened with the wrong passphrase. */
  WRONG_PASSPHRASE: 'frost-wrong-passphrase',
  /** A sealed file opened without any passphrase. */
  PASSPHRASE_REQUIRED: 'frost-passphrase-required',
  /** A secret file readable or writable by group or others (must be mode 0600). */
  FILE_PERMISSIONS: 'frost-file-permissions',
  /** The nonce journal is damaged in the middle (not just a torn last record). */
  JOURNAL_CORRUPT: 'frost-journal-corrupt',
  /** The nonce journal could not be made durable (fdatasync failed): no share leaves. */
  JOURNAL_IO: 'frost-journal-io',
  /** Another live process holds this keystore. */
  KEYSTORE_LOCKED: 'frost-keystore-locked',
  /** The messaging layer failed (NATS down, JetStream unavailable). */
  TRANSPORT: 'frost-transport',
  /** The holder's approval policy refused the call (rules, a person at the terminal, a webhook, or no answer in time). */
  NOT_APPROVED: 'frost-not-approved',
  /** The message to sign is not a JCP wire request (§11 signing bytes) and the holder does not sign raw bytes. */
  NOT_A_REQUEST: 'frost-not-a-request',
  /** A signing package for another message than the one this holder approved for the session. */
  APPROVAL_MISMATCH: 'frost-approval-mismatch',
  /** An approval policy (rules file, webhook URL) that does not parse: the participant does not start. */
  POLICY_INVALID: 'frost-policy-invalid',
  /**
   * A participant started without an approval policy (`--approve`; library: no `approver`, no
   * `signAll`): it does not start, as a holder that signs whatever a coordinator sends would let
   * that coordinator sign alone (spec §2.2). `--approve allow-all` asks for that explicitly.
   */
  APPROVE_REQUIRED: 'frost-approve-required',
  /**
   * `--approve webhook` without a shared secret (`--webhook-secret-file`/`--webhook-secret-env`) and
   * without `--webhook-unauthenticated`: unsigned answers would let anything that answers the URL
   * first approve, so the participant does not start.
   */
  WEBHOOK_SECRET_REQUIRED: 'frost-webhook-secret-required',
} as const;

/** One of the stable FROST failure codes. */
export type FrostErrorCode = (typeof FrostErrorCodes)[keyof typeof FrostErrorCodes];

/** A participant blamed by a fault: its FROST identifier (1-based roster index) and did:key. */
export interface Culprit {
  readonly identifier?: number;
  readonly did?: Did;
}

/** A failure as a value: code, human text, and who is to blame (possibly nobody). */
export interface FrostFault {
  readonly code: FrostErrorCode;
  readonly why: string;
  readonly culprits: readonly Culprit[];
}

/** Builds a {@link FrostFault}. */
export function fault(code: FrostErrorCode, why: string, culprits: readonly Culprit[] = []): FrostFault {
  return { code, why, culprits };
}

/** The thrown form of a {@link FrostFault}, used at the edges (actors, files, CLI). */
export class FrostError extends Error {
  override readonly name = 'FrostError';
  readonly code: FrostErrorCode;
  readonly culprits: readonly Culprit[];
  /** Optional structured detail (session id, file path, evidence location). */
  readonly detail: Record<string, unknown> | undefined;

  constructor(
    code: FrostErrorCode,
    message: string,
    culprits: readonly Culprit[] = [],
    detail?: Record<string, unknown>,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.culprits = culprits;
    this.detail = detail;
  }

  /** Throws a fault value as a FrostError. */
  static of(f: FrostFault, detail?: Record<string, unknown>): FrostError {
    return new FrostError(f.code, f.why, f.culprits, detail);
  }

  /** `{code, message, culprits}` for logs and JSON output. */
  toJSON(): { code: FrostErrorCode; message: string; culprits: readonly Culprit[] } {
    return { code: this.code, message: this.message, culprits: this.culprits };
  }
}

/** True when `e` is a {@link FrostError} (optionally with the given code). */
export function isFrostError(e: unknown, code?: FrostErrorCode): e is FrostError {
  return e instanceof FrostError && (code === undefined || e.code === code);
}

/** "identifier 2 (did:key:z6Mk…)" for messages. */
export function describeCulprits(culprits: readonly Culprit[]): string {
  return culprits
    .map((c) => (c.identifier !== undefined ? `participant ${c.identifier}${c.did ? ` (${c.did})` : ''}` : (c.did ?? '?')))
    .join(', ');
}
