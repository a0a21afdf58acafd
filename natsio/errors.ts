/**
 * The errors of the NATS layer, each with a stable `code` that callers switch on (never on the
 * message text).
 */

/** The stable code of {@link NatsUnavailable}. */
export const NATS_UNAVAILABLE = 'nats-unavailable';

/** No usable NATS: nothing listens, a listener that is not NATS, or no answer in time. Code `nats-unavailable`. */
export class NatsUnavailable extends Error {
  override readonly name = 'NatsUnavailable';
  readonly code = NATS_UNAVAILABLE;
}

/** The stable codes of {@link NatsNameError}, one per kind of name. */
export const NatsNameCodes = {
  /** A subject (or subject filter) that NATS would refuse or misread: empty tokens, spaces, misplaced wildcards. */
  SUBJECT: 'nats-bad-subject',
  /** A JetStream stream (or KV bucket) name the server refuses: empty, over 255 bytes, `.`, `*`, `>`, spaces, path separators. */
  STREAM_NAME: 'nats-bad-stream-name',
} as const;

/** One of the {@link NatsNameCodes}. */
export type NatsNameCode = (typeof NatsNameCodes)[keyof typeof NatsNameCodes];

/** A name refused before it reaches the server. Code `nats-bad-subject` or `nats-bad-stream-name`. */
export class NatsNameError extends Error {
  override readonly name = 'NatsNameError';
  readonly code: NatsNameCode;
  /** The refused name, verbatim. */
  readonly value: string;

  constructor(code: NatsNameCode, value: string, why: string) {
    super(`${code === NatsNameCodes.SUBJECT ? 'subject' : 'stream name'} ${JSON.stringify(value)}: ${why}`);
    this.code = code;
    this.value = value;
  }
}

/** The stable code of {@link NatsDeadline}. */
export const NATS_DEADLINE = 'nats-deadline';

/** An operation retried until its deadline without success. Code `nats-deadline`; `cause` is the last attempt's error. */
export class NatsDeadline extends Error {
  override readonly name = 'NatsDeadline';
  readonly code = NATS_DEADLINE;
  /** How many attempts were made. */
  readonly attempts: number;

  constructor(message: string, attempts: number, options?: ErrorOptions) {
    super(message, options);
    this.attempts = attempts;
  }
}
